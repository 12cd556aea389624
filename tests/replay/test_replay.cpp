// The replay engine: every schedule's plan executes on the host backend with stream order and dependencies
// holding op by op; cyclic and stuck plans fail fast naming ops; compare reports exact errors on synthetic
// timelines; the host backend's profile is a valid profile.
#include <gtest/gtest.h>

#include <fstream>

#include "pipesim/replay/compare.hpp"
#include "pipesim/replay/refit.hpp"
#include "pipesim/replay/replay.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "test_helpers.hpp"

namespace pipesim::replay {
namespace {

using sim::OpId;

const std::string kTinyModel = std::string(PIPESIM_TEST_DATA_DIR) + "/tiny_model.json";

sim::JobOptions tiny_job(const sim::ScheduleDescriptor& s) {
  sim::JobOptions j = sim::testing::job(kTinyModel, "h100-sxm-8x", 2, 1, 1, 4);
  j.seq = 128;
  if (s.kind == sim::ScheduleKind::kWholePlan) j.pp = 2;
  return j;
}

ReplayOptions quick() {
  ReplayOptions o;
  o.iterations = 1;
  o.work_scale = 0.005;
  o.timeout_s = 30;
  return o;
}

/// Every op ran, after its dependencies and after its stream predecessor.
void expect_order_holds(const sim::Plan& plan, const sim::Timeline& tl, const std::string& what) {
  ASSERT_EQ(tl.start.size(), plan.ops.size()) << what;
  std::vector<OpId> last_on_stream(plan.streams.size(), -1);
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const sim::Op& op = plan.ops[i];
    EXPECT_GE(tl.start[i], 0) << what << " op " << i;
    EXPECT_GE(tl.end[i], tl.start[i]) << what << " op " << i;
    for (OpId d : op.deps) EXPECT_GE(tl.start[i], tl.end[static_cast<std::size_t>(d)]) << what << " op " << i;
    OpId& prev = last_on_stream[static_cast<std::size_t>(op.stream)];
    if (prev >= 0) {
      EXPECT_GE(tl.start[i], tl.end[static_cast<std::size_t>(prev)]) << what << " op " << i;
    }
    prev = static_cast<OpId>(i);
  }
}

TEST(Replay, EveryScheduleReplaysOnHostInOrder) {
  for (const sim::ScheduleDescriptor& s : sim::schedule_registry()) {
    sim::Plan plan;
    try {
      plan = sim::build_plan(s, sim::make_schedule_input(tiny_job(s), s));
    } catch (const sim::InputError& e) {
      ADD_FAILURE() << s.name << ": " << e.what();
      continue;
    }
    const ReplayResult r = replay_plan(plan, quick());
    expect_order_holds(plan, r.timeline, s.name);
    EXPECT_EQ(r.environment.iteration_s.size(), 1u);
    EXPECT_GT(r.environment.compute_gflops_per_thread, 0);
  }
}

TEST(Replay, CyclicPlanIsRefusedBeforeAnythingRuns) {
  const auto& s = sim::find_schedule("1f1b");
  sim::Plan plan = sim::build_plan(s, sim::make_schedule_input(tiny_job(s), s));
  // The first op waits for the last op of its own stream: a cycle with stream order.
  OpId last = -1;
  for (std::size_t i = 0; i < plan.ops.size(); ++i)
    if (plan.ops[i].stream == plan.ops[0].stream) last = static_cast<OpId>(i);
  plan.ops[0].deps.push_back(last);
  const std::string e = sim::testing::error_of([&] { replay_plan(plan, quick()); });
  EXPECT_NE(e.find("cycle"), std::string::npos) << e;
}

TEST(Replay, StuckCollectiveFailsFastNamingTheOp) {
  // A two-member collective with one member in the plan can never start: the watchdog names it.
  const auto& s = sim::find_schedule("1f1b");
  sim::Plan plan = sim::build_plan(s, sim::make_schedule_input(tiny_job(s), s));
  std::size_t p2p = plan.ops.size();
  for (std::size_t i = 0; i < plan.ops.size() && p2p == plan.ops.size(); ++i)
    if (plan.ops[i].kind == sim::OpKind::kP2P) p2p = i;
  ASSERT_LT(p2p, plan.ops.size());
  auto& w = std::get<sim::TransferWork>(plan.ops[p2p].payload);
  w.group = 7;
  w.group_size = 2;
  ReplayOptions o = quick();
  o.timeout_s = 0.2;
  const std::string e = sim::testing::error_of([&] { replay_plan(plan, o); });
  EXPECT_NE(e.find("op " + std::to_string(p2p) + " p2p"), std::string::npos) << e;
  EXPECT_NE(e.find("the other members of its collective"), std::string::npos) << e;
}

TEST(Replay, CudaBackendReplaysOrSaysWhyNot) {
  // Compiled whenever nvcc exists; it runs only with a device (never yet during development).
  for (const char* name : {"1f1b", "roundpipe"}) {
    const auto& s = sim::find_schedule(name);
    const sim::Plan plan = sim::build_plan(s, sim::make_schedule_input(tiny_job(s), s));
    ReplayOptions o = quick();
    o.backend = "cuda";
    ReplayResult r;
    try {
      r = replay_plan(plan, o);
    } catch (const sim::InputError& e) {
      const std::string why = e.what();
      ASSERT_NE(why.find("the cuda replay did not run"), std::string::npos) << why;
      GTEST_SKIP() << why;
    }
    expect_order_holds(plan, r.timeline, name);
    EXPECT_FALSE(r.environment.timing.empty());
    // Each GPU's pool held at least its resident state.
    for (std::size_t d = 0; d < plan.devices.size(); ++d) {
      if (plan.devices[d].kind != sim::DeviceKind::kGpu) continue;
      EXPECT_GE(r.timeline.peak_bytes[d], plan.devices[d].resident_bytes) << name << " device " << d;
    }
  }
}

TEST(Replay, BadOptionsAndBackends) {
  const auto& s = sim::find_schedule("1f1b");
  const sim::Plan plan = sim::build_plan(s, sim::make_schedule_input(tiny_job(s), s));
  ReplayOptions o = quick();
  o.backend = "tpu";
  EXPECT_NE(sim::testing::error_of([&] { replay_plan(plan, o); }).find("valid: host, cuda"),
            std::string::npos);
  o = quick();
  o.work_scale = 0;
  EXPECT_NE(sim::testing::error_of([&] { replay_plan(plan, o); }).find("work_scale:"), std::string::npos);
  o = quick();
  o.iterations = 0;
  EXPECT_NE(sim::testing::error_of([&] { replay_plan(plan, o); }).find("iterations:"), std::string::npos);
}

TimelineFile synthetic(double factor_num, double factor_den) {
  // Three kinds on two streams; durations multiples of 10 ns (milliseconds) so that x 11/10 stays exact.
  TimelineFile f;
  f.path = "synthetic";
  const std::vector<std::pair<std::string, std::int32_t>> ops = {{"forward", 0},  {"p2p", 1}, {"forward", 0},
                                                                 {"backward", 0}, {"p2p", 1}, {"backward", 0},
                                                                 {"optimizer", 0}};
  std::int64_t t = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::int64_t d =
        static_cast<std::int64_t>(1'000'000 * static_cast<double>(i + 1) * factor_num / factor_den);
    f.ops.push_back({ops[i].first, ops[i].second, t, t + d});
    t += d;
  }
  f.step_time_s = static_cast<double>(t) / 1e9;
  f.bubble_fraction = 0.25;
  return f;
}

TEST(Compare, AllOpsTenPercentSlowerReportExactlyTenPercent) {
  const Comparison c = compare_timelines(synthetic(1, 1), synthetic(11, 10));
  EXPECT_NEAR(c.step_error, 0.1, 1e-12);
  ASSERT_EQ(c.kinds.size(), 4u);
  for (const KindError& k : c.kinds) {
    EXPECT_NEAR(k.median, 0.1, 1e-12) << k.kind;
    EXPECT_NEAR(k.p90, 0.1, 1e-12) << k.kind;
    EXPECT_NEAR(k.measured_s, 1.1 * k.predicted_s, 1e-15) << k.kind;
  }
  EXPECT_EQ(c.kinds.front().kind, "backward");  // the largest absolute difference
  EXPECT_EQ(c.top.front().op, 6);               // the longest op
  EXPECT_NE(c.advice.find("gemm_efficiency"), std::string::npos) << c.advice;
  const Comparison same = compare_timelines(synthetic(1, 1), synthetic(1, 1));
  EXPECT_EQ(same.step_error, 0);
  EXPECT_EQ(same.advice, "the timelines agree op by op");
}

TEST(Compare, RefusesTimelinesOfDifferentPlans) {
  TimelineFile other = synthetic(1, 1);
  other.ops[2].kind = "recompute";
  EXPECT_NE(sim::testing::error_of([&] { compare_timelines(synthetic(1, 1), other); }).find("/ops/2"),
            std::string::npos);
  other.ops.pop_back();
  EXPECT_NE(sim::testing::error_of([&] { compare_timelines(synthetic(1, 1), other); }).find("same plan"),
            std::string::npos);
}

TEST(Compare, LoaderIsStrict) {
  const std::string path = ::testing::TempDir() + "pipesim-timeline-test.json";
  auto error_for = [&](const std::string& text) {
    std::ofstream(path) << text;
    return sim::testing::error_of([&] { load_timeline(path); });
  };
  const std::string head =
      R"({"format": "pipesim-timeline", "version": 1, "metrics": {"step_time_s": 1, "bubble_fraction": 0.1}, )";
  EXPECT_EQ(
      error_for(head + R"("ops": [{"op": 0, "kind": "forward", "stream": 0, "start_ns": 0, "end_ns": 5}]})"),
      "no error");
  EXPECT_NE(
      error_for(head +
                R"("ops": [{"op": 0, "kind": "forward", "stream": 0, "start_ns": 0, "end_ns": 5, "x": 1}]})")
          .find("/ops/0/x"),
      std::string::npos);
  EXPECT_NE(
      error_for(head + R"("ops": [{"op": 0, "kind": "forward", "stream": 0, "start_ns": 9, "end_ns": 5}]})")
          .find("/ops/0/end_ns"),
      std::string::npos);
  EXPECT_NE(error_for(R"({"format": "pipesim-plan", "version": 1})").find("/format"), std::string::npos);
  EXPECT_NE(error_for("{").find(path), std::string::npos);
}

/// A simulated timeline as the file compare and refit read.
TimelineFile as_file(const sim::Plan& plan, const sim::Timeline& tl) {
  TimelineFile f;
  f.path = "synthetic-measurement";
  f.step_time_s = sim::compute_metrics(plan, tl).step_time_s;
  for (std::size_t i = 0; i < plan.ops.size(); ++i)
    f.ops.push_back({sim::to_string(plan.ops[i].kind), plan.ops[i].stream, tl.start[i], tl.end[i]});
  return f;
}

TEST(Refit, RecoversAKnownEfficiencyTableFromSyntheticMeasurements) {
  // "Measured": the plan simulated on a GPU whose GEMM efficiency is a known table; refit from a base profile
  // with another table, the efficiency at every GEMM size of the plan comes back, and the plan's step too.
  const auto& s = sim::find_schedule("1f1b");
  sim::JobOptions j = sim::testing::job(kTinyModel, "h100-sxm-8x", 2, 1, 1, 4);
  j.seq = 512;
  j.attention = "flash";
  // As the CUDA replay runs it: the attention core as GEMMs too (cuda_work.hpp gemm_calls).
  j.attention_kernel = "gemm";
  sim::Plan plan = sim::build_plan(s, sim::make_schedule_input(j, s));
  const sim::HardwareProfile base = plan.hw;
  sim::HardwareProfile truth = base;
  truth.gpu.gemm_efficiency = {{0.001, 0.05}, {1.0, 0.35}, {100.0, 0.6}};
  plan.hw = truth;
  const TimelineFile measured = as_file(plan, sim::Engine{}.run(plan));
  const RefitReport r = refit_profile(plan, measured, base, "refit");
  EXPECT_GT(r.compute_ops, 0);
  for (const sim::Op& op : plan.ops)
    if (const auto* c = sim::compute_of(op.payload); c && c->flops > 0) {
      const double want = sim::interpolate_log_x(truth.gpu.gemm_efficiency, c->gemm_gflop);
      EXPECT_NEAR(sim::interpolate_log_x(r.profile.gpu.gemm_efficiency, c->gemm_gflop), want, 1e-4 * want)
          << c->gemm_gflop;
    }
  plan.hw = r.profile;
  const double refit_step = sim::compute_metrics(plan, sim::Engine{}.run(plan)).step_time_s;
  plan.hw = base;
  const double base_step = sim::compute_metrics(plan, sim::Engine{}.run(plan)).step_time_s;
  EXPECT_NEAR(refit_step, measured.step_time_s, 1e-4 * measured.step_time_s);
  EXPECT_GT(std::abs(base_step - measured.step_time_s), 100 * std::abs(refit_step - measured.step_time_s));
  // The refit profile is a valid profile file.
  EXPECT_NO_THROW(sim::parse_hardware_profile(sim::hardware_profile_to_json(r.profile), "refit"));
  // A timeline of another plan is refused.
  TimelineFile other = measured;
  other.ops.pop_back();
  EXPECT_NE(sim::testing::error_of([&] {
              refit_profile(plan, other, base, "x");
            }).find("not a replay of this plan"),
            std::string::npos);
}

TEST(HostBackendProfile, IsAValidProfileOfThisMachine) {
  const sim::HardwareProfile hw = host_backend_profile("host-replay");
  const sim::HardwareProfile back =
      sim::parse_hardware_profile(sim::hardware_profile_to_json(hw), "round trip");
  EXPECT_EQ(back.name, "host-replay");
  EXPECT_GT(back.peak_flops("bf16"), 0);
  EXPECT_EQ(back.gpu.launch_overhead, 0);
  EXPECT_GT(back.adam_params_per_s(1), 0);
  // A compute op's predicted time is its FLOPs at the measured rate: efficiency 1 at every size.
  EXPECT_EQ(back.compute_ns(back.peak_flops("bf16"), 0.001, 0, "bf16"), 1'000'000'000);
}

}  // namespace
}  // namespace pipesim::replay
