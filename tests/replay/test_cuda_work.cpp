// The CUDA replay issues exactly the work the cost model charged: for every op of every schedule's plan, the
// GEMM FLOPs of the calls the module would make equal the op's FLOPs (to the multiply-add), its device copy
// moves the op's memory-bound bytes, transfers copy their bytes and CPU optimizer steps run their
// parameters. Needs no GPU: the module's decisions are plain functions (cuda_work.hpp).
#include <gtest/gtest.h>

#include <cmath>

#include "cuda_backend.hpp"
#include "cuda_work.hpp"
#include "pipesim/sim/job/job.hpp"
#include "test_helpers.hpp"

namespace pipesim::replay {
namespace {

using cuda_abi::gemm_calls;
using cuda_abi::GemmCall;
using cuda_abi::kMaxOperandElements;
using cuda_abi::total_flops;

void expect_calls_fit(const std::vector<GemmCall>& calls, const std::string& what) {
  for (const GemmCall& c : calls) {
    EXPECT_GT(c.m, 0) << what;
    EXPECT_GT(c.n, 0) << what;
    EXPECT_GT(c.k, 0) << what;
    EXPECT_GT(c.count, 0) << what;
    EXPECT_LE(c.m * c.k, kMaxOperandElements) << what;
    EXPECT_LE(c.k * c.n, kMaxOperandElements) << what;
    EXPECT_LE(c.m * c.n, kMaxOperandElements) << what;
  }
}

TEST(CudaWork, TilesOfAnOversizedGemmSumToItExactly) {
  // The output head of a 152k vocabulary over 4096 tokens: operands far beyond the buffers.
  cuda_abi::Op op;
  op.gemms = {4096, 151936, 2048, 3};
  op.flops = 2.0 * 4096 * 151936 * 2048 * 3;
  const auto calls = gemm_calls(op);
  expect_calls_fit(calls, "head");
  EXPECT_EQ(total_flops(calls), op.flops);
  // Its backward's input gradient (k = the vocabulary): the output stays whole, k is cut in a few pieces.
  cuda_abi::Op dgrad;
  dgrad.gemms = {4096, 2048, 151936, 1};
  dgrad.flops = 2.0 * 4096 * 2048 * 151936;
  const auto pieces = gemm_calls(dgrad);
  expect_calls_fit(pieces, "dgrad");
  EXPECT_EQ(total_flops(pieces), dgrad.flops);
  for (const GemmCall& c : pieces) {
    EXPECT_EQ(c.m, 4096);
    EXPECT_EQ(c.n, 2048);
  }
  EXPECT_EQ(pieces.front().k, 16384);  // 67 M operand elements / 4096 rows
}

TEST(CudaWork, FlopsBeyondTheShapesBecomeGemmsOfExactlyThatSize) {
  cuda_abi::Op op;
  op.gemms = {1024, 2048, 2048, 4};
  op.flops = 2.0 * 1024 * 2048 * 2048 * 4 + 123456790;  // an attention core that has no shape
  op.gemm_gflop = 8;
  const auto calls = gemm_calls(op);
  expect_calls_fit(calls, "attention");
  EXPECT_EQ(total_flops(calls), op.flops);
  cuda_abi::Op shapeless;
  shapeless.flops = 3.4e12;
  shapeless.gemm_gflop = 50;
  EXPECT_EQ(total_flops(gemm_calls(shapeless)), shapeless.flops);
}

/// Every op of the plan as the module receives it, against the plan's own work.
void expect_work_matches(const sim::Plan& plan, const std::string& what) {
  const cuda_abi::Request r = flatten_for_cuda(plan, 1.0);
  ASSERT_EQ(r.ops.size(), plan.ops.size()) << what;
  int computes = 0;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const sim::Op& op = plan.ops[i];
    const cuda_abi::Op& o = r.ops[i];
    const std::string where = what + " op " + std::to_string(i);
    if (op.fixed_duration >= 0) {
      EXPECT_EQ(o.work, cuda_abi::Work::kFixed) << where;
      EXPECT_EQ(o.fixed_ns, op.fixed_duration) << where;
    } else if (const auto* c = sim::compute_of(op.payload)) {
      ++computes;
      ASSERT_EQ(o.work, cuda_abi::Work::kCompute) << where;
      const auto calls = gemm_calls(o);
      expect_calls_fit(calls, where);
      // To the multiply-add: the charged FLOPs are whole multiply-adds.
      EXPECT_LE(std::abs(total_flops(calls) - c->flops), 2.0) << where << " charged " << c->flops;
      EXPECT_LE(std::abs(2 * o.copy_bytes - c->mem_bytes), 1) << where;
    } else if (const auto* t = std::get_if<sim::TransferWork>(&op.payload)) {
      EXPECT_EQ(o.work, cuda_abi::Work::kCopy) << where;
      EXPECT_EQ(o.copy_bytes, t->bytes) << where;
    } else if (const auto* m = std::get_if<sim::MemoryWork>(&op.payload)) {
      EXPECT_EQ(o.work, cuda_abi::Work::kCopy) << where;
      EXPECT_LE(std::abs(2 * o.copy_bytes - m->bytes), 1) << where;
    } else if (const auto* w = std::get_if<sim::CpuWork>(&op.payload)) {
      EXPECT_EQ(o.work, cuda_abi::Work::kCpuAdam) << where;
      EXPECT_EQ(o.params, w->params) << where;
      EXPECT_EQ(o.threads, w->threads) << where;
    }
  }
  EXPECT_GT(computes, 0) << what;
}

TEST(CudaWork, EveryScheduleIssuesWhatTheCostModelCharged) {
  for (const sim::ScheduleDescriptor& s : sim::schedule_registry()) {
    sim::JobOptions j = sim::testing::job("qwen3-1.7b", "h100-sxm-8x", 2, 1, 1, 4);
    j.seq = 1024;
    if (s.kind == sim::ScheduleKind::kWholePlan) j.pp = 2;
    sim::Plan plan;
    try {
      plan = sim::build_plan(s, sim::make_schedule_input(j, s));
    } catch (const sim::InputError& e) {
      ADD_FAILURE() << s.name << ": " << e.what();
      continue;
    }
    expect_work_matches(plan, s.name);
  }
}

}  // namespace
}  // namespace pipesim::replay
