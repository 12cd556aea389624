// The invariants every result is held to: every schedule's fresh results hold them, and each check fires on
// a result doctored to break it (the CLI's exit code 3 is tested in tests/cli/test_invariants.py).
#include <gtest/gtest.h>

#include <cmath>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/report/bubbles.hpp"
#include "pipesim/sim/report/invariants.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

/// The invariant a call breaks, or "" when it holds them all.
template <typename F>
std::string broken(F&& f) {
  try {
    f();
  } catch (const InvariantError& e) {
    return e.invariant();
  }
  return "";
}

TEST(Invariants, EveryScheduleHoldsThemOnAUniformJob) {
  const ScheduleInput in = testing::uniform_input(4, 8, 1000, 1200, 1200);
  for (const ScheduleDescriptor& s : schedule_registry()) {
    Plan plan;
    try {
      plan = build_plan(s, in);
    } catch (const InputError&) {
      continue;  // this schedule takes a whole job, not a uniform layer list
    }
    const Timeline tl = Engine{EngineOptions{true}}.run(plan);
    const Metrics m = compute_metrics(plan, tl);
    EXPECT_EQ(broken([&] { check_run(plan, tl, m); }), "") << s.name;
    EXPECT_EQ(broken([&] { check_bubbles(plan, find_bubbles(plan, tl), m); }), "") << s.name;
  }
}

TEST(Invariants, EachCheckOfARunFiresOnItsDoctoredResult) {
  const ScheduleInput in = testing::uniform_input(4, 8, 1000, 1200, 1200);
  const Plan plan = build_plan(find_schedule("1f1b"), in);
  const Timeline tl = Engine{EngineOptions{true}}.run(plan);
  const Metrics m = compute_metrics(plan, tl);
  auto with = [&](auto change) {
    Metrics d = m;
    change(d);
    return broken([&] { check_run(plan, tl, d); });
  };
  EXPECT_EQ(with([](Metrics& d) { d.mfu = d.hfu + 0.1; }), "mfu-le-hfu");
  EXPECT_EQ(with([](Metrics& d) { d.mfu = d.hfu = 441; }), "hfu-le-1");
  EXPECT_EQ(with([](Metrics& d) { d.bubble_fraction = 1.01; }), "bubble-in-range");
  EXPECT_EQ(with([](Metrics& d) { d.bubble_drain_fraction += 0.1; }), "bubble-parts-sum");
  EXPECT_EQ(with([](Metrics& d) { d.time.other += 0.1; }), "time-shares-sum-to-1");
  EXPECT_EQ(with([](Metrics& d) { d.tokens_per_s *= 1.01; }), "tokens-per-step");
  EXPECT_EQ(with([](Metrics& d) { d.step_time_s = std::nan(""); }), "finite");
  auto timeline_with = [&](auto change) {
    Timeline d = tl;
    change(d);
    return broken([&] { check_run(plan, d, m); });
  };
  EXPECT_EQ(timeline_with([](Timeline& d) { d.end.back() = d.start.back() - 1; }), "op-times");
  EXPECT_EQ(timeline_with([](Timeline& d) { d.start.back() = 0; }), "step-covers-critical-path");
  EXPECT_EQ(timeline_with([&](Timeline& d) { d.peak_bytes[0] = d.capacity_bytes[0] + 1; }), "oom-reported");
}

TEST(Invariants, BubblesMoreThanAGpusIdleTimeAreCaught) {
  const ScheduleInput in = testing::uniform_input(4, 8, 1000, 1200, 1200);
  const Plan plan = build_plan(find_schedule("gpipe"), in);
  const Timeline tl = Engine{EngineOptions{true}}.run(plan);
  const Metrics m = compute_metrics(plan, tl);
  std::vector<Bubble> bubbles = find_bubbles(plan, tl);
  ASSERT_FALSE(bubbles.empty());
  bubbles.push_back(bubbles.front());  // the same wait counted twice
  EXPECT_EQ(broken([&] { check_bubbles(plan, bubbles, m); }), "bubbles-within-idle");
}

}  // namespace
}  // namespace pipesim::sim
