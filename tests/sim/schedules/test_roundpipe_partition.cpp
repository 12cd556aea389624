// RoundPipe's automatic partitioning: candidate stage times within [maxLayer, 1.1 maxLayer], the fused stage
// packed from the end, forward stages from the back, backward stages from the front.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "pipesim/sim/workload/model.hpp"
#include "schedules/offload/roundpipe_partition.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

using Ranges = std::vector<std::pair<std::int32_t, std::int32_t>>;

TEST(RoundPipePartition, UniformBlocksGiveTheClosedForm) {
  // Forward 1 ms, backward 1 + 1 ms, a backward stage recomputes: 3 ms per layer, the only candidate T.
  const auto layers = testing::uniform_layers(8, 1'000'000, 1'000'000, 1'000'000);
  const auto hw = load_hardware_profile("h100-sxm-8x");
  const RoundPipePartition p = roundpipe_partition(layers, hw, "bf16", 4);
  EXPECT_EQ(p.stage_time_ns, 3'000'000);
  EXPECT_EQ(p.forward, (Ranges{{0, 1}, {1, 4}, {4, 7}}));  // three forward layers fill T
  EXPECT_EQ(p.backward, (Ranges{{7, 8}, {6, 7}, {5, 6}, {4, 5}, {3, 4}, {2, 3}, {1, 2}, {0, 1}}));
  EXPECT_DOUBLE_EQ(p.cost_ns, 11 * 3e6);  // 11 stage jobs on 8 GPUs
}

TEST(RoundPipePartition, StagesTileTheModelWithinTheStageTime) {
  const ModelSpec m = load_model("qwen3-8b");
  const auto layers = model_layer_costs(m, CostOptions{1, 2048, 1, Recompute::kFull});
  const auto hw = load_hardware_profile("rtx4090-8x");
  const RoundPipePartition p = roundpipe_partition(layers, hw, "bf16", 9);
  const auto n = static_cast<std::int32_t>(layers.size());
  ASSERT_FALSE(p.forward.empty());
  ASSERT_FALSE(p.backward.empty());
  EXPECT_EQ(p.backward.front().second, n);  // the fused stage holds the last layers
  std::int32_t at = 0;
  for (auto [b, e] : p.forward) {
    EXPECT_EQ(b, at);
    EXPECT_LT(b, e);
    at = e;
  }
  EXPECT_EQ(at, p.backward.front().first);  // forward stages end where the fused one starts
  at = p.backward.front().first;
  for (std::size_t k = 1; k < p.backward.size(); ++k) {  // backward stages run from the top down
    EXPECT_EQ(p.backward[k].second, at);
    at = p.backward[k].first;
  }
  EXPECT_EQ(at, 0);
  std::int64_t max_layer = 0;
  for (const auto& l : layers)
    max_layer = std::max(max_layer, hw.compute_ns(l.fwd_flops, l.gemm_gflop, l.kernels, "bf16"));
  EXPECT_GE(p.stage_time_ns, max_layer);
}

TEST(RoundPipePartition, ALayerAboveTheMemoryCapIsAnInputError) {
  auto layers = testing::uniform_layers(4, 1'000'000, 1'000'000, 1'000'000);
  layers[1].params = layers[1].trainable_params = std::int64_t{1} << 32;  // 16 GiB of bf16 weights + grads
  auto hw = load_hardware_profile("rtx4090-8x");
  const std::string err = testing::error_of([&] { roundpipe_partition(layers, hw, "bf16", 4); });
  EXPECT_EQ(err.rfind("model: layer 1 needs", 0), 0u) << err;
}

}  // namespace
}  // namespace pipesim::sim

namespace pipesim::sim {
namespace {

TEST(RoundPipePartition, TheFusedHeadBoundsTheStageTime) {
  // Blocks: forward 1 ms, backward 3 ms with recompute; the head: forward 2, backward 4, fused 6 ms. The
  // stage time cannot go below the fused head, so T = 6 ms: two forward stages, four backward stages.
  auto layers = testing::uniform_layers(9, 1'000'000, 1'000'000, 1'000'000);
  layers.back().role = LayerRole::kHead;
  layers.back().fwd_ns = 2'000'000;
  layers.back().bwd_input_ns = layers.back().bwd_weight_ns = 2'000'000;
  const RoundPipePartition p = roundpipe_partition(layers, load_hardware_profile("h100-sxm-8x"), "bf16", 4);
  EXPECT_EQ(p.stage_time_ns, 6'000'000);
  EXPECT_EQ(p.forward, (std::vector<std::pair<std::int32_t, std::int32_t>>{{0, 2}, {2, 8}}));
  EXPECT_EQ(p.backward,
            (std::vector<std::pair<std::int32_t, std::int32_t>>{{8, 9}, {6, 8}, {4, 6}, {2, 4}, {0, 2}}));
}

}  // namespace
}  // namespace pipesim::sim

namespace pipesim::sim {
namespace {

TEST(RoundPipePartition, AGivenPartitionIsTheSameJobAsTheAutomaticOne) {
  JobOptions j = testing::job("qwen3-1.7b", "rtx4090-8x", 8, 1, 1, 9);
  j.seq = 1024;
  const auto& s = find_schedule("roundpipe");
  ScheduleInput in = make_schedule_input(j, s);
  const RoundPipePartition automatic = roundpipe_partition(in.costs.front(), in.hw, in.dtype, 9);
  std::vector<std::int32_t> fwd_counts, bwd_counts;
  for (auto [b, e] : automatic.forward) fwd_counts.push_back(e - b);
  for (auto [b, e] : automatic.backward) bwd_counts.push_back(e - b);
  const std::string fwd = fmt::format("{}", fmt::join(fwd_counts, ","));
  const std::string bwd = fmt::format("{}", fmt::join(bwd_counts, ","));
  const RoundPipePartition given = given_roundpipe_partition(in.costs.front(), in.hw, in.dtype,
                                                             parse_partition(fwd), parse_partition(bwd));
  EXPECT_EQ(given.forward, automatic.forward);
  EXPECT_EQ(given.backward, automatic.backward);
  EXPECT_EQ(given.stage_time_ns, automatic.stage_time_ns);
  // Through the job: the same plan.
  const Plan a = testing::plan_of("roundpipe", j);
  j.partition = fmt::format("{}/{}", fwd, bwd);
  const Plan b = testing::plan_of("roundpipe", j);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) EXPECT_EQ(a.ops[i].deps, b.ops[i].deps);
  // Counts that do not tile the layers name the flag.
  EXPECT_EQ(testing::error_of([&] {
              given_roundpipe_partition(in.costs.front(), in.hw, in.dtype, {1, 2}, {1, 2});
            }).rfind("partition:", 0),
            0u);
}

}  // namespace
}  // namespace pipesim::sim
