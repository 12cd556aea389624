#include <algorithm>

#include "pipesim/sim/fill/fill.hpp"
#include "pipesim/sim/report/metrics.hpp"

namespace pipesim::sim {

namespace {

/// Compute-stream busy time of the simulated GPUs, and their count.
std::pair<double, int> main_busy(const Plan& plan, const Timeline& tl) {
  double busy = 0;
  for (std::size_t i = 0; i < plan.ops.size(); ++i)
    if (plan.streams[static_cast<std::size_t>(plan.ops[i].stream)].kind == StreamKind::kCompute)
      busy += static_cast<double>(tl.end[i] - tl.start[i]);
  int gpus = 0;
  for (const Stream& s : plan.streams)
    if (s.kind == StreamKind::kCompute &&
        plan.devices[static_cast<std::size_t>(s.device)].kind == DeviceKind::kGpu)
      ++gpus;
  return {busy, std::max(1, gpus)};
}

TimePoint run_end(const Timeline& tl) {
  TimePoint end = 0;
  for (TimePoint t : tl.end) end = std::max(end, t);
  return end;
}

/// How much longer the main job takes with fill than without: the longer of its step (the steady state of
/// an asynchronous schedule) and its whole run (fill that overruns the last bubble delays the next step).
double slowdown(const Metrics& without, const Metrics& with) {
  double worse = 0;
  if (without.step_time_s > 0) worse = std::max(worse, with.step_time_s / without.step_time_s - 1);
  if (without.run_time_s > 0) worse = std::max(worse, with.run_time_s / without.run_time_s - 1);
  return worse;
}

}  // namespace

FillRun simulate_with_fill(const Plan& plan, const Timeline& timeline, const std::vector<FillJob>& jobs,
                           FillOptions options, double max_slowdown) {
  const double base = static_cast<double>(run_end(timeline));
  const Metrics base_metrics = compute_metrics(plan, timeline);
  const auto [base_busy, gpus] = main_busy(plan, timeline);
  FillRun run;
  for (double share = options.bubble_share;; share *= 0.8) {
    FillRun attempt;
    attempt.plan = plan;
    options.bubble_share = share;
    attempt.outcome = add_fill_jobs(attempt.plan, timeline, jobs, options);
    attempt.timeline = Engine{}.run(attempt.plan);
    attempt.bubble_share = share;
    attempt.main_slowdown = slowdown(base_metrics, compute_metrics(attempt.plan, attempt.timeline));
    if (attempt.main_slowdown <= max_slowdown || share < 0.05) {
      if (attempt.main_slowdown > max_slowdown) {  // nothing small enough: run without fill
        attempt.plan = plan;
        attempt.timeline = Engine{}.run(plan);
        attempt.outcome = FillOutcome{};
        for (const FillJob& j : jobs) attempt.outcome.jobs.push_back({j.name, 0, j.units, 0, false, -1});
        attempt.main_slowdown = 0;
        attempt.bubble_share = 0;
      }
      run = std::move(attempt);
      break;
    }
  }
  const double step = static_cast<double>(run_end(run.timeline));
  for (OpId id : run.outcome.fill_ops)
    run.fill_busy_s += static_cast<double>(run.timeline.end[static_cast<std::size_t>(id)] -
                                           run.timeline.start[static_cast<std::size_t>(id)]) /
                       1e9;
  // Identical replicas stand for the GPUs not simulated: the whole job recovers as much per GPU.
  const double scale = static_cast<double>(plan.num_gpus()) / gpus;
  run.fill_gpu_equivalents = step > 0 ? run.fill_busy_s * 1e9 / step * scale : 0;
  run.fill_tflops_per_gpu = step > 0 ? run.outcome.fill_flops / (gpus * step / 1e9) / 1e12 : 0;
  run.utilization_before = base > 0 ? base_busy / (gpus * base) : 0;
  const double after_busy = main_busy(run.plan, run.timeline).first + run.fill_busy_s * 1e9;
  run.utilization_after = step > 0 ? after_busy / (gpus * step) : 0;
  for (const FillJobOutcome& j : run.outcome.jobs)
    run.completed_s.push_back(
        j.units_done == j.units && j.last_op >= 0
            ? static_cast<double>(run.timeline.end[static_cast<std::size_t>(j.last_op)]) / 1e9
            : -1);
  return run;
}

FillClaims claims_of(const FillRun& run, double max_slowdown) {
  FillClaims c;
  c.main_slowdown = run.main_slowdown;
  c.max_slowdown = max_slowdown;
  c.utilization_before = run.utilization_before;
  c.utilization_after = run.utilization_after;
  c.fill_gpu_equivalents = run.fill_gpu_equivalents;
  c.num_gpus = run.plan.num_gpus();
  c.run_time_s = static_cast<double>(run_end(run.timeline)) / 1e9;
  for (std::size_t j = 0; j < run.outcome.jobs.size(); ++j) {
    const FillJobOutcome& o = run.outcome.jobs[j];
    c.jobs.push_back({o.name, o.units_done, o.units, run.completed_s[j]});
  }
  return c;
}

}  // namespace pipesim::sim
