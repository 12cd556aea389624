#include <gtest/gtest.h>

#include <functional>
#include <random>

#include <fmt/format.h>

#include "pipesim/planner/partition.hpp"
#include "pipesim/sim/job/job.hpp"

namespace pipesim::planner {
namespace {

PartitionProblem random_problem(std::mt19937& rng, int layers, int stages, bool with_memory) {
  std::uniform_int_distribution<int> t(1, 100), m(1, 50);
  PartitionProblem p;
  for (int l = 0; l < layers; ++l) {
    p.time_ns.push_back(t(rng));
    p.boundary_ns.push_back(t(rng) / 10);
    p.resident_bytes.push_back(m(rng));
    p.activation_bytes.push_back(m(rng) / 5);
    p.params.push_back(m(rng));
    p.is_block.push_back(true);
  }
  p.stages = stages;
  for (int k = 0; k < stages; ++k) p.inflight.push_back(stages - k);
  p.memory_cap = with_memory ? 50 * layers / stages + 60 : 0;
  return p;
}

/// Every composition of the layers into `stages` non-empty contiguous stages.
std::int64_t brute_force(const PartitionProblem& p, bool& any) {
  const int n = static_cast<int>(p.time_ns.size());
  std::int64_t best = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int32_t> sizes;
  std::function<void(int, int)> rec = [&](int at, int k) {
    if (k == p.stages) {
      if (at != n) return;
      PartitionResult r = evaluate_partition(p, sizes);
      if (!r.feasible) return;
      any = true;
      best = std::min(best, r.bottleneck_ns);
      return;
    }
    for (int len = 1; at + len <= n - (p.stages - k - 1); ++len) {
      sizes.push_back(len);
      rec(at + len, k + 1);
      sizes.pop_back();
    }
  };
  rec(0, 0);
  return best;
}

TEST(Partition, OptimalAgainstBruteForceOnRandomInstances) {
  std::mt19937 rng(42);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int layers = 2 + trial % 9, stages = 1 + trial % std::min(layers, 5);
    PartitionProblem p = random_problem(rng, layers, stages, trial % 2 == 1);
    bool any = false;
    const std::int64_t expect = brute_force(p, any);
    PartitionResult r = optimal_partition(p);
    ASSERT_EQ(r.feasible, any) << "trial " << trial;
    if (!any) continue;
    ++checked;
    ASSERT_EQ(r.bottleneck_ns, expect) << "trial " << trial;
    int total = 0;
    for (int b : r.blocks) total += b;
    ASSERT_EQ(total, layers);
    for (auto mem : r.stage_mem_bytes) ASSERT_LE(mem, p.memory_cap > 0 ? p.memory_cap : mem);
  }
  EXPECT_GT(checked, 200);
}

TEST(Partition, UniformLayersGiveTheUniformSplit) {
  PartitionProblem p;
  for (int l = 0; l < 32; ++l) {
    p.time_ns.push_back(1000);
    p.boundary_ns.push_back(0);
    p.resident_bytes.push_back(1);
    p.activation_bytes.push_back(1);
    p.params.push_back(1);
    p.is_block.push_back(true);
  }
  for (int stages : {1, 2, 4, 8, 16, 32}) {
    p.stages = stages;
    p.inflight.assign(static_cast<std::size_t>(stages), 1);
    PartitionResult r = optimal_partition(p);
    EXPECT_EQ(r.blocks, std::vector<std::int32_t>(static_cast<std::size_t>(stages), 32 / stages));
    EXPECT_EQ(r.bottleneck_ns, 1000 * 32 / stages);
  }
}

TEST(Partition, HeadHeavyModelGetsALighterLastStage) {
  sim::JobOptions j;
  j.model = "qwen3-1.7b";  // LM head about 6 blocks of FLOPs
  j.pp = 4;
  const auto& s = sim::find_schedule("1f1b");
  sim::ScheduleInput in = sim::make_schedule_input(j, s);
  PartitionProblem p = make_partition_problem(in, s, 1.0);
  p.memory_cap = 0;
  PartitionResult r = optimal_partition(p);
  ASSERT_EQ(r.blocks.size(), 4u);
  EXPECT_LT(r.blocks.back(), 28 / 4);  // fewer blocks than the uniform 7
  PartitionResult uniform = evaluate_partition(p, sim::balanced_partition(28, 4));
  EXPECT_LT(r.bottleneck_ns, uniform.bottleneck_ns);
  // The partition is a valid --partition and simulates.
  j.partition = fmt::format("{},{},{},{}", r.blocks[0], r.blocks[1], r.blocks[2], r.blocks[3]);
  EXPECT_NO_THROW(sim::build_plan(s, sim::make_schedule_input(j, s)));
}

TEST(Partition, KernelsAtTheirOwnRateTakeTheirTimeAtIt) {
  // megatron-core's attention runs cuDNN's kernel at its published H100 rate: halving that rate lengthens a
  // block by exactly its attention's time at the rate (forward and backward), as the simulator runs it.
  sim::JobOptions j;
  j.model = "llama3-8b";
  j.hw = "h100-sxm-8x";
  j.pp = 4;
  j.seq = 8192;
  const auto& s = sim::find_schedule("1f1b");
  sim::ScheduleInput in = sim::make_schedule_input(j, s);
  const sim::LayerCost& block = in.costs.front()[1];
  ASSERT_GT(block.fused_attention_fwd_flops, 0);
  const sim::KernelRate rate = block.fused_attention_rate;
  const PartitionProblem at_rate = make_partition_problem(in, s, 1.0);
  for (auto& l : in.costs.front()) {
    l.fused_attention_rate.forward_tflops /= 2;
    l.fused_attention_rate.backward_tflops /= 2;
  }
  const PartitionProblem halved = make_partition_problem(in, s, 1.0);
  const double want_ns = 1e9 * (block.fused_attention_fwd_flops / (rate.forward_tflops * 1e12) +
                                block.fused_attention_bwd_flops / (rate.backward_tflops * 1e12));
  EXPECT_NEAR(static_cast<double>(halved.time_ns[1] - at_rate.time_ns[1]), want_ns, 4.0);
}

TEST(Partition, ShardedStateIsWhatTheSimulatorPlaces) {
  // ZeRO-1 over 8 ranks, FP8 (its weight copies stay whole), and nanotron's fp32 gradient buffer (whole too):
  // the planner's per-layer bytes add up to what the simulator places on the GPU, to the byte of a shard's
  // padding per layer.
  for (const char* framework : {"megatron-core", "nanotron"}) {
    sim::JobOptions j;
    j.model = "llama3-8b";
    j.hw = "h100-sxm-8x";
    j.dp = 8;
    j.zero = 1;
    j.dtype = "fp8";
    j.framework = framework;
    const auto& s = sim::find_schedule("1f1b");
    sim::ScheduleInput in = sim::make_schedule_input(j, s);
    PartitionProblem p = make_partition_problem(in, s, 1.0);
    std::int64_t unsharded = 0, planned = 0;
    for (std::int64_t r : p.resident_bytes) unsharded += r;
    shard_resident_bytes(p, in);
    for (std::int64_t r : p.resident_bytes) planned += r;
    const sim::Plan plan = sim::build_plan(s, in);
    const std::int64_t placed = plan.devices.front().resident_bytes;
    EXPECT_NEAR(static_cast<double>(planned), static_cast<double>(placed),
                3.0 * static_cast<double>(p.resident_bytes.size()))
        << framework;
    // The optimizer's 12 B a parameter are split 8 ways: 10.5 B a parameter less than unsharded.
    EXPECT_NEAR(static_cast<double>(unsharded - planned), 10.5 * 8'030'261'248, 1e-3 * 10.5 * 8'030'261'248)
        << framework;
  }
}

TEST(Partition, MemoryLimitsAreRespected) {
  sim::JobOptions j;
  j.model = "llama3-8b";
  j.pp = 8;
  j.recompute = "full";
  const auto& s = sim::find_schedule("1f1b");
  sim::ScheduleInput in = sim::make_schedule_input(j, s);
  PartitionProblem p = make_partition_problem(in, s, 0.9);
  PartitionResult r = optimal_partition(p);
  ASSERT_TRUE(r.feasible);
  for (auto mem : r.stage_mem_bytes) EXPECT_LE(mem, p.memory_cap);
  PartitionResult unconstrained = [&] {
    PartitionProblem q = p;
    q.memory_cap = 0;
    return optimal_partition(q);
  }();
  EXPECT_GE(r.bottleneck_ns, unconstrained.bottleneck_ns);  // memory can only cost time
  p.memory_cap = 1;                                         // nothing fits
  EXPECT_FALSE(optimal_partition(p).feasible);
}

TEST(Partition, DeepSpeedParametersBalancesParameterCounts) {
  PartitionProblem p;
  for (int l = 0; l < 8; ++l) {
    p.time_ns.push_back(l == 7 ? 800 : 100);  // a heavy last layer with few parameters
    p.boundary_ns.push_back(0);
    p.resident_bytes.push_back(0);
    p.activation_bytes.push_back(0);
    p.params.push_back(10);
    p.is_block.push_back(true);
  }
  p.stages = 2;
  p.inflight = {1, 1};
  EXPECT_EQ(parameters_partition(p), (std::vector<std::int32_t>{4, 4}));
  EXPECT_EQ(optimal_partition(p).blocks, (std::vector<std::int32_t>{7, 1}));
}

}  // namespace
}  // namespace pipesim::planner
