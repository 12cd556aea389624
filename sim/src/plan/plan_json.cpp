#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/hardware/stragglers.hpp"

#include <fmt/format.h>

#include "core/json_reader.hpp"
#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/plan/plan_check.hpp"
#include "pipesim/sim/workload/kernel_composition.hpp"

namespace pipesim::sim {

using detail::json;
using detail::JsonObject;

namespace {

template <typename E, std::size_t N>
E enum_from(JsonObject& o, const std::string& key, const E (&values)[N]) {
  std::string s = o.string(key);
  std::string valid;
  for (E v : values) {
    if (s == to_string(v)) return v;
    valid += (valid.empty() ? "" : ", ") + std::string(to_string(v));
  }
  o.fail(key, fmt::format("unknown value '{}'; valid: {}", s, valid));
}

constexpr OpKind kOpKinds[] = {
    OpKind::kForward,   OpKind::kBackward,      OpKind::kBackwardInput, OpKind::kBackwardWeight,
    OpKind::kRecompute, OpKind::kH2D,           OpKind::kD2H,           OpKind::kP2P,
    OpKind::kAllReduce, OpKind::kAllGather,     OpKind::kReduceScatter, OpKind::kOptimizer,
    OpKind::kFill,      OpKind::kContextSwitch, OpKind::kNvmeRead,      OpKind::kNvmeWrite,
    OpKind::kAllToAll,  OpKind::kBubble,        OpKind::kSync};
constexpr StreamKind kStreamKinds[] = {StreamKind::kCompute, StreamKind::kH2D,     StreamKind::kD2H,
                                       StreamKind::kP2PSend, StreamKind::kP2PRecv, StreamKind::kCollective,
                                       StreamKind::kCpu,     StreamKind::kFill,    StreamKind::kNvme};
constexpr DeviceKind kDeviceKinds[] = {DeviceKind::kGpu, DeviceKind::kHost, DeviceKind::kNvme};

constexpr std::int64_t kI32 = 2147483647;
/// Byte counts of one op or device: a pebibyte is far beyond any device, and sums of up to 2^26 such
/// values stay inside int64.
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 36 << 14;
/// A fixed duration of one op: about 13 days.
constexpr std::int64_t kMaxOpNs = std::int64_t{1} << 50;

json meta_json(const PlanMeta& m) {
  json j = {{"schedule", m.schedule},
            {"model", m.model},
            {"pp", m.pp},
            {"tp", m.tp},
            {"dp", m.dp},
            {"virtual_stages", m.virtual_stages},
            {"microbatches", m.microbatches},
            {"accum_steps", m.accum_steps},
            {"iterations", m.iterations},
            {"seq", m.seq},
            {"global_batch", m.global_batch},
            {"recompute", m.recompute},
            {"lora_rank", m.lora_rank},
            {"replicas", m.replicas},
            {"data_parallel", m.data_parallel},
            {"ep", m.ep},
            {"simulated_gpus", m.simulated_gpus},
            {"model_flops_per_step", m.model_flops_per_step},
            {"hardware_flops_per_step", m.hardware_flops_per_step},
            {"dtype", m.dtype},
            {"partition", m.partition},
            {"note", m.note}};
  // Written only where they act, so plans without shared host links read as before.
  if (m.cp > 1) j["cp"] = m.cp;
  if (!m.framework.empty()) j["framework"] = m.framework;
  if (m.host_dispatch_ns > 0) j["host_dispatch_ns"] = m.host_dispatch_ns;
  if (m.elementwise_efficiency < 1) j["elementwise_efficiency"] = m.elementwise_efficiency;
  if (m.gpu_speed_cv > 0) j["gpu_speed_cv"] = m.gpu_speed_cv;
  if (m.communicator_bytes > 0) j["communicator_bytes"] = m.communicator_bytes;
  if (m.node_twins > 1) j["node_twins"] = m.node_twins;
  if (m.switch_twins > 1) j["switch_twins"] = m.switch_twins;
  return j;
}

PlanMeta meta_from(JsonObject o) {
  PlanMeta m;
  m.schedule = o.string("schedule");
  m.model = o.string("model");
  m.framework = o.string_or("framework", "");
  m.pp = static_cast<std::int32_t>(o.integer("pp", 1, 1 << 20));
  m.tp = static_cast<std::int32_t>(o.integer("tp", 1, 1 << 20));
  m.dp = static_cast<std::int32_t>(o.integer("dp", 1, 1 << 20));
  m.virtual_stages = static_cast<std::int32_t>(o.integer("virtual_stages", 1, 1 << 20));
  m.microbatches = static_cast<std::int32_t>(o.integer("microbatches", 1, kI32));
  m.accum_steps = static_cast<std::int32_t>(o.integer("accum_steps", 1, kI32));
  m.iterations = static_cast<std::int32_t>(o.integer_or("iterations", 1, 1, kI32));
  m.seq = static_cast<std::int32_t>(o.integer("seq", 0, kI32));
  m.global_batch = o.integer("global_batch", 0, std::int64_t{1} << 40);
  m.recompute = o.string("recompute");
  m.lora_rank = o.integer_or("lora_rank", 0, 0, 65536);
  m.replicas = o.string("replicas");
  m.data_parallel = o.string_or("data_parallel", "ddp");
  m.ep = static_cast<std::int32_t>(o.integer_or("ep", 1, 1, 1 << 20));
  m.cp = static_cast<std::int32_t>(o.integer_or("cp", 1, 1, 1 << 20));
  if (std::int64_t{m.pp} * m.tp * m.cp * m.dp > (std::int64_t{1} << 24))
    o.fail("dp", "pp x tp x cp x dp exceeds 16777216 GPUs");
  m.simulated_gpus = static_cast<std::int32_t>(o.integer("simulated_gpus", 0, kI32));
  m.node_twins = static_cast<std::int32_t>(o.integer_or("node_twins", 1, 1, 1 << 20));
  m.switch_twins = static_cast<std::int32_t>(o.integer_or("switch_twins", 1, 1, 1 << 20));
  m.model_flops_per_step = o.number("model_flops_per_step", 0, 1e30);
  m.hardware_flops_per_step = o.number("hardware_flops_per_step", 0, 1e30);
  m.dtype = o.string("dtype");
  m.host_dispatch_ns = o.integer_or("host_dispatch_ns", 0, 0, 1000000);  // at most 1 ms per kernel
  m.elementwise_efficiency = o.number_or("elementwise_efficiency", 1, kMinElementwiseEfficiency, 1);
  m.gpu_speed_cv = o.number_or("gpu_speed_cv", 0, 0, kMaxSpeedCv);
  m.communicator_bytes = o.integer_or("communicator_bytes", 0, 0, std::int64_t{1} << 50);
  const json& part = o.raw("partition");
  if (!part.is_array()) o.fail("partition", "expected an array of block counts");
  for (std::size_t i = 0; i < part.size(); ++i)
    m.partition.push_back(static_cast<std::int32_t>(detail::checked_integer(
        part[i], o.file(), o.path_of("partition") + "/" + std::to_string(i), 0, kI32)));
  m.note = o.string("note");
  o.finish();
  return m;
}

}  // namespace

std::string plan_to_json(const Plan& plan) {
  json root;
  root["format"] = "pipesim-plan";
  root["version"] = 1;
  root["meta"] = meta_json(plan.meta);
  root["hardware"] = json::parse(hardware_profile_to_json(plan.hw));
  root["nodes"] = plan.nodes;
  json devices = json::array();
  for (const auto& d : plan.devices)
    devices.push_back({{"name", d.name},
                       {"kind", to_string(d.kind)},
                       {"node", d.node},
                       {"local_index", d.local_index},
                       {"resident_bytes", d.resident_bytes}});
  root["devices"] = std::move(devices);
  json streams = json::array();
  for (const auto& s : plan.streams)
    streams.push_back({{"device", s.device}, {"kind", to_string(s.kind)}, {"name", s.name}});
  root["streams"] = std::move(streams);
  json ops = json::array();
  for (const auto& op : plan.ops) {
    json j = {{"stream", op.stream}, {"kind", to_string(op.kind)}};
    const auto& t = op.tags;
    j["tags"] = {{"stage", t.stage},           {"virtual_stage", t.virtual_stage},
                 {"microbatch", t.microbatch}, {"layer_begin", t.layer_begin},
                 {"layer_end", t.layer_end},   {"iteration", t.iteration}};
    if (const auto* c = compute_of(op.payload)) {
      j["compute"] = {{"flops", c->flops}, {"gemm_gflop", c->gemm_gflop}, {"kernels", c->kernels}};
      if (c->mem_bytes) j["compute"]["mem_bytes"] = c->mem_bytes;
      if (c->expert_flops > 0) {
        j["compute"]["expert_flops"] = c->expert_flops;
        j["compute"]["expert_gemm_gflop"] = c->expert_gemm_gflop;
        j["compute"]["expert_weight_bytes"] = c->expert_weight_bytes;
      }
      if (c->attention_bytes > 0) {
        j["compute"]["attention_flops"] = c->attention_flops;
        j["compute"]["attention_bytes"] = c->attention_bytes;
      }
      if (c->rated_flops > 0) {
        j["compute"]["rated_flops"] = c->rated_flops;
        j["compute"]["rated_tflops"] = c->rated_tflops;
      }
      if (!c->gemms.empty()) {
        json g = json::array();
        for (const auto& s : c->gemms) g.push_back({s.m, s.n, s.k, s.count});
        j["compute"]["gemms"] = std::move(g);
      }
      if (c->wide_flops > 0) j["compute"]["wide_flops"] = c->wide_flops;
      if (c->score_bytes > 0) j["compute"]["score_bytes"] = c->score_bytes;
      if (c->host_ns > 0) j["compute"]["host_ns"] = c->host_ns;
    } else if (const auto* x = std::get_if<TransferWork>(&op.payload)) {
      j["transfer"] = {{"src", x->src},     {"dst", x->dst},
                       {"bytes", x->bytes}, {"latency_steps", x->latency_steps},
                       {"group", x->group}, {"group_size", x->group_size}};
      if (x->priority != 0) j["transfer"]["priority"] = x->priority;
      if (x->message_bytes != 0) j["transfer"]["message_bytes"] = x->message_bytes;
      if (x->latency_ns >= 0) j["transfer"]["latency_ns"] = x->latency_ns;
    } else if (const auto* w = std::get_if<CpuWork>(&op.payload))
      j["cpu"] = {{"params", w->params}, {"threads", w->threads}};
    else if (const auto* m = std::get_if<MemoryWork>(&op.payload))
      j["memory"] = {{"bytes", m->bytes}};
    const OpExtras& extras = plan.extras_of(op);
    if (op.fixed_duration >= 0) j["duration_ns"] = op.fixed_duration;
    if (extras.alloc_bytes) j["alloc_bytes"] = extras.alloc_bytes;
    if (extras.free_bytes) j["free_bytes"] = extras.free_bytes;
    j["deps"] = op.deps;
    ops.push_back(std::move(j));
  }
  root["ops"] = std::move(ops);
  return pipesim::sim::json_text(root, 1) + "\n";
}

namespace {

/// An op's GEMM shape hints: [[m, n, k, count], ...], at most 64 shapes.
std::vector<GemmShape> read_gemms(JsonObject& c) {
  std::vector<GemmShape> out;
  const json* v = c.raw_optional("gemms");
  if (!v) return out;
  if (!v->is_array() || v->size() > 64) c.fail("gemms", "expected an array of at most 64 [m, n, k, count]");
  for (std::size_t i = 0; i < v->size(); ++i) {
    const json& g = (*v)[i];
    const std::string path = c.path_of("gemms") + "/" + std::to_string(i);
    if (!g.is_array() || g.size() != 4)
      throw InputError(c.file(), path, "expected [m, n, k, count] (four integers)");
    const std::int64_t big = std::int64_t{1} << 40;
    out.push_back({detail::checked_integer(g[0], c.file(), path + "/0", 1, big),
                   detail::checked_integer(g[1], c.file(), path + "/1", 1, big),
                   detail::checked_integer(g[2], c.file(), path + "/2", 1, big),
                   detail::checked_integer(g[3], c.file(), path + "/3", 1, std::int64_t{1} << 31)});
  }
  return out;
}

void read_devices(JsonObject& r, const std::string& file, Plan& plan) {
  const json& devices = r.raw("devices");
  if (!devices.is_array()) r.fail("devices", "expected an array");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    JsonObject d(devices[i], file, fmt::format("/devices/{}", i));
    Device dev;
    dev.name = d.string("name");
    dev.kind = enum_from(d, "kind", kDeviceKinds);
    dev.node = static_cast<std::int32_t>(d.integer("node", 0, kI32));
    dev.local_index = static_cast<std::int32_t>(d.integer("local_index", 0, kI32));
    dev.resident_bytes = d.integer("resident_bytes", 0, kMaxBytes);
    d.finish();
    plan.devices.push_back(std::move(dev));
  }
}

void read_streams(JsonObject& r, const std::string& file, Plan& plan) {
  const json& streams = r.raw("streams");
  if (!streams.is_array()) r.fail("streams", "expected an array");
  for (std::size_t i = 0; i < streams.size(); ++i) {
    JsonObject s(streams[i], file, fmt::format("/streams/{}", i));
    Stream st;
    st.device = static_cast<DeviceId>(s.integer("device", 0, kI32));
    st.kind = enum_from(s, "kind", kStreamKinds);
    st.name = s.string("name");
    s.finish();
    plan.streams.push_back(std::move(st));
  }
}

OpTags read_tags(JsonObject t) {
  OpTags tags;
  tags.stage = static_cast<std::int32_t>(t.integer("stage", -1, kI32));
  tags.virtual_stage = static_cast<std::int32_t>(t.integer("virtual_stage", -1, kI32));
  tags.microbatch = static_cast<std::int32_t>(t.integer("microbatch", -1, kI32));
  tags.layer_begin = static_cast<std::int16_t>(t.integer("layer_begin", -1, kMaxLayerIndex));
  tags.layer_end = static_cast<std::int16_t>(t.integer("layer_end", -1, kMaxLayerIndex));
  tags.iteration = static_cast<std::int32_t>(t.integer("iteration", 0, kI32));
  t.finish();
  return tags;
}

ComputeWork read_compute(JsonObject c) {
  ComputeWork work{c.number("flops", 0, 1e30),
                   c.number("gemm_gflop", 0, 1e30),
                   static_cast<std::int32_t>(c.integer("kernels", 0, kI32)),
                   c.integer_or("mem_bytes", 0, 0, kMaxBytes),
                   c.number_or("expert_flops", 0, 0, 1e30),
                   c.number_or("expert_gemm_gflop", 0, 0, 1e30),
                   c.integer_or("expert_weight_bytes", 0, 0, kMaxBytes),
                   c.number_or("attention_flops", 0, 0, 1e30),
                   c.integer_or("attention_bytes", 0, 0, kMaxBytes),
                   read_gemms(c),
                   c.number_or("wide_flops", 0, 0, 1e30),
                   c.integer_or("score_bytes", 0, 0, kMaxBytes)};
  work.rated_flops = c.number_or("rated_flops", 0, 0, 1e30);
  work.rated_tflops = c.number_or("rated_tflops", 0, 0, 1e6);
  work.host_ns = c.integer_or("host_ns", 0, 0, kMaxOpNs);
  if (work.rated_flops > 0 && work.rated_tflops <= 0)
    c.fail("rated_tflops", "missing or 0 beside rated_flops; valid: the kernel's TFLOP/s");
  if (work.expert_flops + work.attention_flops + work.wide_flops + work.rated_flops > work.flops)
    c.fail("rated_flops", "with the other shares exceeds flops; valid: 0 .. the rest");
  if (work.score_bytes > work.mem_bytes) c.fail("score_bytes", "exceeds mem_bytes; valid: 0 .. mem_bytes");
  if (work.expert_flops + work.attention_flops > work.flops)
    c.fail("attention_flops", "with expert_flops exceeds flops; valid: 0 .. flops - expert_flops");
  if (work.expert_flops > work.flops) c.fail("expert_flops", "exceeds flops; valid: 0 .. flops");
  if (work.expert_flops + work.attention_flops + work.wide_flops > work.flops)
    c.fail("wide_flops", "with expert_flops and attention_flops exceeds flops; valid: 0 .. the rest");
  c.finish();
  return work;
}

TransferWork read_transfer(JsonObject c) {
  TransferWork w;
  w.src = static_cast<DeviceId>(c.integer("src", 0, kI32));
  w.dst = static_cast<DeviceId>(c.integer("dst", 0, kI32));
  w.bytes = c.integer("bytes", 0, kMaxBytes);
  w.latency_steps = static_cast<std::int32_t>(c.integer("latency_steps", 0, 1 << 20));
  w.group = static_cast<std::int32_t>(c.integer("group", -1, kI32));
  w.group_size = static_cast<std::int32_t>(c.integer("group_size", 1, kI32));
  set_priority(w, static_cast<std::int32_t>(c.integer_or("priority", 0, 0, 1)));
  w.message_bytes = c.integer_or("message_bytes", 0, 0, kMaxBytes);
  set_latency_ns(w, c.integer_or("latency_ns", -1, -1, kMaxTransferLatencyNs));
  c.finish();
  return w;
}

/// Every payload key present is read (and so checked) before the count says whether exactly one was given.
void read_payload(JsonObject& o, Op& op) {
  int payloads = 0;
  if (o.has("compute")) {
    op.payload = read_compute(o.object("compute"));
    ++payloads;
  }
  if (o.has("transfer")) {
    op.payload = read_transfer(o.object("transfer"));
    ++payloads;
  }
  if (o.has("cpu")) {
    JsonObject c = o.object("cpu");
    op.payload =
        CpuWork{c.integer("params", 0, kMaxBytes), static_cast<std::int32_t>(c.integer("threads", 1, kI32))};
    c.finish();
    ++payloads;
  }
  if (o.has("memory")) {
    JsonObject c = o.object("memory");
    op.payload = MemoryWork{c.integer("bytes", 0, kMaxBytes)};
    c.finish();
    ++payloads;
  }
  if (payloads != 1) o.fail("", "an op needs exactly one of: compute, transfer, cpu, memory");
}

/// Op `i` of `op_count`, appended to the plan with its memory extras.
void read_op(const json& v, std::size_t i, std::size_t op_count, const std::string& file, Plan& plan) {
  JsonObject o(v, file, fmt::format("/ops/{}", i));
  Op op;
  op.stream = static_cast<StreamId>(o.integer("stream", 0, kI32));
  op.kind = enum_from(o, "kind", kOpKinds);
  op.tags = read_tags(o.object("tags"));
  read_payload(o, op);
  op.fixed_duration = o.integer_or("duration_ns", -1, 0, kMaxOpNs);
  const OpExtras extras{o.integer_or("alloc_bytes", 0, 0, kMaxBytes),
                        o.integer_or("free_bytes", 0, 0, kMaxBytes)};
  const json& deps = o.raw("deps");
  if (!deps.is_array()) o.fail("deps", "expected an array of op indices");
  op.deps.reserve(deps.size());
  for (std::size_t k = 0; k < deps.size(); ++k)
    op.deps.push_back(static_cast<OpId>(detail::checked_integer(
        deps[k], file, fmt::format("/ops/{}/deps/{}", i, k), 0, static_cast<std::int64_t>(op_count) - 1)));
  o.finish();
  plan.ops.push_back(std::move(op));
  if (extras != OpExtras{}) plan.extras_of(static_cast<OpId>(plan.ops.size() - 1)) = extras;
}

}  // namespace

Plan plan_from_json(const std::string& text, const std::string& file) {
  json root = detail::parse_json_text(text, file);
  JsonObject r(root, file, "");
  if (r.string("format") != "pipesim-plan") r.fail("format", "expected \"pipesim-plan\"");
  if (r.integer("version", 0, 1000) != 1) r.fail("version", "unsupported version; valid: 1");
  Plan plan;
  plan.meta = meta_from(r.object("meta"));
  plan.hw = parse_hardware_profile(pipesim::sim::json_text(r.raw("hardware")), file + " (/hardware)");
  plan.hw.origin = file;
  plan.nodes = static_cast<std::int32_t>(r.integer("nodes", 1, 1 << 20));

  read_devices(r, file, plan);
  read_streams(r, file, plan);
  const json& ops = r.raw("ops");
  if (!ops.is_array()) r.fail("ops", "expected an array");
  plan.ops.reserve(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) read_op(ops[i], i, ops.size(), file, plan);
  r.finish();
  plan.origin = file;
  validate_plan(plan, file);  // every reference checked before anything reads the plan
  return plan;
}

Plan load_plan(const std::string& path) {
  return plan_from_json(detail::read_text_file(path), path);
}

}  // namespace pipesim::sim
