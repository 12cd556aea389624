#include "hardware/spec_sheet.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "core/json_reader.hpp"

namespace pipesim::sim {

using detail::json;
using detail::JsonObject;

namespace {

// The H100 profile's estimated GEMM-efficiency shape (GFLOP of one GEMM -> share of peak) at 989 dense
// TFLOP/s: a faster GPU needs proportionally bigger GEMMs to fill it.
constexpr double kReferencePeakTflops = 989;
const std::vector<std::pair<double, double>> kGemmShape = {
    {0.132, 0.003}, {8.46, 0.185}, {16.9, 0.357}, {100, 0.6}, {1000, 0.75}};
// nccl-tests all-reduce bus bandwidth over 8 H100s (NVLink 4, 450 GB/s per direction) against message size.
constexpr double kReferenceNvlinkGBps = 450;
const std::vector<std::pair<double, double>> kBusbwShape = {
    {1048576, 44}, {16777216, 235}, {268435456, 423}, {1073741824, 466}, {8589934592, 479}};
// Pinned host copies per direction by PCIe generation (x16), as measured on Gen3-5 hosts; Gen6 doubles Gen5.
const std::map<std::int64_t, double> kPcieGBps = {{3, 12}, {4, 25}, {5, 55}, {6, 110}};

json curve(const std::vector<std::pair<double, double>>& points, double x_scale, double y_scale,
           const char* x, const char* y) {
  json a = json::array();
  for (const auto& [px, py] : points) a.push_back({{x, px * x_scale}, {y, py * y_scale}});
  return a;
}

/// The dense peaks the spec sheet states, by dtype.
json read_peaks(JsonObject& g) {
  json peaks = json::object();
  JsonObject pk = g.object("peak_tflops");
  for (const char* dt : {"bf16", "fp16", "fp16_acc16", "fp32", "fp8"})
    if (pk.has(dt)) peaks[dt] = pk.number(dt, 1e-3, 1e6);
  pk.finish();
  return peaks;
}

json gpu_sources(double peak) {
  return {
      {"model", "spec sheet"},
      {"peak_tflops", "spec sheet: dense TFLOP/s"},
      {"hbm_bytes", "spec sheet"},
      {"hbm_GBps", "spec sheet"},
      {"hbm_efficiency", "default: streaming kernels reach about 85% of datasheet bandwidth"},
      {"collective_compute_slowdown",
       "default: compute beside a collective runs 18.9 % slower on average (arXiv:2507.03114, A100, H100, "
       "MI250, MI210)"},
      {"launch_overhead_us", "default: typical CUDA kernel launch overhead"},
      {"gemm_efficiency",
       fmt::format("default: the h100-sxm-8x estimate with GEMM sizes scaled by the peak ratio ({:g}/{:g}); "
                   "run `pipesim calibrate` to measure",
                   peak, kReferencePeakTflops)}};
}

/// The profile's "gpu" from the spec sheet's (`g`, whose model is read).
json complete_gpu(JsonObject& g, const std::string& model) {
  json peaks = read_peaks(g);
  if (!peaks.contains("bf16") && !peaks.contains("fp16"))
    g.fail("peak_tflops", "needs the dense bf16 or fp16 TFLOP/s");
  const double peak = peaks.contains("bf16") ? peaks["bf16"].get<double>() : peaks["fp16"].get<double>();
  const double hbm_gb = g.number("hbm_GB", 1e-3, 1e6), hbm_tbps = g.number("hbm_TBps", 1e-3, 1e3);
  const double board_w = g.number_or("board_W", 0, 0, 1e4);
  g.finish();
  json gpu = {
      {"model", model},
      {"peak_tflops", peaks},
      {"hbm_bytes", static_cast<std::int64_t>(std::llround(hbm_gb * 1e9))},
      {"hbm_GBps", hbm_tbps * 1000},
      {"hbm_efficiency", 0.85},
      {"collective_compute_slowdown", 0.189},
      {"launch_overhead_us", 4.0},
      {"gemm_efficiency", curve(kGemmShape, peak / kReferencePeakTflops, 1, "gemm_gflop", "efficiency")}};
  json gs = gpu_sources(peak);
  if (board_w > 0) {
    gpu["board_W"] = board_w;
    gs["board_W"] = "spec sheet";
  }
  gpu["sources"] = gs;
  return gpu;
}

json complete_pcie(std::int64_t gpus, std::int64_t gen, bool p2p) {
  json switches = json::array();
  for (std::int64_t i = 0; i < gpus; i += 2) {
    json s = json::array({i});
    if (i + 1 < gpus) s.push_back(i + 1);
    switches.push_back(s);
  }
  const double lane = kPcieGBps.at(gen);
  json pcie = {
      {"gen", gen}, {"lane_GBps", lane}, {"uplink_GBps", lane}, {"latency_us", 2.0}, {"switches", switches}};
  if (!p2p) pcie["peer_to_peer"] = false;
  pcie["sources"] = {
      {"gen", "spec sheet"},
      {"lane_GBps", fmt::format("default: pinned x16 copies on PCIe Gen{} ({:g} GB/s)", gen, lane)},
      {"uplink_GBps", "default: one x16 uplink per switch"},
      {"latency_us", "default: typical cudaMemcpy latency"},
      {"switches", "default: PCIe switches with 2 GPUs each"}};
  if (!p2p) pcie["sources"]["peer_to_peer"] = "spec sheet: peer-to-peer disabled";
  return pcie;
}

/// `nvlink`: bidirectional GB/s per GPU; `domain`: GPUs in an NVLink domain.
json complete_nvlink(std::int64_t gpus, double nvlink, std::int64_t domain) {
  const double per_direction = nvlink / 2;
  json nv = {{"GBps_per_direction", per_direction}, {"latency_us", 3.0}};
  json nvs = {{"GBps_per_direction", "spec sheet: half the bidirectional NVLink figure"},
              {"latency_us", "default: typical NCCL step latency"}};
  if (per_direction > 0) {
    const double scale = per_direction / kReferenceNvlinkGBps;
    nv["allreduce_busbw_GBps"] = kBusbwShape.back().second * scale;
    nv["allreduce_busbw_by_size"] = curve(kBusbwShape, 1, scale, "bytes", "GBps");
    const std::string why = fmt::format(
        "default: the 8x H100 nccl-tests curve scaled by the NVLink rate ({:g}/{:g} GB/s per direction)",
        per_direction, kReferenceNvlinkGBps);
    nvs["allreduce_busbw_GBps"] = why;
    nvs["allreduce_busbw_by_size"] = why;
  } else {
    nv["allreduce_busbw_GBps"] = 0;
    nvs["allreduce_busbw_GBps"] = "spec sheet: no NVLink";
  }
  if (domain > gpus) {
    nv["domain_nodes"] = domain / gpus;
    nvs["domain_nodes"] = "spec sheet: NVLink domain size";
  }
  nv["sources"] = nvs;
  return nv;
}

/// The profile's "node" from the spec sheet's (`n`, whose `gpus` are read).
json complete_node(JsonObject& n, std::int64_t gpus, const std::string& file) {
  const std::int64_t gen = n.integer("pcie_gen", 3, 6);
  const double nvlink = n.number_or("nvlink_GBps", 0, 0, 1e5);  // bidirectional per GPU, as datasheets say
  const std::int64_t domain = n.integer_or("nvlink_domain_gpus", gpus, 1, 1 << 20);
  const bool p2p = n.boolean_or("peer_to_peer", true);
  n.finish();
  if (domain % gpus != 0 || (domain > gpus && nvlink <= 0))
    throw InputError(file, "/node/nvlink_domain_gpus",
                     fmt::format("{} GPUs: valid: a multiple of the node's {} GPUs, and NVLink above 0 GB/s "
                                 "for a domain beyond the node",
                                 domain, gpus));
  return {{"gpus", gpus},
          {"pcie", complete_pcie(gpus, gen, p2p)},
          {"nvlink", complete_nvlink(gpus, nvlink, domain)}};
}

json complete_host(JsonObject& h) {
  const double mem_gb = h.number("memory_GB", 1e-3, 1e7);
  const std::int64_t cores = h.integer_or("cores", 64, 1, 1 << 16);
  const double dram = h.number_or("memory_GBps", 300, 1e-3, 1e5);
  h.finish();
  json adam = json::array();
  const double cap = 0.9 * dram * 1e9 / 28;  // bytes Adam moves per parameter: 28
  for (std::int64_t t = 1;; t *= 2) {
    const std::int64_t threads = std::min(t, cores);
    adam.push_back({{"threads", threads},
                    {"params_per_s", std::round(std::min(0.25e9 * static_cast<double>(threads), cap))}});
    if (threads == cores) break;
  }
  return {{"cpu_model", "unknown (spec sheet)"},
          {"cores", cores},
          {"dram_bytes", static_cast<std::int64_t>(std::llround(mem_gb * 1e9))},
          {"dram_GBps", dram},
          {"adam_params_per_s_by_threads", adam},
          {"sources",
           {{"cpu_model", "spec sheet"},
            {"cores", h.has("cores") ? "spec sheet" : "default: 64 cores"},
            {"dram_bytes", "spec sheet"},
            {"dram_GBps", "default: 300 GB/s unless the spec sheet gives memory_GBps"},
            {"adam_params_per_s_by_threads",
             "default: 0.25 G params/s per thread, capped at 90% of dram_GBps / 28 B per parameter"}}}};
}

json complete_network(JsonObject& w) {
  const double nic_gbps = w.number("nic_Gbps", 1e-3, 1e6);
  w.finish();
  return {
      {"nic_GBps", nic_gbps / 8},
      {"latency_us", 5.0},
      {"sources",
       {{"nic_GBps", "spec sheet: NIC Gb/s per GPU / 8"}, {"latency_us", "default: typical RDMA latency"}}}};
}

}  // namespace

std::string complete_spec_sheet(const std::string& text, const std::string& file) {
  json root = detail::parse_json_text(text, file);
  JsonObject r(root, file, "");
  if (r.string("format") != "pipesim-spec") r.fail("format", "expected \"pipesim-spec\"");
  if (r.integer("version", 0, 1000) != 1) r.fail("version", "unsupported version; valid: 1");
  json hw = {{"format", "pipesim-hw"}, {"version", 1}, {"name", r.string("name")}};
  const double usd = r.number_or("gpu_hour_usd", 0, 0, 1e6);
  if (usd > 0) hw["gpu_hour_usd"] = usd;
  JsonObject g = r.object("gpu");
  const std::string model = g.string("model");
  hw["gpu"] = complete_gpu(g, model);
  JsonObject n = r.object("node");
  const std::int64_t gpus = n.integer("gpus", 1, 1024);
  hw["node"] = complete_node(n, gpus, file);
  JsonObject h = r.object("host");
  hw["host"] = complete_host(h);
  JsonObject w = r.object("network");
  hw["network"] = complete_network(w);
  hw["description"] = r.string_or(
      "description",
      fmt::format("{}x {} from its spec sheet, default efficiencies (pipesim-spec)", gpus, model));
  r.finish();
  return hw.dump(1);
}

}  // namespace pipesim::sim
