// Metrics against closed forms: GPipe on p uniform stages with zero-time p2p runs (m + p - 1)(F + B); stage s
// idles s F before its first forward and s B after its last backward.
#include <gtest/gtest.h>

#include "pipesim/sim/report/metrics.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

constexpr Duration kF = 1'000'000, kB = 2'000'000;  // ns per microbatch and stage

TEST(Metrics, GpipeBubbleBreakdownIsExact) {
  const int p = 4, m = 8;
  auto r = testing::simulate("gpipe", testing::uniform_input(p, m, kF, kB / 2, kB / 2));
  const Duration step = (m + p - 1) * (kF + kB);
  EXPECT_EQ(r.metrics.step_span_ns, step);
  EXPECT_EQ(r.metrics.step_span_iterations, 1);
  EXPECT_DOUBLE_EQ(r.metrics.step_time_s, to_seconds(step));
  const double denom = static_cast<double>(p) * static_cast<double>(step);
  EXPECT_DOUBLE_EQ(r.metrics.bubble_fraction, 1.0 - static_cast<double>(p * m * (kF + kB)) / denom);
  // Warm-up sum_s s F and drain sum_s s B over the stages.
  EXPECT_DOUBLE_EQ(r.metrics.bubble_warmup_fraction, static_cast<double>(6 * kF) / denom);
  EXPECT_DOUBLE_EQ(r.metrics.bubble_drain_fraction, static_cast<double>(6 * kB) / denom);
  EXPECT_NEAR(r.metrics.bubble_intra_fraction,
              r.metrics.bubble_fraction - r.metrics.bubble_warmup_fraction - r.metrics.bubble_drain_fraction,
              1e-15);
  ASSERT_EQ(r.metrics.gpus.size(), 4u);
  for (int s = 0; s < p; ++s) {
    const auto& g = r.metrics.gpus[static_cast<std::size_t>(s)];
    EXPECT_DOUBLE_EQ(g.busy_s, to_seconds(m * (kF + kB)));
    EXPECT_DOUBLE_EQ(g.warmup_s, to_seconds(s * kF));
    EXPECT_DOUBLE_EQ(g.drain_s, to_seconds(s * kB));
  }
  // 8 sequences of 1024 tokens per step.
  EXPECT_DOUBLE_EQ(r.metrics.tokens_per_s, 8.0 * 1024 / to_seconds(step));
}

TEST(Metrics, SteadyStateSpansIterationsExactly) {
  testing::RunResult one = testing::simulate("1f1b", testing::uniform_input(4, 8, kF, kB / 2, kB / 2));
  ScheduleInput in = testing::uniform_input(4, 8, kF, kB / 2, kB / 2);
  in.iterations = 3;
  testing::RunResult three = testing::simulate("1f1b", in);
  EXPECT_EQ(three.metrics.iterations, 3);
  EXPECT_EQ(three.metrics.step_span_iterations, 2);
  // A synchronous schedule repeats its step: iterations end one step apart.
  EXPECT_EQ(three.metrics.step_span_ns, 2 * one.metrics.step_span_ns);
  EXPECT_DOUBLE_EQ(three.metrics.step_time_s, one.metrics.step_time_s);
  EXPECT_DOUBLE_EQ(three.metrics.run_time_s, 3 * one.metrics.run_time_s);
  EXPECT_DOUBLE_EQ(three.metrics.first_step_time_s, one.metrics.step_time_s);
}

TEST(Metrics, OomNamesTheFirstDeviceAndTheWorstExcess) {
  // GPipe holds all 8 microbatches of 1000 bytes on every stage; 3500 bytes of memory overflow by 4500.
  ScheduleInput in = testing::uniform_input(4, 8, kF, kB / 2, kB / 2, 1, 1000);
  in.hw.gpu.hbm_bytes = 3500;
  in.hw.gpu.runtime_reserved_bytes = 0;
  auto r = testing::simulate("gpipe", in);
  EXPECT_EQ(r.metrics.peak_gpu_mem_bytes, 8000);
  EXPECT_TRUE(r.metrics.oom);
  EXPECT_EQ(r.metrics.oom_device, "gpu0");
  EXPECT_EQ(r.metrics.oom_bytes_over, 4500);
  // The 4th forward of stage 0 is the first to cross 3500 bytes.
  EXPECT_DOUBLE_EQ(r.metrics.oom_time_s, to_seconds(3 * kF));
  // 1F1B holds p - s microbatches: 4000 bytes at most.
  auto one = testing::simulate("1f1b", in);
  EXPECT_EQ(one.metrics.peak_gpu_mem_bytes, 4000);
  EXPECT_EQ(one.metrics.oom_bytes_over, 500);
}

}  // namespace
}  // namespace pipesim::sim

namespace pipesim::sim {
namespace {

TEST(Metrics, NoScheduleReportsMoreThanThePeak) {
  // MFU and HFU above 1 are impossible: every schedule, with and without gradient accumulation.
  for (const ScheduleDescriptor& s : schedule_registry()) {
    for (int k : {1, 2}) {
      JobOptions j = testing::job("qwen3-1.7b", "h100-sxm-8x", 4, 1, 1, 8);
      j.seq = 1024;
      j.accum_steps = k;
      auto r = testing::simulate(s.name, make_schedule_input(j, s));
      EXPECT_GT(r.metrics.mfu, 0.0) << s.name << " K=" << k;
      EXPECT_LE(r.metrics.mfu, r.metrics.hfu) << s.name << " K=" << k;
      EXPECT_LE(r.metrics.hfu, 1.0) << s.name << " K=" << k;
    }
  }
}

}  // namespace
}  // namespace pipesim::sim
