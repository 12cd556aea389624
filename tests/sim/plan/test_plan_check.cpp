#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/plan/plan_check.hpp"
#include "pipesim/sim/report/critical_path.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

/// Llama-2-7B over 4 H100 stages, 1F1B: p2p over NVLink between the stages.
Plan pipeline_plan() {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 4, 1, 1, 8);
  j.seq = 1024;
  return testing::plan_of("1f1b", j);
}

TEST(PlanCheck, CycleThroughStreamOrderIsNamed) {
  Plan plan = pipeline_plan();
  EXPECT_NO_THROW(check_plan_order(plan));
  // The first forward waits for the last op of its own stream: a cycle.
  std::size_t first = 0;
  while (plan.ops[first].kind != OpKind::kForward) ++first;
  OpId last_same_stream = -1;
  for (std::size_t i = 0; i < plan.ops.size(); ++i)
    if (plan.ops[i].stream == plan.ops[first].stream) last_same_stream = static_cast<OpId>(i);
  plan.ops[first].deps.push_back(last_same_stream);
  try {
    check_plan_order(plan);
    FAIL() << "cycle not found";
  } catch (const DeadlockError& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("op {} forward", first)), std::string::npos) << e.what();
  }
}

TEST(PlanCheck, CriticalPathCoversTheRunOfASerialPipeline) {
  Plan plan = pipeline_plan();
  Timeline tl = Engine{}.run(plan);
  CriticalPath cp = critical_path(plan, tl);
  ASSERT_FALSE(cp.ops.empty());
  EXPECT_LE(cp.length_s, cp.step_time_s + 1e-12);  // op time on one path cannot exceed the run
  EXPECT_GT(cp.length_s, 0.5 * cp.step_time_s);
  double shares = 0;
  for (const auto& s : cp.by_resource) shares += s.share;
  EXPECT_NEAR(shares, 1.0, 1e-9);
  EXPECT_NE(cp.advice.find("speed up"), std::string::npos);
  // Consecutive ops on the path are linked by a dependency or stream order.
  for (std::size_t k = 1; k < cp.ops.size(); ++k) {
    const auto& op = plan.ops[static_cast<std::size_t>(cp.ops[k])];
    const auto& prev = plan.ops[static_cast<std::size_t>(cp.ops[k - 1])];
    const bool dep = std::find(op.deps.begin(), op.deps.end(), cp.ops[k - 1]) != op.deps.end();
    EXPECT_TRUE(dep || op.stream == prev.stream);
  }
}

}  // namespace
}  // namespace pipesim::sim
