#include "pipesim/sim/report/metrics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pipesim/sim/core/json_text.hpp"
#include "report/op_sweep.hpp"

namespace pipesim::sim {

namespace {

/// Appends a number as nlohmann's dump writes it, through the function its serializer calls (Grisu2's digits,
/// "0.0" for zero; non-finite numbers as null): the output stays the same byte for byte.
void append_number(std::string& out, double x) {
  if (!std::isfinite(x)) {
    out += "null";
    return;
  }
  std::array<char, 64> buf{};
  out.append(buf.data(), nlohmann::detail::to_chars(buf.data(), buf.data() + buf.size(), x));
}

/// The per-GPU entries, written as nlohmann's dump writes an array of objects one level into the document:
/// at 8,192 GPUs, building them as JSON values first took most of the output's time.
std::string per_gpu_json(const std::vector<GpuMetrics>& gpus, int indent) {
  const bool pretty = indent >= 0;
  const std::size_t step = pretty ? static_cast<std::size_t>(indent) : 0;
  // A line break and the indentation of a depth: before an entry and its closing brace (2), each key (3),
  // the closing bracket (1).
  auto line = [&](std::size_t depth) {
    std::string l(pretty ? depth * step + 1 : 0, ' ');
    if (pretty) l[0] = '\n';
    return l;
  };
  const std::string entry = line(2), key = line(3);
  const char* colon = pretty ? ": " : ":";
  std::string out;
  out.reserve(gpus.size() * 200);
  out += '[';
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const GpuMetrics& g = gpus[i];
    if (i > 0) out += ',';
    out += entry;
    out += '{';
    auto field = [&](const char* name, bool first) {
      if (!first) out += ',';
      out += key;
      out += '"';
      out += name;
      out += '"';
      out += colon;
    };
    field("device", true);
    out += json_text(nlohmann::ordered_json(g.device));  // escaped as everywhere else
    field("busy_s", false);
    append_number(out, g.busy_s);
    field("warmup_s", false);
    append_number(out, g.warmup_s);
    field("intra_s", false);
    append_number(out, g.intra_s);
    field("drain_s", false);
    append_number(out, g.drain_s);
    field("peak_mem_bytes", false);
    out += std::to_string(g.peak_mem_bytes);
    out += entry;
    out += '}';
  }
  out += line(1);
  out += ']';
  return out;
}

using Intervals = std::vector<std::pair<TimePoint, TimePoint>>;

/// The span the metrics measure: from the first op's start to the last op's end.
struct RunSpan {
  TimePoint first;
  TimePoint last;
  Duration step;  // last - first
};

void set_step_times(Metrics& m, const RunSpan& span, const std::vector<TimePoint>& iteration_end) {
  const Duration step = span.step;
  m.run_time_s = to_seconds(step);
  m.first_step_time_s = to_seconds(iteration_end.front() - span.first);
  m.steady_state_step_time_s =
      m.iterations > 1 ? to_seconds(iteration_end.back() - iteration_end.front()) / (m.iterations - 1)
                       : m.run_time_s;
  m.step_time_s = m.steady_state_step_time_s;
  m.step_span_ns = m.iterations > 1 ? iteration_end.back() - iteration_end.front() : step;
  m.step_span_iterations = m.iterations > 1 ? m.iterations - 1 : 1;
}

/// The simulated GPUs' compute streams in all, for the bubble fractions.
struct GpuTotals {
  Duration busy = 0, warm = 0, drain = 0;
  std::int32_t gpus = 0;
};

/// Adds each simulated GPU's (one with a compute stream) entry to `m.gpus`.
GpuTotals add_gpu_metrics(Metrics& m, const Plan& plan, const Timeline& tl, const OpSweep& sweep,
                          const RunSpan& span) {
  const TimePoint first = span.first, last = span.last;
  const Duration step = span.step;
  const std::vector<Duration>& busy = sweep.busy;
  const std::vector<TimePoint>& first_c = sweep.first_compute_start;
  const std::vector<TimePoint>& last_c = sweep.last_compute_end;
  const std::size_t nd = plan.devices.size();
  std::vector<char> has_compute(nd, 0);
  for (const auto& s : plan.streams)
    if (s.kind == StreamKind::kCompute) has_compute[static_cast<std::size_t>(s.device)] = 1;
  GpuTotals total;
  for (std::size_t d = 0; d < nd; ++d) {
    if (plan.devices[d].kind != DeviceKind::kGpu || !has_compute[d]) continue;
    ++total.gpus;
    GpuMetrics g;
    g.device = plan.devices[d].name;
    g.busy_s = to_seconds(busy[d]);
    Duration warm = last_c[d] < 0 ? step : first_c[d] - first;
    Duration drain = last_c[d] < 0 ? 0 : last - last_c[d];
    g.warmup_s = to_seconds(warm);
    g.drain_s = to_seconds(drain);
    g.intra_s = to_seconds(step - busy[d] - warm - drain);
    g.peak_mem_bytes = tl.peak_bytes[d];
    m.peak_gpu_mem_bytes = std::max(m.peak_gpu_mem_bytes, tl.peak_bytes[d]);
    total.busy += busy[d];
    total.warm += warm;
    total.drain += drain;
    m.gpus.push_back(std::move(g));
  }
  return total;
}

/// The bubble fractions, throughput, PCIe utilization and FLOP rates, for a run that takes time on GPUs.
void set_rates(Metrics& m, const Plan& plan, const Timeline& tl, Duration step, const GpuTotals& total) {
  const double denom = static_cast<double>(total.gpus) * static_cast<double>(step);
  m.bubble_fraction = 1.0 - static_cast<double>(total.busy) / denom;
  m.bubble_warmup_fraction = static_cast<double>(total.warm) / denom;
  m.bubble_drain_fraction = static_cast<double>(total.drain) / denom;
  m.bubble_intra_fraction = m.bubble_fraction - m.bubble_warmup_fraction - m.bubble_drain_fraction;
  m.tokens_per_s = static_cast<double>(plan.meta.global_batch) * plan.meta.seq / m.step_time_s;
  for (const auto& l : tl.links) {
    if (!l.pcie_lane_or_uplink()) continue;
    m.pcie_utilization.push_back(
        {l.name(), l.carried_bytes / (l.capacity_bytes_per_ns * static_cast<double>(step))});
  }
  m.tflops_per_gpu = plan.meta.model_flops_per_step / (m.num_gpus * m.step_time_s) / 1e12;
  const double peak = plan.hw.peak_flops(plan.meta.dtype);
  m.mfu = plan.meta.model_flops_per_step / (m.num_gpus * m.step_time_s) / peak;
  m.hfu = plan.meta.hardware_flops_per_step / (m.num_gpus * m.step_time_s) / peak;
}

void set_offload_peaks(Metrics& m, const Plan& plan, const Timeline& tl) {
  for (std::size_t d = 0; d < plan.devices.size(); ++d)
    if (plan.devices[d].kind == DeviceKind::kHost)
      m.peak_host_mem_bytes = std::max(m.peak_host_mem_bytes, tl.peak_bytes[d]);
    else if (plan.devices[d].kind == DeviceKind::kNvme)
      m.peak_nvme_bytes = std::max(m.peak_nvme_bytes, tl.peak_bytes[d]);
}

/// Sorts `v` and joins the intervals that overlap or touch.
void merge_intervals(Intervals& v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (auto iv : v) {
    if (!out.empty() && iv.first <= out.back().second)
      out.back().second = std::max(out.back().second, iv.second);
    else
      out.push_back(iv);
  }
  v = std::move(out);
}

/// CPU optimizer: its busy time and the part of it no GPU computes under (exposed), per iteration. The GPUs'
/// compute intervals are gathered only when there is CPU work to overlap.
void set_cpu_optimizer(Metrics& m, const Plan& plan, const Timeline& tl, const std::vector<StreamRole>& roles,
                       Intervals& cpu) {
  Intervals gpu;
  if (!cpu.empty())
    for (std::size_t i = 0; i < plan.ops.size(); ++i)
      if (!std::holds_alternative<CpuWork>(plan.ops[i].payload) &&
          roles[static_cast<std::size_t>(plan.ops[i].stream)].compute)
        gpu.push_back({tl.start[i], tl.end[i]});
  merge_intervals(cpu);
  merge_intervals(gpu);
  Duration busy_cpu = 0, covered = 0;
  std::size_t g = 0;
  for (auto [a, b] : cpu) {
    busy_cpu += b - a;
    while (g < gpu.size() && gpu[g].second <= a) ++g;
    for (std::size_t k = g; k < gpu.size() && gpu[k].first < b; ++k)
      covered += std::min(b, gpu[k].second) - std::max(a, gpu[k].first);
  }
  m.cpu_optimizer_busy_s = to_seconds(busy_cpu) / m.iterations;
  m.cpu_optimizer_exposed_s = to_seconds(busy_cpu - covered) / m.iterations;
}

}  // namespace

Metrics compute_metrics(const Plan& plan, const Timeline& tl) {
  Metrics m;
  m.schedule = plan.meta.schedule;
  m.num_gpus = plan.num_gpus();
  m.gpu_mem_capacity_bytes = plan.gpu_tensor_capacity();
  m.ops = static_cast<std::int64_t>(plan.ops.size());
  m.events = tl.events;
  // One sweep over the ops (millions of them) for the metrics and the time breakdown: the run's span and
  // each iteration's end, the busy time of each GPU's compute stream (a serial stream: the sum of its op
  // durations), and the CPU optimizer's intervals.
  const SweepContext ctx(plan, tl);
  OpSweep sweep = sweep_plan(ctx);
  m.iterations = ctx.iterations;
  TimePoint first = sweep.first;
  const TimePoint last = sweep.last;
  if (plan.ops.empty()) first = 0;
  const RunSpan span{first, last, last - first};
  set_step_times(m, span, sweep.iteration_end);
  const GpuTotals total = add_gpu_metrics(m, plan, tl, sweep, span);
  m.simulated_gpus = total.gpus;
  if (span.step > 0 && total.gpus > 0) set_rates(m, plan, tl, span.step, total);
  set_offload_peaks(m, plan, tl);
  set_cpu_optimizer(m, plan, tl, ctx.roles, sweep.cpu);
  m.time = breakdown_of(ctx, sweep);
  m.oom = tl.oom.oom;
  if (tl.oom.oom) {
    m.oom_device = plan.devices[static_cast<std::size_t>(tl.oom.device)].name;
    m.oom_time_s = to_seconds(tl.oom.time);
    m.oom_bytes_over = tl.oom.bytes_over;
  }
  return m;
}

std::string metrics_to_json(const Plan& plan, const Metrics& m, double sim_wall_s, int indent) {
  nlohmann::ordered_json j;
  j["schedule"] = m.schedule;
  j["model"] = plan.meta.model;
  if (!plan.meta.framework.empty()) j["framework"] = plan.meta.framework;
  j["hardware"] = plan.hw.name;
  j["num_gpus"] = m.num_gpus;
  j["simulated_gpus"] = m.simulated_gpus;
  j["pp"] = plan.meta.pp;
  j["tp"] = plan.meta.tp;
  j["dp"] = plan.meta.dp;
  if (plan.meta.cp > 1) j["cp"] = plan.meta.cp;
  j["virtual_stages"] = plan.meta.virtual_stages;
  j["microbatches"] = plan.meta.microbatches;
  j["accum_steps"] = plan.meta.accum_steps;
  j["global_batch"] = plan.meta.global_batch;
  j["seq"] = plan.meta.seq;
  j["recompute"] = plan.meta.recompute;
  j["lora_rank"] = plan.meta.lora_rank;
  j["replicas"] = plan.meta.replicas;
  j["data_parallel"] = plan.meta.data_parallel;
  j["ep"] = plan.meta.ep;
  j["partition"] = plan.meta.partition;
  j["iterations"] = m.iterations;
  j["step_time_s"] = m.step_time_s;
  j["steady_state_step_time_s"] = m.steady_state_step_time_s;
  j["first_step_time_s"] = m.first_step_time_s;
  j["run_time_s"] = m.run_time_s;
  j["bubble_fraction"] = m.bubble_fraction;
  j["bubble_breakdown"] = {{"warmup", m.bubble_warmup_fraction},
                           {"intra", m.bubble_intra_fraction},
                           {"drain", m.bubble_drain_fraction}};
  j["time_breakdown"] = {{"kernels", m.time.kernels},     {"tp_comm", m.time.tp_comm},
                         {"optimizer", m.time.optimizer}, {"pipeline_bubble", m.time.pipeline_bubble},
                         {"pp_comm", m.time.pp_comm},     {"dp_comm", m.time.dp_comm},
                         {"cp_comm", m.time.cp_comm},     {"offload", m.time.offload},
                         {"other", m.time.other}};
  j["tokens_per_s"] = m.tokens_per_s;
  j["tflops_per_gpu"] = m.tflops_per_gpu;
  j["mfu"] = m.mfu;
  j["hfu"] = m.hfu;
  j["peak_gpu_mem_bytes"] = m.peak_gpu_mem_bytes;
  j["gpu_mem_capacity_bytes"] = m.gpu_mem_capacity_bytes;
  j["peak_host_mem_bytes"] = m.peak_host_mem_bytes;
  if (m.peak_nvme_bytes > 0) j["peak_nvme_bytes"] = m.peak_nvme_bytes;
  j["host_mem_capacity_bytes"] = plan.hw.host.dram_bytes;
  j["cpu_optimizer_busy_s"] = m.cpu_optimizer_busy_s;
  j["cpu_optimizer_exposed_s"] = m.cpu_optimizer_exposed_s;
  nlohmann::ordered_json pcie = nlohmann::ordered_json::object();
  for (const auto& l : m.pcie_utilization) pcie[l.link] = l.utilization;
  j["pcie_utilization"] = std::move(pcie);
  j["oom"] = m.oom;
  if (m.oom)
    j["oom_detail"] = {{"device", m.oom_device}, {"time_s", m.oom_time_s}, {"bytes_over", m.oom_bytes_over}};
  j["per_gpu"] = nlohmann::ordered_json::array();  // an empty array here; its entries are written below
  j["ops"] = m.ops;
  j["events"] = m.events;
  if (!plan.meta.note.empty()) j["note"] = plan.meta.note;
  j["sim_wall_s"] = sim_wall_s;
  std::string text = pipesim::sim::json_text(j, indent);
  if (m.gpus.empty()) return text;
  // The empty array's place: the key's quotes cannot appear unescaped inside a string value before it.
  const std::string_view empty = indent >= 0 ? "\"per_gpu\": []" : "\"per_gpu\":[]";
  const std::size_t at = text.find(empty);
  std::string entries = per_gpu_json(m.gpus, indent);
  text.replace(at + empty.size() - 2, 2, entries);
  return text;
}

}  // namespace pipesim::sim
