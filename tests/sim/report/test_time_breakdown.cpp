// Where GPU time goes, against hand-computed nanoseconds: idle gaps are charged to the dependency the next op
// waited for last (a p2p transfer: the bubble before it left, the wire time after; a data-parallel
// collective; host work), and the shares of every GPU's time sum to one.
#include <gtest/gtest.h>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "pipesim/sim/report/time_breakdown.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

double sum(const TimeBreakdown& t) {
  return t.kernels + t.tp_comm + t.optimizer + t.pipeline_bubble + t.pp_comm + t.dp_comm + t.cp_comm +
         t.offload + t.other;
}

TEST(TimeBreakdown, HandPlanChargesEachGapToWhatItWaitedFor) {
  // gpu0: forward A [0,100) then sends P [100,150) to gpu1; gpu1: forward B [150,250) after P, its gradient
  // all-reduce C [250,280) on the collective stream, the optimizer O [280,290) after C.
  testing::PlanMaker pm(2);  // streams: gpu0 compute 0, send 1; gpu1 compute 2, send 3; host 4, 5
  const StreamId collective = pm.add_stream(1, StreamKind::kCollective, "collective");
  TransferWork to_gpu1;
  to_gpu1.src = 0;
  to_gpu1.dst = 1;
  const OpId a = pm.add(0, ComputeWork{}, 100);
  const OpId p = pm.add(1, to_gpu1, 50, {a}, OpKind::kP2P);
  const OpId b = pm.add(2, ComputeWork{}, 100, {p});
  const OpId c = pm.add(collective, TransferWork{}, 30, {b}, OpKind::kAllReduce);
  pm.add(2, MemoryWork{}, 10, {c}, OpKind::kOptimizer);
  const Plan& plan = pm.plan;
  const Timeline tl = Engine{}.run(plan);
  ASSERT_EQ(tl.end.back(), 290);
  const TimeBreakdown t = compute_time_breakdown(plan, tl);
  // 2 GPUs x 290 ns. gpu0: A 100 kernels; P on the wire 100..150 (its own transfer, 50 pp); 150..290 waits
  // for gpu1 (140 bubble). gpu1: 0..150 waits for P: 0..100 before it left (bubble), 100..150 on the wire
  // (pp); B 100 kernels; 250..280 waits for C (30 dp); O 10 optimizer.
  const double total = 580;
  EXPECT_DOUBLE_EQ(t.kernels, 200 / total);
  EXPECT_DOUBLE_EQ(t.optimizer, 10 / total);
  EXPECT_DOUBLE_EQ(t.pp_comm, 100 / total);
  EXPECT_DOUBLE_EQ(t.pipeline_bubble, 240 / total);
  EXPECT_DOUBLE_EQ(t.dp_comm, 30 / total);
  EXPECT_DOUBLE_EQ(t.tp_comm, 0);
  EXPECT_DOUBLE_EQ(t.offload, 0);
  EXPECT_DOUBLE_EQ(t.other, 0);
  EXPECT_NEAR(sum(t), 1.0, 1e-12);
}

TEST(TimeBreakdown, GpipeIdleTimeIsAllPipelineBubble) {
  // Zero-time hops: every idle nanosecond waits for another stage's compute; the shares equal the bubble
  // fraction's closed form, (p - 1)(F + B) of (m + p - 1)(F + B) per GPU.
  constexpr Duration kF = 1'000'000, kB = 2'000'000;
  const int p = 4, m = 8;
  auto r = testing::simulate("gpipe", testing::uniform_input(p, m, kF, kB / 2, kB / 2));
  const TimeBreakdown& t = r.metrics.time;
  EXPECT_DOUBLE_EQ(t.pipeline_bubble, static_cast<double>(p - 1) / (m + p - 1));
  EXPECT_DOUBLE_EQ(t.kernels, static_cast<double>(m) / (m + p - 1));
  EXPECT_DOUBLE_EQ(t.pp_comm + t.dp_comm + t.tp_comm + t.offload + t.other + t.optimizer, 0);
  EXPECT_NEAR(t.pipeline_bubble, r.metrics.bubble_fraction, 1e-12);
}

TEST(TimeBreakdown, OnALargePlanSweptInTwoHalvesItGivesTheSameShares) {
  // From 2^17 ops on the plan is swept in two halves on two cores (report/op_sweep.hpp): the same closed
  // form, and the same numbers as computing it alone.
  constexpr Duration kF = 1'000'000, kB = 2'000'000;
  const int p = 4, m = 10000;
  auto r = testing::simulate("gpipe", testing::uniform_input(p, m, kF, kB / 2, kB / 2));
  ASSERT_GE(r.plan.ops.size(), std::size_t{1} << 17);
  const TimeBreakdown& t = r.metrics.time;
  EXPECT_DOUBLE_EQ(t.pipeline_bubble, static_cast<double>(p - 1) / (m + p - 1));
  EXPECT_DOUBLE_EQ(t.kernels, static_cast<double>(m) / (m + p - 1));
  const TimeBreakdown alone = compute_time_breakdown(r.plan, r.timeline);
  EXPECT_EQ(t.kernels, alone.kernels);
  EXPECT_EQ(t.pipeline_bubble, alone.pipeline_bubble);
  EXPECT_EQ(t.pp_comm + t.dp_comm + t.tp_comm + t.cp_comm + t.offload + t.other + t.optimizer, 0);
}

}  // namespace
}  // namespace pipesim::sim
