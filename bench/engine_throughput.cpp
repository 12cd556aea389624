// Engine throughput: simulated ops per second. Two plans: a compute-bound 1F1B pipeline with fixed-time hops
// (the event core alone), a llama2-7b pp x tp x dp job whose p2p and collectives are max-min flows, and a
// ZeRO-3 job with per-layer gathers and reduce-scatters.
#include <benchmark/benchmark.h>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"

namespace {

using namespace pipesim::sim;

Plan compute_bound_plan(int p, int m) {
  ScheduleInput in;
  in.model_name = "uniform";
  in.hw = load_hardware_profile("h100-sxm-8x");
  in.pp = p;
  in.microbatches = m;
  in.seq = 1024;
  in.global_batch = m;
  LayerCost c;
  c.fwd_ns = 1'000'000;
  c.bwd_input_ns = 1'000'000;
  c.bwd_weight_ns = 1'000'000;
  c.recompute_ns = 0;
  in.costs.push_back(std::vector<LayerCost>(static_cast<std::size_t>(p), c));
  in.cost_of_microbatch.assign(static_cast<std::size_t>(m), 0);
  in.p2p_fixed_ns = 10'000;
  return build_plan(find_schedule("1f1b"), in);
}

void run(benchmark::State& state, const Plan& plan) {
  Engine engine;
  for (auto _ : state) {
    Timeline t = engine.run(plan);
    benchmark::DoNotOptimize(t.end.data());
  }
  state.counters["ops"] = static_cast<double>(plan.ops.size());
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(plan.ops.size()) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_ComputeBound1f1b(benchmark::State& state) {
  static const Plan plan = compute_bound_plan(64, 2048);
  run(state, plan);
}
BENCHMARK(BM_ComputeBound1f1b)->Unit(benchmark::kMillisecond);

/// A model on H100 nodes laid out pp x tp x dp with M microbatches of sequences of `seq`.
JobOptions h100_job(const char* model, int pp, int tp, int dp, int microbatches, int seq) {
  JobOptions j;
  j.model = model;
  j.hw = "h100-sxm-8x";
  j.pp = pp;
  j.tp = tp;
  j.dp = dp;
  j.microbatches = microbatches;
  j.seq = seq;
  return j;
}

void BM_FlowHeavyLlama7b(benchmark::State& state) {
  static const Plan plan = [] {
    JobOptions j = h100_job("llama2-7b", 8, 8, 8, 64, 2048);
    j.explicit_replicas = true;
    const auto& s = find_schedule("1f1b");
    return build_plan(s, make_schedule_input(j, s));
  }();
  run(state, plan);
}
BENCHMARK(BM_FlowHeavyLlama7b)->Unit(benchmark::kMillisecond);

void BM_Fsdp70bOn1024(benchmark::State& state) {
  // Llama-3-70B with ZeRO-3 over dp = 128 (pp 1, tp 8, 1,024 GPUs): one op per layer and pass, each with its
  // gather or reduce-scatter flow; building the plan is timed too (it is most of what plan does per
  // candidate).
  JobOptions j = h100_job("llama3-70b", 1, 8, 128, 8, 4096);
  j.recompute = "full";
  j.zero = 3;
  const auto& s = find_schedule("1f1b");
  std::size_t ops = 0;
  Engine engine;
  for (auto _ : state) {
    const Plan plan = build_plan(s, make_schedule_input(j, s));
    Timeline t = engine.run(plan);
    ops = plan.ops.size();
    benchmark::DoNotOptimize(t.end.data());
  }
  state.counters["ops"] = static_cast<double>(ops);
}
BENCHMARK(BM_Fsdp70bOn1024)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
