// Stragglers: a synchronous job keeps the pace of its slowest GPU. The expected maximum of n standard normals
// has closed forms for two and three (1/sqrt(pi), 3/(2 sqrt(pi))); tables give it for larger n.
#include <gtest/gtest.h>

#include <cmath>

#include "pipesim/sim/hardware/stragglers.hpp"
#include "pipesim/sim/job/job.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

TEST(Stragglers, TheExpectedSlowestOfNMatchesItsClosedForms) {
  EXPECT_EQ(expected_max_of_normals(1), 0);
  EXPECT_NEAR(expected_max_of_normals(2), 1 / std::sqrt(M_PI), 1e-9);
  EXPECT_NEAR(expected_max_of_normals(3), 3 / (2 * std::sqrt(M_PI)), 1e-9);
  // Tables of normal order statistics (Harter 1961): 1.02938 for 4, 1.53875 for 10, 2.50759 for 100, 3.24144
  // for 1,000.
  EXPECT_NEAR(expected_max_of_normals(4), 1.02938, 1e-5);
  EXPECT_NEAR(expected_max_of_normals(10), 1.53875, 1e-5);
  EXPECT_NEAR(expected_max_of_normals(100), 2.50759, 1e-5);
  EXPECT_NEAR(expected_max_of_normals(1000), 3.24144, 1e-5);
  // It grows as sqrt(2 ln n), ever more slowly: a thousand times more GPUs add less than one deviation.
  EXPECT_LT(expected_max_of_normals(1000000) - expected_max_of_normals(1000), 1.7);
}

TEST(Stragglers, ASlowerSlowestGpuStretchesEveryComputeOp) {
  // 2 % speed variation: two GPUs wait for the slower, 1 / (1 - 0.02 / sqrt(pi)) of the profile's time.
  EXPECT_EQ(straggler_slowdown(0, 4096), 1);
  EXPECT_EQ(straggler_slowdown(0.02, 1), 1);
  EXPECT_NEAR(straggler_slowdown(0.02, 2), 1 / (1 - 0.02 / std::sqrt(M_PI)), 1e-12);
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 1, 1, 4);
  j.seq = 512;
  const Plan even = testing::plan_of("1f1b", j);
  j.gpu_speed_cv = 0.02;
  const Plan varied = testing::plan_of("1f1b", j);
  EXPECT_EQ(varied.meta.gpu_speed_cv, 0.02);
  const Timeline a = Engine{}.run(even), b = Engine{}.run(varied);
  const double slowdown = straggler_slowdown(0.02, 2);
  int computes = 0;
  for (std::size_t i = 0; i < even.ops.size(); ++i) {
    if (compute_of(even.ops[i].payload) == nullptr || even.ops[i].fixed_duration >= 0) continue;
    const Duration base = a.end[i] - a.start[i];
    if (base == 0) continue;
    EXPECT_EQ(b.end[i] - b.start[i],
              static_cast<Duration>(std::llround(static_cast<double>(base) * slowdown)));
    ++computes;
  }
  EXPECT_GT(computes, 0);
  EXPECT_GT(b.end.back(), a.end.back());
}

TEST(Stragglers, AnImpossibleSpreadIsRefusedNamingTheOption) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 1, 1, 4);
  j.gpu_speed_cv = 0.7;
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("gpu_speed_cv"), std::string::npos);
}

}  // namespace
}  // namespace pipesim::sim
