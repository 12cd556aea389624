#include "pipesim/sim/report/invariants.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::sim {

namespace {

[[noreturn]] void violated(const char* invariant, const std::string& detail) {
  throw InvariantError(invariant, detail);
}

/// a <= b, allowing what converting whole nanoseconds to seconds and dividing them can round away.
bool at_most(double a, double b) {
  return a <= b + 1e-9 * std::max({1.0, std::abs(a), std::abs(b)});
}

bool near(double a, double b) {
  return at_most(a, b) && at_most(b, a);
}

void check_finite(const Metrics& m) {
  const std::initializer_list<std::pair<const char*, double>> values = {
      {"step_time_s", m.step_time_s},
      {"first_step_time_s", m.first_step_time_s},
      {"run_time_s", m.run_time_s},
      {"tokens_per_s", m.tokens_per_s},
      {"tflops_per_gpu", m.tflops_per_gpu},
      {"mfu", m.mfu},
      {"hfu", m.hfu},
      {"bubble_fraction", m.bubble_fraction},
      {"cpu_optimizer_busy_s", m.cpu_optimizer_busy_s},
      {"cpu_optimizer_exposed_s", m.cpu_optimizer_exposed_s}};
  for (const auto& [name, v] : values)
    if (!std::isfinite(v) || v < 0) violated("finite", fmt::format("{} = {}", name, v));
  if (m.peak_gpu_mem_bytes < 0 || m.peak_host_mem_bytes < 0)
    violated("finite",
             fmt::format("peak memory GPU {} B, host {} B", m.peak_gpu_mem_bytes, m.peak_host_mem_bytes));
}

void check_shares(const Metrics& m) {
  if (!(m.bubble_fraction >= 0 && at_most(m.bubble_fraction, 1)))
    violated("bubble-in-range", fmt::format("bubble fraction {:.9g} outside [0, 1]", m.bubble_fraction));
  const double parts[] = {m.bubble_warmup_fraction, m.bubble_intra_fraction, m.bubble_drain_fraction};
  for (double p : parts)
    if (!(at_most(0, p) && at_most(p, 1)) ||
        !near(m.bubble_warmup_fraction + m.bubble_intra_fraction + m.bubble_drain_fraction,
              m.bubble_fraction))
      violated("bubble-parts-sum",
               fmt::format("warm-up {:.9g} + intra {:.9g} + drain {:.9g} against a bubble of {:.9g}",
                           m.bubble_warmup_fraction, m.bubble_intra_fraction, m.bubble_drain_fraction,
                           m.bubble_fraction));
  if (m.run_time_s <= 0) return;
  const TimeBreakdown& t = m.time;
  const double shares[] = {t.kernels, t.tp_comm, t.optimizer, t.pipeline_bubble, t.pp_comm, t.dp_comm,
                           t.cp_comm, t.offload, t.other};
  double sum = 0;
  for (double s : shares) {
    if (!(s >= 0)) violated("time-shares-sum-to-1", fmt::format("a share of {:.9g}", s));
    sum += s;
  }
  // A run in which no GPU computes (a plan of host work alone) has no GPU time to share out.
  const bool computes =
      std::any_of(m.gpus.begin(), m.gpus.end(), [](const GpuMetrics& g) { return g.busy_s > 0; });
  if ((computes || sum != 0) && std::abs(sum - 1) > 1e-6)
    violated("time-shares-sum-to-1", fmt::format("the shares sum to {:.9g}", sum));
}

void check_step(const Metrics& m, std::int64_t global_batch, std::int32_t seq) {
  if (m.ops > 0 && !(m.step_time_s > 0))
    violated("step-positive", fmt::format("step {:.9g} s for a run of {} ops", m.step_time_s, m.ops));
  if (m.step_time_s > 0) {
    const double tokens = static_cast<double>(global_batch) * seq;
    if (!near(m.tokens_per_s * m.step_time_s, tokens))
      violated("tokens-per-step",
               fmt::format("{:.9g} tokens/s x {:.9g} s = {:.9g} tokens against {} x {} = {:.9g} per step",
                           m.tokens_per_s, m.step_time_s, m.tokens_per_s * m.step_time_s, global_batch, seq,
                           tokens));
  }
  if (!at_most(m.first_step_time_s + (m.iterations - 1) * m.step_time_s, m.run_time_s))
    violated("steps-within-run",
             fmt::format("first step {:.9g} s + {} x step {:.9g} s exceeds the run of {:.9g} s",
                         m.first_step_time_s, m.iterations - 1, m.step_time_s, m.run_time_s));
  for (const GpuMetrics& g : m.gpus) {
    if (!near(g.busy_s + g.warmup_s + g.intra_s + g.drain_s, m.run_time_s))
      violated(
          "gpu-time-adds-up",
          fmt::format("{}: busy {:.9g} + warm-up {:.9g} + intra {:.9g} + drain {:.9g} s against a run of "
                      "{:.9g} s",
                      g.device, g.busy_s, g.warmup_s, g.intra_s, g.drain_s, m.run_time_s));
    if (!at_most(g.busy_s, m.run_time_s))
      violated("run-covers-busiest-gpu",
               fmt::format("{} computes {:.9g} s in a run of {:.9g} s", g.device, g.busy_s, m.run_time_s));
  }
}

void check_utilization(const Metrics& m, bool against_peak) {
  if (!at_most(m.mfu, m.hfu)) violated("mfu-le-hfu", fmt::format("MFU {:.9g} > HFU {:.9g}", m.mfu, m.hfu));
  if (against_peak && !at_most(m.hfu, 1))
    violated("hfu-le-1", fmt::format("HFU {:.9g} (MFU {:.9g}) above the dtype's peak", m.hfu, m.mfu));
}

/// Every op starts at or after 0 and ends at or after it starts; after each of its dependencies and the
/// previous op of its stream (a serial FIFO, in plan order) end. Together these bound the run from below by
/// any path through the plan, its critical path included, without finding that path.
void check_order(const Plan& plan, const Timeline& tl) {
  std::vector<TimePoint> stream_free(plan.streams.size(), 0);
  std::vector<OpId> stream_last(plan.streams.size(), -1);
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const TimePoint start = tl.start[i], end = tl.end[i];
    if (start < 0 || end < start)
      violated("op-times",
               fmt::format("op {} ({}) runs from {} to {} ns", i, to_string(plan.ops[i].kind), start, end));
    for (OpId dep : plan.ops[i].deps)
      if (start < tl.end[static_cast<std::size_t>(dep)])
        violated("step-covers-critical-path",
                 fmt::format("op {} ({}) starts at {} ns, before its dependency op {} ends at {} ns", i,
                             to_string(plan.ops[i].kind), start, dep, tl.end[static_cast<std::size_t>(dep)]));
    const auto s = static_cast<std::size_t>(plan.ops[i].stream);
    if (start < stream_free[s])
      violated("step-covers-critical-path",
               fmt::format("op {} ({}) starts at {} ns, before op {} ahead of it on stream {} ends at {} ns",
                           i, to_string(plan.ops[i].kind), start, stream_last[s], s, stream_free[s]));
    stream_free[s] = end;
    stream_last[s] = static_cast<OpId>(i);
  }
}

/// Between the end of the first iteration and the end of the last, each GPU's compute stream runs at least
/// the ops of later iterations that start after the first ends: the steady-state step, times the iterations
/// after the first, covers them. (A single iteration's step is its run: run-covers-busiest-gpu.)
void check_steady_work(const Plan& plan, const Timeline& tl, const Metrics& m) {
  if (m.iterations < 2 || plan.ops.empty()) return;
  TimePoint first = tl.start[0];
  for (TimePoint t : tl.start) first = std::min(first, t);
  const double first_end_s = to_seconds(first) + m.first_step_time_s;
  const double window_s = m.step_time_s * (m.iterations - 1);
  std::vector<Duration> work(plan.devices.size(), 0);
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    const Stream& s = plan.streams[static_cast<std::size_t>(op.stream)];
    if (s.kind != StreamKind::kCompute || op.tags.iteration < 1 || to_seconds(tl.start[i]) < first_end_s)
      continue;
    work[static_cast<std::size_t>(s.device)] += tl.end[i] - tl.start[i];
  }
  for (std::size_t d = 0; d < work.size(); ++d)
    if (!at_most(to_seconds(work[d]), window_s))
      violated("step-covers-gpu-work",
               fmt::format(
                   "{} computes {:.9g} s of later iterations after the first ends, in {} steps of {:.9g} s",
                   plan.devices[d].name, to_seconds(work[d]), m.iterations - 1, m.step_time_s));
}

void check_memory(const Plan& plan, const Timeline& tl, const Metrics& m) {
  for (std::size_t d = 0; d < plan.devices.size() && d < tl.peak_bytes.size(); ++d) {
    const Device& dev = plan.devices[d];
    if (dev.kind != DeviceKind::kGpu) continue;
    if (tl.peak_bytes[d] < dev.resident_bytes)
      violated("peak-memory-covers-resident",
               fmt::format("{}: peak {} B below the {} B it holds for the whole run", dev.name,
                           tl.peak_bytes[d], dev.resident_bytes));
    if (d < tl.capacity_bytes.size() && tl.capacity_bytes[d] > 0 && tl.peak_bytes[d] > tl.capacity_bytes[d] &&
        !m.oom)
      violated("oom-reported", fmt::format("{}: peak {} B over its {} B, and no OOM reported", dev.name,
                                           tl.peak_bytes[d], tl.capacity_bytes[d]));
  }
}

/// No fill chunk overlaps an op of the main job's compute stream on the same GPU.
void check_fill_placement(const Plan& plan, const Timeline& tl) {
  std::vector<char> fill_device(plan.devices.size(), 0);
  bool any = false;
  for (const Stream& s : plan.streams)
    if (s.kind == StreamKind::kFill) {
      fill_device[static_cast<std::size_t>(s.device)] = 1;
      any = true;
    }
  if (!any) return;
  std::vector<std::vector<std::pair<TimePoint, OpId>>> compute(plan.devices.size());
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Stream& s = plan.streams[static_cast<std::size_t>(plan.ops[i].stream)];
    if (s.kind == StreamKind::kCompute && fill_device[static_cast<std::size_t>(s.device)] &&
        tl.end[i] > tl.start[i])
      compute[static_cast<std::size_t>(s.device)].push_back({tl.start[i], static_cast<OpId>(i)});
  }
  for (auto& ops : compute) std::sort(ops.begin(), ops.end());
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Stream& s = plan.streams[static_cast<std::size_t>(plan.ops[i].stream)];
    if (s.kind != StreamKind::kFill || plan.ops[i].kind != OpKind::kFill || tl.end[i] <= tl.start[i])
      continue;
    // The compute ops on its GPU are serial: only the last one starting before the chunk ends can overlap it.
    const auto& ops = compute[static_cast<std::size_t>(s.device)];
    auto it = std::lower_bound(ops.begin(), ops.end(), std::pair<TimePoint, OpId>{tl.end[i], -1});
    if (it == ops.begin()) continue;
    const auto j = static_cast<std::size_t>(std::prev(it)->second);
    if (tl.end[j] > tl.start[i])
      violated("fill-in-bubbles",
               fmt::format("fill op {} ({} .. {} ns) overlaps op {} ({}, {} .. {} ns) on {}", i, tl.start[i],
                           tl.end[i], j, to_string(plan.ops[j].kind), tl.start[j], tl.end[j],
                           plan.devices[static_cast<std::size_t>(s.device)].name));
  }
}

}  // namespace

void check_metrics(const Metrics& m, std::int64_t global_batch, std::int32_t seq, bool against_peak) {
  check_finite(m);
  check_utilization(m, against_peak);
  check_shares(m);
  check_step(m, global_batch, seq);
}

void check_timeline(const Plan& plan, const Timeline& tl, const Metrics& m) {
  if (tl.start.size() != plan.ops.size() || tl.end.size() != plan.ops.size())
    violated("op-times", fmt::format("{} start and {} end times for {} ops", tl.start.size(), tl.end.size(),
                                     plan.ops.size()));
  check_fill_placement(plan, tl);
  check_order(plan, tl);
  check_steady_work(plan, tl, m);
  check_memory(plan, tl, m);
}

void check_run(const Plan& plan, const Timeline& tl, const Metrics& m) {
  check_metrics(m, plan.meta.global_batch, plan.meta.seq);
  check_timeline(plan, tl, m);
}

void check_bubbles(const Plan& plan, const std::vector<Bubble>& bubbles, const Metrics& m) {
  std::vector<Duration> length(plan.devices.size(), 0);
  for (const Bubble& b : bubbles) {
    if (b.end < b.start)
      violated("bubbles-within-idle",
               fmt::format("a bubble on device {} from {} to {} ns", b.device, b.start, b.end));
    length[static_cast<std::size_t>(b.device)] += b.length();
  }
  for (std::size_t d = 0; d < plan.devices.size(); ++d) {
    if (length[d] == 0) continue;
    const std::string& name = plan.devices[d].name;
    const auto g =
        std::find_if(m.gpus.begin(), m.gpus.end(), [&](const GpuMetrics& x) { return x.device == name; });
    const double idle = g == m.gpus.end() ? m.run_time_s : m.run_time_s - g->busy_s;
    if (!at_most(to_seconds(length[d]), idle))
      violated("bubbles-within-idle",
               fmt::format("{}: bubbles of {:.9g} s in {:.9g} s idle", name, to_seconds(length[d]), idle));
  }
}

void check_fill(const FillClaims& f) {
  if (!(f.main_slowdown >= 0 && at_most(f.main_slowdown, f.max_slowdown)))
    violated("fill-slowdown-within-limit",
             fmt::format("main slowdown {:.9g} against a limit of {:.9g}", f.main_slowdown, f.max_slowdown));
  if (!(f.utilization_before >= 0 && at_most(f.utilization_before, 1) && f.utilization_after >= 0 &&
        at_most(f.utilization_after, 1)))
    violated("fill-utilization", fmt::format("compute busy {:.9g} without fill, {:.9g} with",
                                             f.utilization_before, f.utilization_after));
  if (!(f.fill_gpu_equivalents >= 0 && at_most(f.fill_gpu_equivalents, f.num_gpus)))
    violated("fill-utilization",
             fmt::format("{:.9g} GPU-equivalents of fill on {} GPUs", f.fill_gpu_equivalents, f.num_gpus));
  for (const FillClaims::Job& j : f.jobs) {
    if (j.units_done < 0 || j.units_done > j.units)
      violated("fill-units", fmt::format("{}: {} of {} units done", j.name, j.units_done, j.units));
    if (!at_most(j.completed_s, f.run_time_s))
      violated("fill-units", fmt::format("{}: done at {:.9g} s, after the run's end at {:.9g} s", j.name,
                                         j.completed_s, f.run_time_s));
  }
}

}  // namespace pipesim::sim
