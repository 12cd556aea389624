// Megatron-LM's asynchronous tensor-parallel communication: the backward's TP collectives beside its GEMMs
// (--tp-overlap backward) against each waiting on the compute stream (none); with sequence parallelism the
// backward's collectives are 1.5x the forward's, a third of them exposed when overlapped.
#include <cmath>

#include <gtest/gtest.h>

#include "pipesim/sim/job/job.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

struct Simulated {
  Plan plan;
  Timeline tl;
  Duration step = 0;
};

/// llama2-7b at tp 2 on H100s; `slowdown` replaces the profile's collective_compute_slowdown (0 here: the
/// lowering is checked on its own).
Simulated run(bool sequence_parallel, const std::string& overlap, double slowdown = 0) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 1, 2, 1, 1);
  j.seq = 1024;
  j.sequence_parallel = sequence_parallel;
  j.tp_overlap = overlap;
  Simulated r{testing::plan_of("1f1b", j), {}, 0};
  r.plan.hw.gpu.collective_compute_slowdown = slowdown;
  r.tl = Engine{}.run(r.plan);
  for (Duration e : r.tl.end) r.step = std::max(r.step, e);
  return r;
}

Duration length(const Simulated& r, std::size_t op) {
  return r.tl.end[op] - r.tl.start[op];
}

/// The ops of `kind` on streams named `stream` of the first GPU.
std::vector<std::size_t> ops_of(const Plan& plan, OpKind kind, const std::string& stream) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Stream& s = plan.streams[static_cast<std::size_t>(plan.ops[i].stream)];
    if (plan.ops[i].kind == kind && s.name == stream && s.device == 0) out.push_back(i);
  }
  return out;
}

TEST(TpOverlap, TheBackwardAllReduceRunsBesideTheWeightGradients) {
  const Simulated blocking = run(false, "none"), overlap = run(false, "backward");
  // Blocking: one backward op, then its all-reduce on the compute stream (forward's, backward's).
  ASSERT_EQ(ops_of(blocking.plan, OpKind::kBackward, "compute").size(), 1u);
  const auto blocking_ar = ops_of(blocking.plan, OpKind::kAllReduce, "compute");
  ASSERT_EQ(blocking_ar.size(), 2u);
  // Overlapped: the input gradients, then the weight gradients beside the all-reduce on the tp stream.
  const auto bin = ops_of(overlap.plan, OpKind::kBackwardInput, "compute");
  const auto bw = ops_of(overlap.plan, OpKind::kBackwardWeight, "compute");
  const auto hidden = ops_of(overlap.plan, OpKind::kAllReduce, "tp");
  ASSERT_EQ(bin.size(), 1u);
  ASSERT_EQ(bw.size(), 1u);
  ASSERT_EQ(hidden.size(), 1u);
  EXPECT_EQ(ops_of(overlap.plan, OpKind::kAllReduce, "compute").size(), 1u);  // the forward's
  EXPECT_EQ(overlap.tl.start[bw[0]], overlap.tl.end[bin[0]]);
  EXPECT_EQ(overlap.tl.start[hidden[0]], overlap.tl.end[bin[0]]);
  // The same bytes as the blocking backward's all-reduce, so the same time on an idle link.
  const auto& moved = std::get<TransferWork>(overlap.plan.ops[hidden[0]].payload);
  EXPECT_EQ(moved.bytes, std::get<TransferWork>(blocking.plan.ops[blocking_ar[1]].payload).bytes);
  EXPECT_EQ(length(overlap, hidden[0]), length(blocking, blocking_ar[1]));
  ASSERT_LT(length(overlap, hidden[0]), length(overlap, bw[0])) << "hidden entirely at this shape";
  // Only the column-parallel layers' weight gradients (QKV, gate and up) hide the all-reduce: the
  // row-parallel ones (output and down projections) run with the input gradients. llama2-7b, 1024 tokens,
  // tp 2, 32 blocks: 2 x 1024 x 32 x (4096 x 4096 + 4096 x 11008) / 2 FLOPs move to the first op.
  const std::size_t whole = ops_of(blocking.plan, OpKind::kBackward, "compute")[0];
  const auto flops = [&](const Simulated& r, std::size_t op) {
    return compute_of(r.plan.ops[op].payload)->flops;
  };
  const double rows = 2.0 * 1024 * 32 * (4096.0 * 4096 + 4096.0 * 11008) / 2;
  EXPECT_DOUBLE_EQ(flops(overlap, bin[0]) + flops(overlap, bw[0]), flops(blocking, whole));
  // Against zero-bubble's own input-gradient pass of the same job (B without any weight gradient).
  JobOptions zb = testing::job("llama2-7b", "h100-sxm-8x", 1, 2, 1, 1);
  zb.seq = 1024;
  zb.sequence_parallel = false;
  const Plan zb_plan = testing::plan_of("zb-h1", zb);
  const auto zb_input = ops_of(zb_plan, OpKind::kBackwardInput, "compute");
  ASSERT_EQ(zb_input.size(), 1u);
  const double input_only = compute_of(zb_plan.ops[zb_input[0]].payload)->flops;
  EXPECT_NEAR(flops(overlap, bin[0]) - input_only, rows, 1.0);
  // The two halves launch the whole backward's kernels once between them; what the step saves is the
  // all-reduce, less the two halves' rounding against the whole.
  const Duration split = length(overlap, bin[0]) + length(overlap, bw[0]) - length(blocking, whole);
  EXPECT_LE(std::abs(split), 2);
  EXPECT_EQ(blocking.step - overlap.step, length(blocking, blocking_ar[1]) - split);
}

TEST(TpOverlap, ComputeBesideTheCollectiveRunsSlowerByTheProfilesFigure) {
  const Simulated free = run(false, "backward"), contended = run(false, "backward", 0.25);
  const auto bw = ops_of(free.plan, OpKind::kBackwardWeight, "compute");
  const auto hidden = ops_of(free.plan, OpKind::kAllReduce, "tp");
  ASSERT_EQ(bw.size(), 1u);
  ASSERT_EQ(hidden.size(), 1u);
  // The collective itself is not slowed; the weight gradients beside it do a/1.25 of their work while it
  // runs (a = its length), the rest at full speed once it is done.
  const Duration a = length(free, hidden[0]);
  EXPECT_EQ(length(contended, hidden[0]), a);
  const Duration w = length(free, bw[0]);
  ASSERT_GT(w, a);
  const auto expected =
      a + static_cast<Duration>(std::ceil(static_cast<double>(w) - static_cast<double>(a) / 1.25));
  EXPECT_EQ(length(contended, bw[0]), expected);
  EXPECT_NEAR(static_cast<double>(expected - w), 0.2 * static_cast<double>(a), 1.0);
  EXPECT_EQ(contended.step - free.step, expected - w);
  // Blocking collectives have no compute beside them: nothing changes.
  EXPECT_EQ(run(false, "none", 0.25).step, run(false, "none").step);
}

TEST(TpOverlap, SequenceParallelBackwardMovesHalfAgainAndHidesTwoThirds) {
  const Simulated blocking = run(true, "none"), overlap = run(true, "backward");
  const auto bytes = [](const Simulated& r, std::size_t op) {
    return std::get<TransferWork>(r.plan.ops[op].payload).bytes;
  };
  const auto ar = ops_of(blocking.plan, OpKind::kAllReduce, "compute");
  ASSERT_EQ(ar.size(), 2u);
  // Forward: all-gather + reduce-scatter round each of the two sequence-parallel regions; backward: the
  // same, and the column-parallel layers' inputs all-gathered again for their weight gradients.
  EXPECT_EQ(bytes(blocking, ar[1]), bytes(blocking, ar[0]) * 3 / 2);
  // Overlapped: a third exposed (the row-parallel layers' output gradients), two thirds beside the
  // backward, which is not split.
  const auto exposed = ops_of(overlap.plan, OpKind::kAllReduce, "compute");
  const auto hidden = ops_of(overlap.plan, OpKind::kAllReduce, "tp");
  ASSERT_EQ(exposed.size(), 2u);
  ASSERT_EQ(hidden.size(), 1u);
  EXPECT_EQ(bytes(overlap, exposed[1]), bytes(blocking, ar[0]) / 2);
  EXPECT_EQ(bytes(overlap, hidden[0]), bytes(blocking, ar[0]));
  const auto b = ops_of(overlap.plan, OpKind::kBackward, "compute");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(overlap.tl.start[hidden[0]], overlap.tl.start[b[0]]);
  EXPECT_EQ(overlap.tl.start[exposed[1]], overlap.tl.end[b[0]]);
  EXPECT_LT(overlap.step, blocking.step);
}

TEST(TpOverlap, DataParallelBucketsFollowTheWeightGradientsOnEveryReplica) {
  // dp 2, pp 2, no sequence parallelism, every replica explicit: the last backward's gradient buckets hang
  // off its weight-gradient ops, the run completes, and symmetric replicas stand for the explicit ones.
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 2, 2, 4);
  j.seq = 1024;
  j.sequence_parallel = false;
  j.explicit_replicas = true;
  const Plan plan = testing::plan_of("1f1b", j);
  std::int64_t buckets = 0;
  for (const Op& op : plan.ops) {
    if (plan.streams[static_cast<std::size_t>(op.stream)].name != "collective") continue;
    ++buckets;
    ASSERT_EQ(op.deps.size(), 1u);
    EXPECT_EQ(plan.ops[static_cast<std::size_t>(op.deps[0])].kind, OpKind::kBackwardWeight);
  }
  EXPECT_GT(buckets, 0);
  const Timeline tl = Engine{}.run(plan);
  const Metrics explicit_run = compute_metrics(plan, tl);
  j.explicit_replicas = false;
  const Plan one = testing::plan_of("1f1b", j);
  const Metrics symmetric = compute_metrics(one, Engine{}.run(one));
  EXPECT_EQ(explicit_run.step_span_ns, symmetric.step_span_ns);
  EXPECT_EQ(explicit_run.peak_gpu_mem_bytes, symmetric.peak_gpu_mem_bytes);
}

TEST(TpOverlap, RejectsAnUnknownMode) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 1, 2, 1, 1);
  j.tp_overlap = "forward";
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("tp_overlap"), std::string::npos);
}

}  // namespace
}  // namespace pipesim::sim
