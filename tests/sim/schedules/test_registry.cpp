// The registry is the single source of truth: a schedule registered from here (no edit anywhere else) is run
// by the library's all-schedules path, enumerated by the planner and understood by the partitioner.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "pipesim/planner/config_search.hpp"
#include "pipesim/planner/partition.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/schedules/schedule.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

/// GPipe with the backwards in reverse microbatch order: a valid schedule that holds every microbatch.
const ScheduleDescriptor& toy_schedule() {
  static const ScheduleDescriptor& toy = []() -> const ScheduleDescriptor& {
    ScheduleDescriptor d;
    d.name = "toy-reverse-gpipe";
    d.source = "test_registry.cpp";
    d.description = "all forwards, then all backwards from the last microbatch to the first";
    d.kind = ScheduleKind::kOrderBased;
    d.check = [](const ScheduleShape& s) { return s.virtual_stages == 1 ? "" : "one chunk per rank"; };
    d.order = [](const ScheduleShape& s, std::int32_t) {
      std::vector<Task> out;
      for (std::int32_t i = 0; i < s.microbatches; ++i) out.push_back({TaskKind::kForward, i, 0});
      for (std::int32_t i = s.microbatches - 1; i >= 0; --i) out.push_back({TaskKind::kBackward, i, 0});
      return out;
    };
    d.planner.stands_for_single_stage = false;
    return register_schedule(std::move(d));
  }();
  return toy;
}

JobOptions uniform_job() {
  JobOptions j;
  j.workload = PIPESIM_TEST_DATA_DIR "/uniform_workload.json";
  j.hw = "h100-sxm-8x";
  j.pp = 4;
  j.microbatches = 8;
  return j;
}

TEST(ScheduleRegistry, ARegisteredScheduleRunsWithAllTheOthers) {
  const ScheduleDescriptor& toy = toy_schedule();
  EXPECT_EQ(&find_schedule(toy.name), &toy);
  AllSchedulePlans all = plans_of_all_schedules(uniform_job());
  std::set<std::string> ran;
  for (const Plan& p : all.plans) ran.insert(p.meta.schedule);
  EXPECT_TRUE(ran.count(toy.name)) << "the all-schedules path skipped the toy";
  // Same passes as GPipe on uniform stages: the same step time.
  auto toy_run = testing::simulate(toy.name, make_schedule_input(uniform_job(), toy));
  auto gpipe_run = testing::simulate("gpipe", make_schedule_input(uniform_job(), find_schedule("gpipe")));
  EXPECT_EQ(testing::step_ns(toy_run), testing::step_ns(gpipe_run));
}

TEST(ScheduleRegistry, ThePlannerEnumeratesARegisteredSchedule) {
  const ScheduleDescriptor& toy = toy_schedule();
  planner::SearchOptions o;
  o.base.workload = PIPESIM_TEST_DATA_DIR "/uniform_workload.json";
  o.base.hw = "h100-sxm-8x";
  o.gpus = 4;
  o.global_batch = 8;
  o.top = 1000;  // keep everything simulated
  o.threads = 2;
  planner::SearchResult r = planner::search(o, nullptr);
  const bool found = std::any_of(r.ranked.begin(), r.ranked.end(),
                                 [&](const planner::Candidate& c) { return c.schedule == toy.name; });
  EXPECT_TRUE(found) << "the planner never tried the toy by default";
}

TEST(ScheduleRegistry, ThePartitionerDerivesMemoryFromTheOrder) {
  const ScheduleDescriptor& toy = toy_schedule();
  ScheduleInput in = make_schedule_input(uniform_job(), toy);
  planner::PartitionProblem p = planner::make_partition_problem(in, toy, 0.9);
  ASSERT_EQ(p.inflight.size(), 4u);
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(p.inflight[k], 8) << "every microbatch is held before the first backward";
    EXPECT_EQ(p.deferred[k], 0);
  }
  EXPECT_TRUE(planner::optimal_partition(p).feasible);
}

TEST(ScheduleRegistry, PeakStageLoadOfTheBuiltInOrders) {
  const ScheduleShape shape{4, 8, 1};
  for (std::int32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(peak_stage_load(find_schedule("gpipe"), shape, r).activations_in_flight, 8);
    EXPECT_EQ(peak_stage_load(find_schedule("1f1b"), shape, r).activations_in_flight, 4 - r);
    // ZB-H1 with m > p: rank r holds 1F1B's p - r microbatches while it owes r + 1 weight gradients.
    StageLoad zb = peak_stage_load(find_schedule("zb-h1"), shape, r);
    EXPECT_EQ(zb.activations_in_flight, 4 - r) << r;
    EXPECT_EQ(zb.deferred_weight_grads, r + 1) << r;
  }
}

TEST(ScheduleRegistry, RejectsIncompleteOrDuplicateDescriptors) {
  ScheduleDescriptor d;
  d.name = "gpipe";
  d.check = [](const ScheduleShape&) { return std::string(); };
  d.order = [](const ScheduleShape&, std::int32_t) { return std::vector<Task>{}; };
  EXPECT_THROW(register_schedule(d), std::invalid_argument);  // taken
  d.name = "no-order";
  d.order = nullptr;
  EXPECT_THROW(register_schedule(d), std::invalid_argument);
  d.name = "all";
  EXPECT_THROW(register_schedule(d), std::invalid_argument);
  d.name = "whole-plan-without-build";
  d.kind = ScheduleKind::kWholePlan;
  EXPECT_THROW(register_schedule(d), std::invalid_argument);
}

TEST(ScheduleParameters, ParseAndRangeCheckNameTheFlag) {
  const ScheduleDescriptor& spipe = find_schedule("spipe");
  auto param = [&](const std::string& name) {
    for (const auto& p : spipe.parameters)
      if (p.name == name) return p;
    throw std::logic_error("no parameter " + name);
  };
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(parse_parameter(param("stages"), "3,9")),
            (std::vector<std::int64_t>{3, 9}));
  EXPECT_EQ(testing::error_of([&] {
              parse_parameter(param("stages"), "2");
            }).rfind("spipe_stages: expected F,B", 0),
            0u);
  EXPECT_NE(testing::error_of([&] { parse_parameter(param("stages"), "0,6"); }), "no error");
  EXPECT_EQ(std::get<double>(parse_parameter(param("overflow_prob"), "0.25")), 0.25);
  EXPECT_NE(testing::error_of([&] { parse_parameter(param("overflow_prob"), "2"); }).find("valid: 0 .. 1"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { parse_parameter(param("overflow_prob"), "nan"); }), "no error");
  EXPECT_NE(testing::error_of([&] { parse_parameter(param("overflow_prob"), "0.5x"); }), "no error");
  // Every given flag is checked against the registry, whatever the schedule.
  JobOptions j;
  j.schedule_options["no_such_flag"] = "1";
  EXPECT_EQ(testing::error_of([&] { check_schedule_options(j); }).rfind("no_such_flag:", 0), 0u);
  j.schedule_options = {{"overflow_prob", "1.5"}};
  EXPECT_EQ(testing::error_of([&] { check_schedule_options(j); }).rfind("overflow_prob:", 0), 0u);
}

TEST(ScheduleParameters, DefaultsFillWhatTheJobDoesNotGive) {
  JobOptions j;
  j.model = "llama2-7b";
  j.hw = "rtx4090-8x";
  j.schedule_options["spipe_stages"] = "1,3";
  ScheduleInput in = make_schedule_input(j, find_schedule("spipe"));
  EXPECT_EQ(in.parameters.integers("stages"), (std::vector<std::int64_t>{1, 3}));
  EXPECT_FALSE(in.parameters.flag("sync_checkpoints"));
  EXPECT_EQ(in.parameters.real("overflow_prob"), 0.0);
  // A schedule ignores the flags of others.
  ScheduleInput mobius = make_schedule_input(j, find_schedule("mobius"));
  EXPECT_EQ(mobius.parameters.values().size(), 1u);
  EXPECT_FALSE(mobius.parameters.flag("cross_mapping"));
}

}  // namespace
}  // namespace pipesim::sim
