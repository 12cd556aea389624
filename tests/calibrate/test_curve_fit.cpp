#include <gtest/gtest.h>

#include <random>

#include "pipesim/calibrate/cpu_benchmarks.hpp"
#include "pipesim/calibrate/cuda_calibration.hpp"
#include "pipesim/calibrate/curve_fit.hpp"

namespace pipesim::calibrate {
namespace {

TEST(CurveFit, IsotonicPoolsAdjacentViolators) {
  EXPECT_EQ(isotonic_non_decreasing({1, 3, 2, 4}), (std::vector<double>{1, 2.5, 2.5, 4}));
  EXPECT_EQ(isotonic_non_decreasing({5, 4, 3}), (std::vector<double>{4, 4, 4}));
  EXPECT_EQ(isotonic_non_decreasing({1, 2, 3}), (std::vector<double>{1, 2, 3}));
  std::mt19937 rng(1);
  std::normal_distribution<double> noise(0, 2);
  std::vector<double> y;
  for (int i = 0; i < 200; ++i) y.push_back(i * 0.1 + noise(rng));
  auto fit = isotonic_non_decreasing(y);
  double sum_y = 0, sum_fit = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (i > 0) {
      EXPECT_LE(fit[i - 1], fit[i]);
    }
    sum_y += y[i];
    sum_fit += fit[i];
  }
  EXPECT_NEAR(sum_y, sum_fit, 1e-9);  // a least-squares projection keeps the mean
}

TEST(CurveFit, MedianAndCoefficientOfVariation) {
  SampleStats s = summarize({3, 1, 2});
  EXPECT_DOUBLE_EQ(s.median, 2);
  EXPECT_DOUBLE_EQ(s.cv, 0.5);  // stddev 1 / mean 2
  EXPECT_EQ(s.samples, 3);
  EXPECT_DOUBLE_EQ(summarize({4, 1, 2, 3}).median, 2.5);
  EXPECT_EQ(summarize({}).samples, 0);
}

TEST(CpuBenchmarks, ThreadCountsArePowersOfTwoAndAllCores) {
  EXPECT_EQ(default_thread_counts(1), (std::vector<int>{1}));
  EXPECT_EQ(default_thread_counts(2), (std::vector<int>{1, 2}));
  EXPECT_EQ(default_thread_counts(6), (std::vector<int>{1, 2, 4, 6}));
  EXPECT_EQ(default_thread_counts(16), (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(default_thread_counts(48), (std::vector<int>{1, 2, 4, 8, 16, 32, 48}));
}

TEST(Cuda, ReportsWhyItDidNotRun) {
#if defined(PIPESIM_WITH_CUDA)
  EXPECT_TRUE(cuda_compiled());
#else
  EXPECT_FALSE(cuda_compiled());
#endif
  CudaCalibration c = run_cuda_calibration(CudaOptions{true, 2}, [](const std::string&) {});
  if (!c.ran) {
    EXPECT_FALSE(c.why_not.empty());
    GTEST_SKIP() << "CUDA calibration did not run here: " << c.why_not;
  }
  EXPECT_GT(c.device_count, 0);
  ASSERT_FALSE(c.h2d_pinned.empty());
  for (const auto& p : c.h2d_pinned) EXPECT_GT(p.GBps, 0);
  EXPECT_GT(c.launch_overhead_us, 0);
  ASSERT_FALSE(c.gemm.empty());
}

}  // namespace
}  // namespace pipesim::calibrate
