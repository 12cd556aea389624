// The sweep that the metrics and the time breakdown share: a plan swept in two ranges and merged gives
// exactly what one sweep of the whole plan gives, at every split point; a split that the later range's
// accounting cannot follow (compute streams of one GPU that overlap) is refused, and the plan swept whole.
#include <gtest/gtest.h>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/job/job.hpp"
#include "report/op_sweep.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

void expect_same(const SweepContext& ctx, const OpSweep& a, const OpSweep& b, std::size_t split) {
  SCOPED_TRACE("split at op " + std::to_string(split));
  EXPECT_TRUE(a == b);  // every total, and each GPU's first compute op, reach and last other op
  EXPECT_TRUE(breakdown_of(ctx, a) == breakdown_of(ctx, b));
}

/// Every split point of the plan, merged, against the whole sweep; returns how many splits were refused.
int check_every_split(const Plan& plan, const Timeline& tl) {
  const SweepContext ctx(plan, tl);
  const std::size_t n = plan.ops.size();
  const OpSweep whole = sweep_ops(ctx, 0, n);
  int refused = 0;
  for (std::size_t k = 0; k <= n; ++k) {
    OpSweep merged = sweep_ops(ctx, 0, k);
    if (!merge_sweeps(ctx, merged, sweep_ops(ctx, k, n))) {
      ++refused;
      continue;
    }
    expect_same(ctx, merged, whole, k);
  }
  return refused;
}

TEST(OpSweep, TwoRangesMergeIntoTheWholeSweepOfAPlanWithEveryCause) {
  // llama2-7b pp 2 x tp 2 x dp 2 with the backward's TP collectives overlapped, a data-parallel gradient
  // all-reduce and p2p transfers: pipeline, TP, DP and p2p waits.
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 2, 2, 4);
  j.seq = 1024;
  j.tp_overlap = "backward";
  j.explicit_replicas = true;
  const Plan plan = testing::plan_of("1f1b", j);
  const Timeline tl = Engine{}.run(plan);
  const TimeBreakdown t =
      breakdown_of(SweepContext(plan, tl), sweep_ops(SweepContext(plan, tl), 0, plan.ops.size()));
  EXPECT_GT(t.pipeline_bubble, 0);
  EXPECT_GT(t.tp_comm, 0);
  EXPECT_GT(t.kernels, 0);
  ASSERT_GT(plan.ops.size(), 100u);
  EXPECT_EQ(check_every_split(plan, tl), 0);  // one compute stream per GPU: no split is refused
}

TEST(OpSweep, ASplitAfterAnOverlappingComputeStreamIsRefusedAndTheWholePlanSweptInstead) {
  // gpu0 runs X [0, 100) on its compute stream and Y [0, 50) on a second compute stream; a range that
  // starts at Y would account gpu0's time from Y's end, 50, where it has reached 100.
  testing::PlanMaker pm(1);
  const StreamId second = pm.add_stream(0, StreamKind::kCompute, "compute2");
  pm.add(0, ComputeWork{}, 100);
  pm.add(second, ComputeWork{}, 50);
  pm.add(0, ComputeWork{}, 10);
  const Timeline tl = Engine{}.run(pm.plan);
  ASSERT_EQ(tl.end[1], 50);
  const SweepContext ctx(pm.plan, tl);
  OpSweep first = sweep_ops(ctx, 0, 1);
  EXPECT_FALSE(merge_sweeps(ctx, first, sweep_ops(ctx, 1, 3)));
  EXPECT_EQ(check_every_split(pm.plan, tl), 1);  // only that split
  // Swept whole, gpu0 is busy 160 ns of the 110 ns run: two streams at once.
  const OpSweep whole = sweep_plan(ctx);
  EXPECT_EQ(whole.busy[0], 160);
  EXPECT_EQ(whole.last, 110);
}

}  // namespace
}  // namespace pipesim::sim
