// Fill jobs in pipeline bubbles: placement invariants, exact filling, policies, the slowdown guard, loading.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "pipesim/sim/fill/fill.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

FillJob measured(const std::string& name, Duration unit_ns, std::int64_t units, double unit_flops = 1e9) {
  FillJob j;
  j.name = name;
  j.unit_ns = unit_ns;
  j.units = units;
  j.unit_flops = unit_flops;
  return j;
}

Timeline run_with_memory(const Plan& plan) {
  return Engine{EngineOptions{true}}.run(plan);
}

TEST(Fill, FillsEveryUsableNanosecondWhenSwitchesAreFreeAndWorkDivides) {
  // 1F1B, 4 stages, f = 1000, b = 2400 ns: every bubble is a multiple of 200 ns. A job of 200-ns units with
  // no state and free switches fills all of them exactly, and the main job does not move.
  for (const char* schedule : {"gpipe", "1f1b", "zb-h1"}) {
    const ScheduleInput in = testing::uniform_input(4, 8, 1000, 1200, 1200);
    const Plan plan = build_plan(find_schedule(schedule), in);
    const Timeline tl = run_with_memory(plan);
    Duration idle = 0;
    for (const Bubble& b : find_bubbles(plan, tl)) idle += b.length();
    FillOptions o;
    o.switch_overhead_ns = 0;
    const FillRun run = simulate_with_fill(plan, tl, {measured("tiny", 200, 1'000'000)}, o, 0.0);
    EXPECT_EQ(run.main_slowdown, 0) << schedule;
    Duration filled = 0;
    for (OpId id : run.outcome.fill_ops)
      filled +=
          run.timeline.end[static_cast<std::size_t>(id)] - run.timeline.start[static_cast<std::size_t>(id)];
    EXPECT_EQ(filled, idle) << schedule;
    EXPECT_EQ(run.outcome.jobs[0].units_done * 200, idle) << schedule;
  }
}

TEST(Fill, NeverRunsBesideMainComputeOnItsGpu) {
  // Every schedule, model-priced fill jobs with context switches: no fill chunk overlaps a main-job op on the
  // compute stream of its GPU.
  JobOptions j = testing::job("qwen3-1.7b", "rtx4090-8x", 4, 1, 2, 8);
  j.recompute = "full";
  for (const ScheduleDescriptor& s : schedule_registry()) {
    JobOptions job = j;
    if (s.kind == ScheduleKind::kWholePlan) job = testing::job("qwen3-1.7b", "rtx4090-8x", 8, 1, 1, 16);
    Plan plan;
    try {
      plan = build_plan(s, make_schedule_input(job, s));
    } catch (const InputError&) {
      continue;  // this schedule cannot run the job
    }
    const Timeline tl = run_with_memory(plan);
    const auto jobs = load_fill_jobs("qwen3-1.7b-inference,qwen3-1.7b-finetune", plan.hw, plan.meta.dtype);
    const FillRun run = simulate_with_fill(plan, tl, jobs, FillOptions{}, 10.0);
    ASSERT_FALSE(run.outcome.fill_ops.empty()) << s.name;
    for (OpId f : run.outcome.fill_ops) {
      const DeviceId gpu =
          run.plan.streams[static_cast<std::size_t>(run.plan.ops[static_cast<std::size_t>(f)].stream)].device;
      const TimePoint a = run.timeline.start[static_cast<std::size_t>(f)],
                      b = run.timeline.end[static_cast<std::size_t>(f)];
      for (std::size_t i = 0; i < run.plan.ops.size(); ++i) {
        const Stream& st = run.plan.streams[static_cast<std::size_t>(run.plan.ops[i].stream)];
        if (st.device != gpu || st.kind != StreamKind::kCompute) continue;
        const bool overlap = run.timeline.start[i] < b && a < run.timeline.end[i] &&
                             run.timeline.end[i] > run.timeline.start[i];
        EXPECT_FALSE(overlap) << s.name << ": fill op " << f << " overlaps main op " << i;
      }
    }
  }
}

TEST(Fill, SlowdownStaysUnderTheLimit) {
  // Training fill jobs move their state over PCIe, which the main job's pipeline traffic also crosses on a
  // GeForce box: whatever the limit, the kept run is within it.
  JobOptions j = testing::job("qwen3-1.7b", "rtx4090-8x", 8, 1, 1, 16);
  const Plan plan = testing::plan_of("1f1b", j);
  const Timeline tl = run_with_memory(plan);
  const auto jobs = load_fill_jobs("qwen3-1.7b-finetune", plan.hw, plan.meta.dtype);
  for (double limit : {0.0, 0.001, 0.01, 0.05}) {
    const FillRun run = simulate_with_fill(plan, tl, jobs, FillOptions{}, limit);
    EXPECT_LE(run.main_slowdown, limit);
    EXPECT_GE(run.main_slowdown, 0);
  }
}

TEST(Fill, AsynchronousStepIsTheMainJobsNotTheFillsIterations) {
  // RoundPipe over 32 GPUs leaves most of them idle after their few stages: a fill chunk in such a GPU's
  // last bubble carries that bubble's iteration and runs on to the end of the run. The steady-state step is
  // the main job's; counting fill chunks as iteration ends once made it 0.05 ms instead of 0.26 s.
  JobOptions j = testing::job("qwen3-1.7b", "h100-sxm-8x", 32, 1, 1, 33);
  j.recompute = "full";
  j.explicit_replicas = true;
  const Plan plan = testing::plan_of("roundpipe", j);
  const Timeline tl = run_with_memory(plan);
  const Metrics without = compute_metrics(plan, tl);
  ASSERT_GT(without.iterations, 1);
  const auto jobs = load_fill_jobs("bert-large-inference", plan.hw, plan.meta.dtype);
  const FillRun run = simulate_with_fill(plan, tl, jobs, FillOptions{}, 0.05);
  ASSERT_FALSE(run.outcome.fill_ops.empty());
  const Metrics with = compute_metrics(run.plan, run.timeline);
  EXPECT_LE(with.step_time_s, without.step_time_s * 1.05);
  EXPECT_GE(with.step_time_s, without.step_time_s);
  EXPECT_LE(with.mfu, without.mfu);
  EXPECT_LE(run.main_slowdown, 0.05);
}

TEST(Fill, SmallerBatchesFillWhatTheJobsOwnUnitDoesNot) {
  // The job's own unit (batch 8) is longer than every bubble; at batch 1 a unit takes 200 ns, which divides
  // every bubble: with free switches the smaller batch fills all the idle time, 1/8 of a unit per 200 ns.
  const ScheduleInput in = testing::uniform_input(4, 8, 1000, 1200, 1200);
  const Plan plan = build_plan(find_schedule("1f1b"), in);
  const Timeline tl = run_with_memory(plan);
  Duration idle = 0;
  for (const Bubble& b : find_bubbles(plan, tl)) idle += b.length();
  FillJob job = measured("batched", 1'000'000'000, 1'000'000, 8e9);
  job.batch = 8;
  FillOptions o;
  o.switch_overhead_ns = 0;
  EXPECT_FALSE(simulate_with_fill(plan, tl, {job}, o, 0.0).outcome.jobs[0].fits);
  job.smaller = {{4, 1'000'000'000, 4e9, 0}, {1, 200, 1e9, 0}};
  const FillRun run = simulate_with_fill(plan, tl, {job}, o, 0.0);
  const FillJobOutcome& done = run.outcome.jobs[0];
  EXPECT_TRUE(done.fits);
  EXPECT_EQ(done.smaller_batch_chunks, done.chunks);
  EXPECT_EQ(done.units_done, idle / 200 / 8);
  EXPECT_DOUBLE_EQ(run.outcome.fill_flops, static_cast<double>(idle / 200) * 1e9);
  EXPECT_EQ(run.main_slowdown, 0);
  // A bubble without memory for the own unit takes the smaller one that fits.
  FillJob heavy = measured("heavy", 200, 1'000'000, 8e9);
  heavy.batch = 8;
  heavy.unit_memory_bytes = std::int64_t{1} << 45;
  heavy.smaller = {{1, 200, 1e9, 0}};
  EXPECT_EQ(simulate_with_fill(plan, tl, {heavy}, o, 0.0).outcome.jobs[0].units_done, idle / 200 / 8);
}

TEST(Fill, PoliciesPickTheirJobFirst) {
  const ScheduleInput in = testing::uniform_input(4, 8, 1'000'000, 1'200'000, 1'200'000);
  const Plan plan = build_plan(find_schedule("gpipe"), in);
  const Timeline tl = run_with_memory(plan);
  FillJob slow_long = measured("long-inefficient", 100'000, 1'000'000, 1e9);
  FillJob fast_short = measured("short-efficient", 100'000, 10, 5e9);
  fast_short.deadline_s = 1;
  auto first_chunk_job = [&](FillPolicy p) {
    FillOptions o;
    o.policy = p;
    Plan copy = plan;
    const FillOutcome out = add_fill_jobs(copy, tl, {slow_long, fast_short}, o);
    return copy.ops[static_cast<std::size_t>(out.fill_ops.front())].tags.microbatch;  // the job's index
  };
  EXPECT_EQ(first_chunk_job(FillPolicy::kFifo), 0);  // both arrive at 0: list order
  EXPECT_EQ(first_chunk_job(FillPolicy::kShortestJobFirst), 1);
  EXPECT_EQ(first_chunk_job(FillPolicy::kMaxEfficiency), 1);
  EXPECT_EQ(first_chunk_job(FillPolicy::kDeadline), 1);
}

TEST(Fill, AJobThatFitsNoBubbleIsReportedNotAnError) {
  const ScheduleInput in = testing::uniform_input(4, 8, 1000, 1200, 1200);
  const Plan plan = build_plan(find_schedule("1f1b"), in);
  const Timeline tl = run_with_memory(plan);
  FillJob huge = measured("huge-state", 100, 10);
  huge.state_bytes = std::int64_t{1} << 45;  // more than any GPU's memory
  const FillRun run = simulate_with_fill(plan, tl, {huge}, FillOptions{}, 0.05);
  EXPECT_FALSE(run.outcome.jobs[0].fits);
  EXPECT_EQ(run.outcome.jobs[0].units_done, 0);
}

TEST(Fill, LoaderIsStrict) {
  const auto hw = load_hardware_profile("h100-sxm-8x");
  const auto path = (std::filesystem::temp_directory_path() / "pipesim-fill-test.json").string();
  auto error_for = [&](const std::string& text) {
    std::ofstream(path) << text;
    return testing::error_of([&] { load_fill_jobs(path, hw, "bf16"); });
  };
  EXPECT_NE(error_for(R"({"name": "x", "unit_ms": 1, "units": 10, "colour": 1})").find("/colour"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"name": "x", "unit_ms": 1})").find("/units"), std::string::npos);
  EXPECT_NE(error_for(R"({"name": "x", "unit_ms": -1, "units": 10})").find("/unit_ms"), std::string::npos);
  EXPECT_NE(error_for(R"([{"model": "nosuch", "samples": 10}])").find("nosuch"), std::string::npos);
  EXPECT_NE(error_for(R"({"model": "qwen3-1.7b", "mode": "serving", "samples": 10})").find("/mode"),
            std::string::npos);
  EXPECT_NE(
      error_for(R"({"model": "qwen3-1.7b", "batch": 4, "min_batch": 8, "samples": 10})").find("/min_batch"),
      std::string::npos);
  std::filesystem::remove(path);
  EXPECT_NE(testing::error_of([&] { load_fill_jobs("nosuch-job", hw, "bf16"); }).find("nosuch-job"),
            std::string::npos);
  // Model-priced: Qwen3-1.7B inference, one block over a batch of 8 x 512 per unit.
  const auto jobs = load_fill_jobs("qwen3-1.7b-inference", hw, "bf16");
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].units, 100000 / 8 * 28);
  EXPECT_EQ(jobs[0].batch, 8);
  ASSERT_EQ(jobs[0].smaller.size(), 3u);  // batches 4, 2, 1: shorter units, less working memory
  for (std::size_t k = 0; k < 3; ++k) {
    const FillShape& bigger =
        k == 0 ? FillShape{8, jobs[0].unit_ns, jobs[0].unit_flops, jobs[0].unit_memory_bytes}
               : jobs[0].smaller[k - 1];
    EXPECT_EQ(jobs[0].smaller[k].batch, bigger.batch / 2);
    EXPECT_LT(jobs[0].smaller[k].unit_ns, bigger.unit_ns);
    EXPECT_DOUBLE_EQ(jobs[0].smaller[k].unit_flops * 2, bigger.unit_flops);
    EXPECT_EQ(jobs[0].smaller[k].unit_memory_bytes * 2, bigger.unit_memory_bytes);
  }
  EXPECT_GT(jobs[0].unit_ns, 0);
  EXPECT_FALSE(jobs[0].writes_back);
}

TEST(Fill, SymmetricAndExplicitReplicasAgree) {
  // Fill work that moves no state over PCIe: one simulated replica stands for all exactly. (Jobs with state
  // contend on the node's shared PCIe links with the other replicas' switches, so simulate --fill-jobs runs
  // every GPU explicitly.)
  JobOptions j = testing::job("qwen3-1.7b", "h100-sxm-8x", 4, 2, 2, 8);
  const auto run = [&](bool explicit_replicas) {
    j.explicit_replicas = explicit_replicas;
    const Plan plan = testing::plan_of("1f1b", j);
    const Timeline tl = run_with_memory(plan);
    return simulate_with_fill(plan, tl, {measured("stateless", 50'000, 100'000)}, FillOptions{}, 0.05);
  };
  const FillRun a = run(false), b = run(true);
  EXPECT_DOUBLE_EQ(a.main_slowdown, b.main_slowdown);
  EXPECT_NEAR(a.fill_gpu_equivalents, b.fill_gpu_equivalents, 1e-9 * a.fill_gpu_equivalents);
  EXPECT_DOUBLE_EQ(a.fill_tflops_per_gpu, b.fill_tflops_per_gpu);
}

}  // namespace
}  // namespace pipesim::sim
