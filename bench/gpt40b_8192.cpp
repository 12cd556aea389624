// One 1F1B step of a 40B GPT on 8192 GPUs (tp 8 x pp 16 x dp 64, h100-sxm-8x nodes) with every replica
// instantiated (--replicas explicit): plan generation plus simulation. Target: under 2 s and 2 GB here. Also
// the scaling curve of pipelines only (pp 8 x dp 32 .. 2048: 256 to 16,384 GPUs).
#include <sys/resource.h>

#include <chrono>

#include <benchmark/benchmark.h>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/fill/fill.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/report/invariants.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"

namespace {

using namespace pipesim::sim;

/// The 8192-GPU job, every replica instantiated.
JobOptions gpt40b_job(double microbatch_size) {
  JobOptions j;
  j.model = "gpt-40b";
  j.hw = "h100-sxm-8x";
  j.pp = 16;
  j.tp = 8;
  j.dp = 64;
  j.global_batch = 1024;
  j.microbatch_size = microbatch_size;
  j.seq = 2048;
  j.explicit_replicas = true;
  return j;
}

void report_rss(benchmark::State& state) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  state.counters["peak_rss_MB"] = static_cast<double>(ru.ru_maxrss) / 1024.0;
}

void BM_Gpt40b8192Explicit(benchmark::State& state) {
  const JobOptions j = gpt40b_job(1);
  const auto& s = find_schedule("1f1b");
  double ops = 0, step = 0;
  for (auto _ : state) {
    Plan plan = build_plan(s, make_schedule_input(j, s));
    Timeline t = Engine{}.run(plan);
    Metrics m = compute_metrics(plan, t);
    ops = static_cast<double>(plan.ops.size());
    step = m.step_time_s;
    benchmark::DoNotOptimize(m);
  }
  state.counters["ops"] = ops;
  state.counters["simulated_step_s"] = step;
  report_rss(state);
}
BENCHMARK(BM_Gpt40b8192Explicit)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_Gpt40b8192Phases(benchmark::State& state) {
  // The same job, each phase timed on its own (seconds per iteration): where a whole prediction goes.
  const JobOptions j = gpt40b_job(1);
  const auto& s = find_schedule("1f1b");
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  double build = 0, simulate = 0, metrics = 0, invariants = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    Plan plan = build_plan(s, make_schedule_input(j, s));
    const auto t1 = Clock::now();
    Timeline t = Engine{}.run(plan);
    const auto t2 = Clock::now();
    Metrics m = compute_metrics(plan, t);
    const auto t3 = Clock::now();
    check_run(plan, t, m);  // what simulate adds before it prints
    const auto t4 = Clock::now();
    build += seconds(t0, t1), simulate += seconds(t1, t2), metrics += seconds(t2, t3);
    invariants += seconds(t3, t4);
    benchmark::DoNotOptimize(m);
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["build_s"] = build / n;
  state.counters["simulate_s"] = simulate / n;
  state.counters["metrics_s"] = metrics / n;
  state.counters["invariants_s"] = invariants / n;
}
BENCHMARK(BM_Gpt40b8192Phases)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_Gpt40bPipelinesExplicit(benchmark::State& state) {
  // The scaling curve: gpt-40b, 1F1B, pp 8 x dp N with every GPU instantiated (tp 1, 16 microbatches of one
  // sequence per pipeline): plan build + simulation + metrics, ops and simulated ops per second.
  JobOptions j = gpt40b_job(1);
  j.tp = 1;
  j.pp = 8;
  j.dp = static_cast<std::int32_t>(state.range(0));
  j.global_batch = 16 * j.dp;
  const auto& s = find_schedule("1f1b");
  double ops = 0;
  for (auto _ : state) {
    Plan plan = build_plan(s, make_schedule_input(j, s));
    Timeline t = Engine{}.run(plan);
    Metrics m = compute_metrics(plan, t);
    ops = static_cast<double>(plan.ops.size());
    benchmark::DoNotOptimize(m);
  }
  state.counters["gpus"] = 8.0 * static_cast<double>(j.dp);
  state.counters["ops"] = ops;
  state.counters["ops_per_s"] = benchmark::Counter(ops, benchmark::Counter::kIsIterationInvariantRate);
  report_rss(state);
}
BENCHMARK(BM_Gpt40bPipelinesExplicit)
    ->Arg(32)
    ->Arg(128)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(2048)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

void BM_Gpt40b8192WithFill(benchmark::State& state) {
  // The scale study's largest point: microbatch 2 (8 per pipeline, 68 % bubbles) filled with the two shipped
  // inference jobs: bubbles found, chunks placed on all 8192 GPUs, the plan re-simulated.
  const JobOptions j = gpt40b_job(2);
  const auto& s = find_schedule("1f1b");
  FillOptions o;
  o.policy = FillPolicy::kMaxEfficiency;
  double ops = 0, equivalents = 0;
  for (auto _ : state) {
    const Plan plan = build_plan(s, make_schedule_input(j, s));
    const Timeline t = Engine{EngineOptions{true}}.run(plan);
    const FillRun run = simulate_with_fill(
        plan, t, load_fill_jobs("qwen3-1.7b-inference,llama3-8b-inference", plan.hw, plan.meta.dtype), o,
        0.05);
    ops = static_cast<double>(run.plan.ops.size());
    equivalents = run.fill_gpu_equivalents;
    state.counters["bubble_share"] = run.bubble_share;
    state.counters["main_slowdown"] = run.main_slowdown;
    benchmark::DoNotOptimize(equivalents);
  }
  state.counters["ops"] = ops;
  state.counters["fill_gpu_equivalents"] = equivalents;
  report_rss(state);
}
BENCHMARK(BM_Gpt40b8192WithFill)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
