// One 1F1B step of a 40B GPT on 8192 GPUs (tp 8 x pp 16 x dp 64, h100-sxm-8x nodes) with every replica
// instantiated (--replicas explicit): plan generation plus simulation. Target: under 2 s and 2 GB here.
#include <sys/resource.h>

#include <benchmark/benchmark.h>

#include "pipesim/sim/engine.hpp"
#include "pipesim/sim/job.hpp"
#include "pipesim/sim/metrics.hpp"
#include "pipesim/sim/plan_builder.hpp"

namespace {

using namespace pipesim::sim;

void BM_Gpt40b8192Explicit(benchmark::State& state) {
  JobOptions j;
  j.model = "gpt-40b";
  j.hw = "h100-sxm-8x";
  j.pp = 16;
  j.tp = 8;
  j.dp = 64;
  j.global_batch = 1024;
  j.microbatch_size = 1;
  j.seq = 2048;
  j.explicit_replicas = true;
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
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  state.counters["ops"] = ops;
  state.counters["simulated_step_s"] = step;
  state.counters["peak_rss_MB"] = static_cast<double>(ru.ru_maxrss) / 1024.0;
}
BENCHMARK(BM_Gpt40b8192Explicit)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
