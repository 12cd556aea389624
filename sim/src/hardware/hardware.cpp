#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/hardware/power_limit.hpp"
#include "pipesim/sim/hardware/stragglers.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "core/data_dir.hpp"
#include "core/json_reader.hpp"
#include "hardware/spec_sheet.hpp"
#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/core/time.hpp"

namespace pipesim::sim {

using detail::json;
using detail::JsonObject;

namespace {

constexpr double kBig = 1e18;

std::vector<CurvePoint> read_curve(JsonObject& o, const std::string& key, const std::string& xkey,
                                   const std::string& ykey, double ymax, bool required) {
  const json* v = o.raw_optional(key);
  std::vector<CurvePoint> out;
  if (!v) {
    if (required) o.fail(key, "missing required key");
    return out;
  }
  if (!v->is_array() || v->empty())
    o.fail(key, fmt::format("expected a non-empty array of {{\"{}\", \"{}\"}}", xkey, ykey));
  for (std::size_t i = 0; i < v->size(); ++i) {
    JsonObject p((*v)[i], o.file(), o.path_of(key) + "/" + std::to_string(i));
    CurvePoint c{p.number(xkey, 1e-12, kBig), p.number(ykey, 0, ymax)};
    p.finish();
    if (!out.empty() && c.x <= out.back().x)
      throw InputError(o.file(), o.path_of(key) + "/" + std::to_string(i),
                       fmt::format("'{}' must be strictly increasing", xkey));
    out.push_back(c);
  }
  return out;
}

std::map<std::string, std::string> read_sources(JsonObject& o, const std::vector<std::string>& figures) {
  std::map<std::string, std::string> out;
  JsonObject s = o.object("sources");
  for (const auto& f : figures) {
    if (o.has(f)) out[f] = s.string(f);
  }
  s.finish();
  return out;
}

void write_sources(json& j, const std::map<std::string, std::string>& sources) {
  json s = json::object();
  for (const auto& [k, v] : sources) s[k] = v;
  j["sources"] = s;
}

json curve_json(const std::vector<CurvePoint>& c, const char* xkey, const char* ykey) {
  json a = json::array();
  for (const auto& p : c) a.push_back({{xkey, p.x}, {ykey, p.y}});
  return a;
}

/// `gemm_efficiency_by_dtype`: {"DTYPE": [{"gemm_gflop", "efficiency"}, ...]}, each a dtype the profile has
/// a peak for.
std::map<std::string, std::vector<CurvePoint>> read_dtype_curves(JsonObject& g,
                                                                 const std::map<std::string, double>& peaks) {
  std::map<std::string, std::vector<CurvePoint>> out;
  const json* v = g.raw_optional("gemm_efficiency_by_dtype");
  if (!v) return out;
  if (!v->is_object() || v->empty())
    g.fail("gemm_efficiency_by_dtype", "expected an object of dtypes, each a curve like gemm_efficiency");
  JsonObject curves(*v, g.file(), g.path_of("gemm_efficiency_by_dtype"));
  std::string valid;
  for (const auto& [dtype, peak] : peaks) valid += (valid.empty() ? "" : ", ") + dtype;
  for (const auto& item : v->items()) {
    if (!peaks.count(item.key()))
      curves.fail(item.key(), fmt::format("no peak_tflops for this dtype; valid: {}", valid));
    out[item.key()] = read_curve(curves, item.key(), "gemm_gflop", "efficiency", 1.0, true);
  }
  curves.finish();
  return out;
}

/// `attention_kernels`: {"NAME": {"source": "...", "points": [{"head_dim", "seq", "forward_tflops",
/// "backward_tflops"}, ...]}}, the points by head dimension, then sequence, increasing.
std::map<std::string, AttentionKernelRates> read_attention_kernels(JsonObject& g) {
  std::map<std::string, AttentionKernelRates> out;
  const json* v = g.raw_optional("attention_kernels");
  if (!v) return out;
  if (!v->is_object() || v->empty())
    g.fail("attention_kernels", "expected an object of kernel names, each {\"source\", \"points\"}");
  JsonObject kernels(*v, g.file(), g.path_of("attention_kernels"));
  for (const auto& [name, body] : v->items()) {
    JsonObject k = kernels.object(name);
    AttentionKernelRates rates;
    rates.source = k.string("source");
    if (rates.source.empty()) k.fail("source", "empty; name the benchmark these rates come from");
    const json& pts = k.raw("points");
    if (!pts.is_array() || pts.empty() || pts.size() > 1024)
      k.fail("points", "expected 1 to 1024 {\"head_dim\", \"seq\", \"forward_tflops\", \"backward_tflops\"}");
    for (std::size_t i = 0; i < pts.size(); ++i) {
      const std::string where = k.path_of("points") + "/" + std::to_string(i);
      JsonObject p(pts[i], g.file(), where);
      AttentionKernelPoint a{p.integer("head_dim", 1, 4096), p.integer("seq", 1, std::int64_t{1} << 24),
                             p.number("forward_tflops", 1e-3, 1e5), p.number("backward_tflops", 1e-3, 1e5)};
      p.finish();
      if (!rates.points.empty()) {
        const auto& b = rates.points.back();
        if (a.head_dim < b.head_dim || (a.head_dim == b.head_dim && a.seq <= b.seq))
          throw InputError(g.file(), where,
                           "points must go by head_dim, then seq, both increasing (no shape twice)");
      }
      rates.points.push_back(a);
    }
    k.finish();
    out[name] = std::move(rates);
  }
  return out;
}

json attention_kernels_json(const std::map<std::string, AttentionKernelRates>& kernels) {
  json out = json::object();
  for (const auto& [name, rates] : kernels) {
    json pts = json::array();
    for (const auto& p : rates.points)
      pts.push_back({{"head_dim", p.head_dim},
                     {"seq", p.seq},
                     {"forward_tflops", p.forward_tflops},
                     {"backward_tflops", p.backward_tflops}});
    out[name] = {{"source", rates.source}, {"points", pts}};
  }
  return out;
}

void read_gpu(JsonObject& r, GpuSpec& gpu) {
  JsonObject g = r.object("gpu");
  gpu.model = g.string("model");
  JsonObject pk = g.object("peak_tflops");
  for (const char* dt : {"bf16", "fp16", "fp16_acc16", "fp32", "fp8"}) {
    if (pk.has(dt)) gpu.peak_tflops[dt] = pk.number(dt, 1e-6, 1e6);  // down to a CPU thread's MFLOP/s
  }
  pk.finish();
  if (!gpu.peak_tflops.count("bf16") && !gpu.peak_tflops.count("fp16"))
    g.fail("peak_tflops", "needs at least one of bf16, fp16");
  gpu.hbm_bytes = g.integer("hbm_bytes", 1, std::int64_t{1} << 50);
  gpu.hbm_GBps = g.number("hbm_GBps", 1e-3, 1e6);
  gpu.hbm_efficiency = g.number_or("hbm_efficiency", 1.0, 0.01, 1.0);
  gpu.unfused_attention_efficiency = g.number_or("unfused_attention_efficiency", 0, 0.01, 1.0);
  gpu.collective_compute_slowdown = g.number_or("collective_compute_slowdown", 0, 0, 4.0);
  gpu.launch_overhead = duration_from_us(g.number("launch_overhead_us", 0, 1e4));
  gpu.gemm_efficiency = read_curve(g, "gemm_efficiency", "gemm_gflop", "efficiency", 1.0, true);
  gpu.gemm_efficiency_by_dtype = read_dtype_curves(g, gpu.peak_tflops);
  gpu.board_W = g.number_or("board_W", 0, 0, 1e4);
  gpu.power_clock_exponent = g.number_or("power_clock_exponent", 0, 0.5, 10);
  if (g.has("power_limit_W")) {
    gpu.power_limit_W = g.number("power_limit_W", 0, 1e4);
    if (const std::string why = power_limit_error(gpu, gpu.power_limit_W); !why.empty())
      g.fail("power_limit_W", why);
  }
  gpu.speed_cv = g.number_or("speed_cv", 0, 0, kMaxSpeedCv);
  gpu.runtime_reserved_bytes = g.has("runtime_reserved_bytes")
                                   ? g.integer("runtime_reserved_bytes", 0, gpu.hbm_bytes - 1)
                                   : (g.accept("runtime_reserved_bytes"), std::int64_t{0});
  gpu.attention_kernels = read_attention_kernels(g);
  if (g.has("unaligned_gemm_tflops")) {
    JsonObject u = g.object("unaligned_gemm_tflops");
    gpu.unaligned_gemm = {u.number("forward", 1e-3, 1e6), u.number("backward", 1e-3, 1e6)};
    u.finish();
  } else {
    g.accept("unaligned_gemm_tflops");
  }
  gpu.sources =
      read_sources(g, {"model", "peak_tflops", "hbm_bytes", "hbm_GBps", "hbm_efficiency",
                       "unfused_attention_efficiency", "collective_compute_slowdown", "launch_overhead_us",
                       "gemm_efficiency", "gemm_efficiency_by_dtype", "board_W", "power_clock_exponent",
                       "power_limit_W", "unaligned_gemm_tflops", "runtime_reserved_bytes", "speed_cv"});
  g.finish();
}

/// The GPUs under each PCIe switch: every one of the node's `gpus` under exactly one.
void read_pcie_switches(JsonObject& p, int gpus, PcieSpec& pcie) {
  const std::string& file = p.file();
  const json& sw = p.raw("switches");
  std::vector<int> owner(static_cast<std::size_t>(gpus), -1);
  if (!sw.is_array() || sw.empty()) p.fail("switches", "expected a non-empty array of arrays of GPU indices");
  for (std::size_t i = 0; i < sw.size(); ++i) {
    std::string path = p.path_of("switches") + "/" + std::to_string(i);
    if (!sw[i].is_array() || sw[i].empty())
      throw InputError(file, path, "expected a non-empty array of GPU indices");
    std::vector<int> members;
    for (std::size_t k = 0; k < sw[i].size(); ++k) {
      std::string ep = path + "/" + std::to_string(k);
      int gi = static_cast<int>(detail::checked_integer(sw[i][k], file, ep, 0, gpus - 1));
      if (owner[static_cast<std::size_t>(gi)] >= 0)
        throw InputError(
            file, ep,
            fmt::format("GPU {} is already under switch {}", gi, owner[static_cast<std::size_t>(gi)]));
      owner[static_cast<std::size_t>(gi)] = static_cast<int>(i);
      members.push_back(gi);
    }
    pcie.switches.push_back(members);
  }
  for (int gi = 0; gi < gpus; ++gi)
    if (owner[static_cast<std::size_t>(gi)] < 0)
      p.fail("switches",
             fmt::format("GPU {} is under no switch; every GPU 0..{} must appear once", gi, gpus - 1));
}

void read_pcie(JsonObject& n, int gpus, PcieSpec& pcie) {
  JsonObject p = n.object("pcie");
  pcie.link = p.string_or("link", "pcie");
  if (pcie.link != "pcie" && pcie.link != "nvlink-c2c")
    p.fail("link", fmt::format("unknown host link '{}'; valid: pcie, nvlink-c2c", pcie.link));
  pcie.gen = pcie.link == "pcie" ? static_cast<int>(p.integer("gen", 1, 7)) : 0;
  pcie.lane_GBps = p.number("lane_GBps", 1e-3, 1e5);
  pcie.uplink_GBps = p.number("uplink_GBps", 1e-3, 1e5);
  pcie.latency = duration_from_us(p.number("latency_us", 0, 1e5));
  pcie.root_complex_GBps = p.number_or("root_complex_GBps", 0, 0, 1e6);
  pcie.peer_to_peer = p.boolean_or("peer_to_peer", true);
  pcie.staged_busbw_GBps = p.number_or("staged_busbw_GBps", 0, 1e-3, 1e5);
  if (pcie.peer_to_peer && pcie.staged_busbw_GBps > 0)
    p.fail("staged_busbw_GBps", "is for GPUs without peer-to-peer; valid: with \"peer_to_peer\": false");
  read_pcie_switches(p, gpus, pcie);
  pcie.h2d_GBps_by_size = read_curve(p, "h2d_GBps_by_size", "bytes", "GBps", 1e5, false);
  pcie.d2h_GBps_by_size = read_curve(p, "d2h_GBps_by_size", "bytes", "GBps", 1e5, false);
  pcie.sources = read_sources(
      p, {"link", "gen", "lane_GBps", "uplink_GBps", "root_complex_GBps", "latency_us", "switches",
          "peer_to_peer", "staged_busbw_GBps", "h2d_GBps_by_size", "d2h_GBps_by_size"});
  p.finish();
}

/// The NVLink groups `g` lists: each of the node's `gpus` in one at most.
void read_nvlink_groups(JsonObject& nv, const json* g, int gpus, NvlinkSpec& nvlink) {
  const std::string& file = nv.file();
  std::vector<int> seen(static_cast<std::size_t>(gpus), 0);
  if (!g->is_array()) nv.fail("groups", "expected an array of arrays of GPU indices");
  for (std::size_t i = 0; i < g->size(); ++i) {
    std::string path = nv.path_of("groups") + "/" + std::to_string(i);
    if (!(*g)[i].is_array()) throw InputError(file, path, "expected an array of GPU indices");
    std::vector<int> members;
    for (std::size_t k = 0; k < (*g)[i].size(); ++k) {
      std::string ep = path + "/" + std::to_string(k);
      int gi = static_cast<int>(detail::checked_integer((*g)[i][k], file, ep, 0, gpus - 1));
      if (seen[static_cast<std::size_t>(gi)]++)
        throw InputError(file, ep, fmt::format("GPU {} is in two NVLink groups", gi));
      members.push_back(gi);
    }
    nvlink.groups.push_back(members);
  }
}

void read_nvlink(JsonObject& n, int gpus, NvlinkSpec& nvlink) {
  JsonObject nv = n.object("nvlink");
  nvlink.GBps_per_direction = nv.number("GBps_per_direction", 0, 1e5);
  nvlink.latency = duration_from_us(nv.number("latency_us", 0, 1e5));
  nvlink.allreduce_busbw_GBps = nv.number("allreduce_busbw_GBps", 0, 1e5);
  nvlink.allreduce_busbw_by_size = read_curve(nv, "allreduce_busbw_by_size", "bytes", "GBps", 1e5, false);
  if (const json* g = nv.raw_optional("groups")) read_nvlink_groups(nv, g, gpus, nvlink);
  nvlink.domain_nodes = static_cast<int>(nv.integer_or("domain_nodes", 1, 1, 4096));
  if (nvlink.domain_nodes > 1 && (!nvlink.groups.empty() || nvlink.GBps_per_direction <= 0))
    nv.fail("domain_nodes",
            "an NVLink domain of several nodes needs NVLink between all GPUs of a node (a rate > 0, no "
            "groups)");
  nvlink.nccl_channels = static_cast<int>(nv.integer_or("nccl_channels", 0, 1, 64));
  nvlink.nccl_p2p_channels_per_peer = static_cast<int>(nv.integer_or("nccl_p2p_channels_per_peer", 0, 1, 64));
  nvlink.nvls = nv.boolean_or("nvls", false);
  if ((nvlink.nccl_channels > 0) != (nvlink.nccl_p2p_channels_per_peer > 0))
    nv.fail(nvlink.nccl_channels > 0 ? "nccl_channels" : "nccl_p2p_channels_per_peer",
            "NCCL's channels come as a pair; valid: nccl_channels with nccl_p2p_channels_per_peer");
  if (nvlink.nvls && nvlink.nccl_channels == 0)
    nv.fail("nvls", "NVLS buffers are sized by NCCL's channels; valid: with nccl_channels");
  nvlink.sources =
      read_sources(nv, {"GBps_per_direction", "latency_us", "allreduce_busbw_GBps", "allreduce_busbw_by_size",
                        "groups", "domain_nodes", "nccl_channels", "nccl_p2p_channels_per_peer", "nvls"});
  nv.finish();
}

void read_node(JsonObject& r, NodeSpec& node) {
  JsonObject n = r.object("node");
  node.gpus = static_cast<int>(n.integer("gpus", 1, 1024));
  read_pcie(n, node.gpus, node.pcie);
  read_nvlink(n, node.gpus, node.nvlink);
  n.finish();
}

void read_host(JsonObject& r, HostSpec& host) {
  JsonObject h = r.object("host");
  host.cpu_model = h.string("cpu_model");
  host.cores = static_cast<int>(h.integer("cores", 1, 100000));
  host.dram_bytes = h.integer("dram_bytes", 1, std::int64_t{1} << 55);
  host.dram_GBps = h.number("dram_GBps", 1e-3, 1e6);
  host.adam_params_per_s_by_threads =
      read_curve(h, "adam_params_per_s_by_threads", "threads", "params_per_s", 1e13, true);
  if (h.has("nvme")) {
    JsonObject nv = h.object("nvme");
    host.nvme.bytes = nv.integer("bytes", 1, std::int64_t{1} << 60);
    host.nvme.read_GBps = nv.number("read_GBps", 1e-3, 1e4);
    host.nvme.write_GBps = nv.number("write_GBps", 1e-3, 1e4);
    host.nvme.latency = duration_from_us(nv.number("latency_us", 0, 1e5));
    host.nvme.sources = read_sources(nv, {"bytes", "read_GBps", "write_GBps", "latency_us"});
    nv.finish();
  }
  host.sources =
      read_sources(h, {"cpu_model", "cores", "dram_bytes", "dram_GBps", "adam_params_per_s_by_threads"});
  h.finish();
}

void read_network(JsonObject& r, NetworkSpec& network) {
  JsonObject w = r.object("network");
  network.nic_GBps = w.number("nic_GBps", 1e-3, 1e5);
  network.latency = duration_from_us(w.number("latency_us", 0, 1e6));
  network.leaf_nodes = static_cast<std::int32_t>(w.integer_or("leaf_nodes", 0, 0, 1 << 20));
  network.oversubscription = w.number_or("oversubscription", 1, 1, 1024);
  network.switch_latency = duration_from_us(w.number_or("switch_latency_us", 0, 0, 1e4));
  if (network.leaf_nodes == 0 && (w.has("oversubscription") || w.has("switch_latency_us")))
    w.fail("leaf_nodes",
           "missing; a spine tier (oversubscription, switch_latency_us) needs the nodes of a leaf");
  if (w.has("collective_busbw_by_nodes")) {
    JsonObject c = w.object("collective_busbw_by_nodes");
    network.busbw_message_bytes = c.integer("message_bytes", 1, std::int64_t{1} << 40);
    const char* kinds[] = {"all_reduce", "all_gather", "reduce_scatter"};  // CollectiveKind's order
    for (std::size_t k = 0; k < 3; ++k) {
      network.busbw_by_nodes[k] = read_curve(c, kinds[k], "nodes", "GBps", 1e5, false);
      for (std::size_t i = 0; i < network.busbw_by_nodes[k].size(); ++i)
        if (network.busbw_by_nodes[k][i].x < 1 || network.busbw_by_nodes[k][i].y < 1e-3)
          throw InputError(c.file(), c.path_of(kinds[k]) + "/" + std::to_string(i),
                           "a measurement needs 1 node or more and a bus bandwidth of 0.001 GB/s or more");
    }
    c.finish();
  }
  if (w.has("step_latency_us")) {
    JsonObject l = w.object("step_latency_us");
    const char* protocols[] = {"LL", "LL128", "Simple"};  // NcclProtocol's order
    for (std::size_t p = 0; p < 3; ++p) network.step_latency_us[p] = l.number(protocols[p], 1e-3, 1e5);
    l.finish();
  }
  network.reported_latency_us = w.number_or("plugin_latency_us", 0, 0, 1e5);
  network.sources =
      read_sources(w, {"nic_GBps", "latency_us", "leaf_nodes", "oversubscription", "switch_latency_us",
                       "collective_busbw_by_nodes", "step_latency_us", "plugin_latency_us"});
  w.finish();
}

}  // namespace

HardwareProfile parse_hardware_profile(const std::string& text, const std::string& file) {
  json root = detail::parse_json_text(text, file);
  // A spec sheet (datasheet figures only) is completed into a profile with stated default efficiencies.
  if (root.is_object() && root.value("format", json()) == "pipesim-spec")
    return parse_hardware_profile(complete_spec_sheet(text, file), file);
  JsonObject r(root, file, "");
  if (r.string("format") != "pipesim-hw") r.fail("format", "expected \"pipesim-hw\"");
  if (r.integer("version", 0, 1000) != 1) r.fail("version", "unsupported version; valid: 1");
  HardwareProfile hw;
  hw.origin = file;
  hw.name = r.string("name");
  hw.description = r.string("description");
  hw.gpu_hour_usd = r.number_or("gpu_hour_usd", 0, 0, 1e6);
  if (const json* c = r.raw_optional("calibrated")) {
    // Provenance written by `pipesim calibrate` (date, host, method, samples, CV); kept verbatim.
    if (!c->is_object()) r.fail("calibrated", "expected an object");
    hw.calibrated_json = c->dump();
  }
  read_gpu(r, hw.gpu);
  read_node(r, hw.node);
  read_host(r, hw.host);
  read_network(r, hw.network);
  r.finish();
  return hw;
}

HardwareProfile load_hardware_profile(const std::string& name_or_path) {
  const std::string path = resolve_shipped(name_or_path, "hw_profiles", "hardware profile");
  return parse_hardware_profile(detail::read_text_file(path), path);
}

std::vector<std::string> shipped_hardware_profiles() {
  return shipped_names("hw_profiles");
}

namespace {

/// The profile's gpu section as its file writes it.
json gpu_json(const GpuSpec& gpu) {
  json g = {{"model", gpu.model},
            {"peak_tflops", gpu.peak_tflops},
            {"hbm_bytes", gpu.hbm_bytes},
            {"hbm_GBps", gpu.hbm_GBps},
            {"launch_overhead_us", to_us(gpu.launch_overhead)},
            {"gemm_efficiency", curve_json(gpu.gemm_efficiency, "gemm_gflop", "efficiency")}};
  if (gpu.hbm_efficiency != 1.0) g["hbm_efficiency"] = gpu.hbm_efficiency;
  if (gpu.unfused_attention_efficiency > 0)
    g["unfused_attention_efficiency"] = gpu.unfused_attention_efficiency;
  if (gpu.collective_compute_slowdown > 0) g["collective_compute_slowdown"] = gpu.collective_compute_slowdown;
  if (gpu.board_W > 0) g["board_W"] = gpu.board_W;
  if (gpu.power_clock_exponent > 0) g["power_clock_exponent"] = gpu.power_clock_exponent;
  if (gpu.power_limit_W > 0) g["power_limit_W"] = gpu.power_limit_W;
  if (gpu.speed_cv > 0) g["speed_cv"] = gpu.speed_cv;
  if (gpu.runtime_reserved_bytes > 0) g["runtime_reserved_bytes"] = gpu.runtime_reserved_bytes;
  if (gpu.unaligned_gemm.forward_tflops > 0)
    g["unaligned_gemm_tflops"] = {{"forward", gpu.unaligned_gemm.forward_tflops},
                                  {"backward", gpu.unaligned_gemm.backward_tflops}};
  for (const auto& [dtype, curve] : gpu.gemm_efficiency_by_dtype)
    g["gemm_efficiency_by_dtype"][dtype] = curve_json(curve, "gemm_gflop", "efficiency");
  if (!gpu.attention_kernels.empty()) g["attention_kernels"] = attention_kernels_json(gpu.attention_kernels);
  write_sources(g, gpu.sources);
  return g;
}

}  // namespace

std::string hardware_profile_to_json(const HardwareProfile& hw) {
  json g = gpu_json(hw.gpu);
  json p = {{"lane_GBps", hw.node.pcie.lane_GBps},
            {"uplink_GBps", hw.node.pcie.uplink_GBps},
            {"latency_us", to_us(hw.node.pcie.latency)},
            {"switches", hw.node.pcie.switches}};
  if (hw.node.pcie.link == "pcie")
    p["gen"] = hw.node.pcie.gen;
  else
    p["link"] = hw.node.pcie.link;
  if (hw.node.pcie.root_complex_GBps > 0) p["root_complex_GBps"] = hw.node.pcie.root_complex_GBps;
  if (!hw.node.pcie.peer_to_peer) p["peer_to_peer"] = false;
  if (hw.node.pcie.staged_busbw_GBps > 0) p["staged_busbw_GBps"] = hw.node.pcie.staged_busbw_GBps;
  if (!hw.node.pcie.h2d_GBps_by_size.empty())
    p["h2d_GBps_by_size"] = curve_json(hw.node.pcie.h2d_GBps_by_size, "bytes", "GBps");
  if (!hw.node.pcie.d2h_GBps_by_size.empty())
    p["d2h_GBps_by_size"] = curve_json(hw.node.pcie.d2h_GBps_by_size, "bytes", "GBps");
  write_sources(p, hw.node.pcie.sources);
  json nv = {{"GBps_per_direction", hw.node.nvlink.GBps_per_direction},
             {"latency_us", to_us(hw.node.nvlink.latency)},
             {"allreduce_busbw_GBps", hw.node.nvlink.allreduce_busbw_GBps}};
  if (!hw.node.nvlink.allreduce_busbw_by_size.empty())
    nv["allreduce_busbw_by_size"] = curve_json(hw.node.nvlink.allreduce_busbw_by_size, "bytes", "GBps");
  if (!hw.node.nvlink.groups.empty()) nv["groups"] = hw.node.nvlink.groups;
  if (hw.node.nvlink.domain_nodes > 1) nv["domain_nodes"] = hw.node.nvlink.domain_nodes;
  if (hw.node.nvlink.nccl_channels > 0) {
    nv["nccl_channels"] = hw.node.nvlink.nccl_channels;
    nv["nccl_p2p_channels_per_peer"] = hw.node.nvlink.nccl_p2p_channels_per_peer;
  }
  if (hw.node.nvlink.nvls) nv["nvls"] = true;
  write_sources(nv, hw.node.nvlink.sources);
  json h = {{"cpu_model", hw.host.cpu_model},
            {"cores", hw.host.cores},
            {"dram_bytes", hw.host.dram_bytes},
            {"dram_GBps", hw.host.dram_GBps},
            {"adam_params_per_s_by_threads",
             curve_json(hw.host.adam_params_per_s_by_threads, "threads", "params_per_s")}};
  if (hw.host.nvme.bytes > 0) {
    json volume = {{"bytes", hw.host.nvme.bytes},
                   {"read_GBps", hw.host.nvme.read_GBps},
                   {"write_GBps", hw.host.nvme.write_GBps},
                   {"latency_us", to_us(hw.host.nvme.latency)}};
    write_sources(volume, hw.host.nvme.sources);
    h["nvme"] = volume;
  }
  write_sources(h, hw.host.sources);
  json w = {{"nic_GBps", hw.network.nic_GBps}, {"latency_us", to_us(hw.network.latency)}};
  // The optional figures as the file gave them (each given one has its source).
  const auto& given = hw.network.sources;
  if (given.count("leaf_nodes")) w["leaf_nodes"] = hw.network.leaf_nodes;
  if (given.count("oversubscription")) w["oversubscription"] = hw.network.oversubscription;
  if (given.count("switch_latency_us")) w["switch_latency_us"] = to_us(hw.network.switch_latency);
  if (given.count("step_latency_us"))
    w["step_latency_us"] = {{"LL", hw.network.step_latency_us[0]},
                            {"LL128", hw.network.step_latency_us[1]},
                            {"Simple", hw.network.step_latency_us[2]}};
  if (given.count("plugin_latency_us")) w["plugin_latency_us"] = hw.network.reported_latency_us;
  if (given.count("collective_busbw_by_nodes")) {
    json c = {{"message_bytes", hw.network.busbw_message_bytes}};
    const char* kinds[] = {"all_reduce", "all_gather", "reduce_scatter"};
    for (std::size_t k = 0; k < 3; ++k)
      if (!hw.network.busbw_by_nodes[k].empty())
        c[kinds[k]] = curve_json(hw.network.busbw_by_nodes[k], "nodes", "GBps");
    w["collective_busbw_by_nodes"] = c;
  }
  write_sources(w, hw.network.sources);
  json root = {{"format", "pipesim-hw"},
               {"version", 1},
               {"name", hw.name},
               {"description", hw.description},
               {"gpu", g},
               {"node", {{"gpus", hw.node.gpus}, {"pcie", p}, {"nvlink", nv}}},
               {"host", h},
               {"network", w}};
  if (hw.gpu_hour_usd > 0) root["gpu_hour_usd"] = hw.gpu_hour_usd;
  if (!hw.calibrated_json.empty()) root["calibrated"] = json::parse(hw.calibrated_json);
  return pipesim::sim::json_text(root, 2);
}

}  // namespace pipesim::sim
