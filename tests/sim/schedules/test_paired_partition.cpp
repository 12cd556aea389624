// The default partition of the two-chunks-per-rank placements (ZB-V's V, DualPipe's two copies): blocks go to
// the lightest rank, so the rank holding the embedding and the output layer takes fewer.
#include <gtest/gtest.h>

#include "schedules/paired_partition.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

/// An embedding of no work, `blocks` blocks of one unit each and an output layer of `head` units.
std::vector<LayerCost> layers(std::int32_t blocks, double head) {
  std::vector<LayerCost> out(static_cast<std::size_t>(blocks) + 2);
  out.front().role = LayerRole::kEmbedding;
  for (std::int32_t i = 1; i <= blocks; ++i) out[static_cast<std::size_t>(i)].fwd_flops = 1;
  out.back().role = LayerRole::kHead;
  out.back().fwd_flops = head;
  return out;
}

TEST(PairedPartition, TheRankWithTheOutputLayerTakesFewerBlocks) {
  // ZB-V, pp 4 (8 chunks, rank r holds chunks r and 7 - r), 14 blocks, an output layer of 3 blocks' work:
  // every middle chunk first gets one block; then each block goes to the lightest rank, inside it to the
  // lighter chunk. Rank 0 ends with 2 blocks + the output layer (5 units), the others with 4 blocks each;
  // the balanced split [2,2,2,2,2,2,1,1] would leave rank 0 with 6.
  const auto l = layers(14, 3);
  const auto part = paired_partition(l, block_span(l), 4, ChunkPlacement::kV);
  EXPECT_EQ(part, (std::vector<std::int32_t>{2, 2, 2, 2, 2, 2, 2, 0}));
}

TEST(PairedPartition, TwoCopiesBalanceThePairsOfStages) {
  // DualPipe, pp 8: ranks r and 7 - r both hold stages r and 7 - r, so each pair's blocks plus its
  // embedding or output layer is a rank's work; the pairs end within one block of each other.
  const auto l = layers(30, 5);
  const auto part = paired_partition(l, block_span(l), 8, ChunkPlacement::kDual);
  ASSERT_EQ(part.size(), 8u);
  std::int32_t sum = 0;
  for (std::int32_t b : part) sum += b;
  EXPECT_EQ(sum, 30);
  std::vector<double> pair_work;
  for (int u = 0; u < 4; ++u) pair_work.push_back(part[u] + part[7 - u] + (u == 0 ? 5.0 : 0.0));
  const auto [lo, hi] = std::minmax_element(pair_work.begin(), pair_work.end());
  EXPECT_LE(*hi - *lo, 1.0);
  for (int s = 1; s < 7; ++s) EXPECT_GE(part[s], 1) << s;
  // Too few blocks for every chunk: no partition, the caller falls back.
  const auto few = layers(3, 1);
  EXPECT_TRUE(paired_partition(few, block_span(few), 4, ChunkPlacement::kV).empty());
}

TEST(PairedPartition, EvensOutZbVAndDualPipeOnARealModel) {
  // llama3-8b on 8 H100s, pp 8: the paired split takes rank 0's output layer into account and shortens both
  // schedules' step against their balanced split.
  JobOptions j = testing::job("llama3-8b", "h100-sxm-8x", 8, 1, 1, 16);
  j.seq = 4096;
  for (const char* name : {"zb-v", "dualpipe"}) {
    const auto& s = find_schedule(name);
    ScheduleInput in = make_schedule_input(j, s);
    const auto paired = testing::simulate(name, in);
    in.partition = balanced_partition(32, s.placement == ChunkPlacement::kDual ? 8 : 16);
    const auto balanced = testing::simulate(name, in);
    EXPECT_LT(paired.metrics.step_time_s, balanced.metrics.step_time_s) << name;
    EXPECT_LT(paired.plan.meta.partition.front() + paired.plan.meta.partition.back(),
              balanced.plan.meta.partition.front() + balanced.plan.meta.partition.back())
        << name;
  }
}

}  // namespace
}  // namespace pipesim::sim
