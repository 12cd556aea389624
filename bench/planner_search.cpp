// Planner speed: the full configuration search for Llama-3-70B on 1024 H100s (global batch 1024, seq 4096;
// target under 3 s on the 2-core dev machine), GPT-3 175B on 8,192 H100s (under 20 s) and one partition
// search of a 128-layer model at pp = 64 (target under 50 ms).
#include <benchmark/benchmark.h>

#include "pipesim/planner/config_search.hpp"
#include "pipesim/planner/partition.hpp"

namespace {

using namespace pipesim;

/// Runs the configuration search of `model` on `gpus` H100s and reports what it enumerated and simulated.
void run_search(benchmark::State& state, const std::string& model, std::int32_t gpus,
                std::int64_t global_batch, std::int32_t seq, std::int32_t top) {
  planner::SearchOptions o;
  o.base.model = model;
  o.base.hw = "h100-sxm-8x";
  o.base.seq = seq;
  o.gpus = gpus;
  o.global_batch = global_batch;
  o.top = top;
  planner::SearchResult r;
  for (auto _ : state) {
    r = planner::search(o, nullptr);
    benchmark::DoNotOptimize(r.ranked.data());
  }
  state.counters["enumerated"] = static_cast<double>(r.enumerated);
  state.counters["simulated"] = static_cast<double>(r.simulated);
  state.counters["best_step_s"] = r.ranked.empty() ? 0 : r.ranked.front().metrics.step_time_s;
}

void BM_PlanLlama3_70bOn1024H100(benchmark::State& state) {
  run_search(state, "llama3-70b", 1024, 1024, 4096, 10);
}
BENCHMARK(BM_PlanLlama3_70bOn1024H100)->Unit(benchmark::kSecond)->Iterations(1);

// GPT-3 175B on 8,192 H100s at its published global batch (1536 sequences of 2048 tokens), top 5: the
// issue's largest search (target under 20 s).
void BM_PlanGpt3_175bOn8192H100(benchmark::State& state) {
  run_search(state, "gpt3-175b", 8192, 1536, 2048, 5);
}
BENCHMARK(BM_PlanGpt3_175bOn8192H100)->Unit(benchmark::kSecond)->Iterations(1);

void BM_Partition128LayersPp64(benchmark::State& state) {
  planner::PartitionProblem p;
  for (int l = 0; l < 130; ++l) {  // embedding, 128 blocks, head
    const bool block = l > 0 && l < 129;
    p.time_ns.push_back(block ? 1'000'000 + (l * 7919) % 100'000 : (l == 0 ? 100'000 : 4'000'000));
    p.boundary_ns.push_back(20'000);
    p.resident_bytes.push_back(1 << 28);
    p.activation_bytes.push_back(1 << 24);
    p.params.push_back(1 << 24);
    p.is_block.push_back(block);
  }
  p.stages = 64;
  for (int k = 0; k < 64; ++k) p.inflight.push_back(64 - k);
  p.memory_cap = std::int64_t{4} << 30;
  planner::PartitionResult r;
  for (auto _ : state) {
    r = planner::optimal_partition(p);
    benchmark::DoNotOptimize(r.blocks.data());
  }
  state.counters["bottleneck_ms"] = static_cast<double>(r.bottleneck_ns) / 1e6;
}
BENCHMARK(BM_Partition128LayersPp64)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
