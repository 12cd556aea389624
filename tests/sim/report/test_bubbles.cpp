// Bubbles of simulated timelines against the closed forms of the classic schedules.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "pipesim/sim/report/bubbles.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

using Gaps = std::vector<std::pair<BubbleKind, Duration>>;

/// Each stage's bubbles as (kind, length), sorted.
std::vector<Gaps> gaps_by_stage(const std::string& schedule, int p, int m, Duration f, Duration b) {
  const ScheduleInput in = testing::uniform_input(p, m, f, b / 2, b - b / 2);
  const Plan plan = build_plan(find_schedule(schedule), in);
  const Timeline tl = Engine{EngineOptions{true}}.run(plan);
  std::vector<Gaps> out(static_cast<std::size_t>(p));
  for (const Bubble& bubble : find_bubbles(plan, tl))
    out[static_cast<std::size_t>(bubble.stage)].push_back({bubble.kind, bubble.length()});
  for (auto& g : out) std::sort(g.begin(), g.end());
  return out;
}

Gaps sorted(Gaps g) {
  g.erase(std::remove_if(g.begin(), g.end(), [](const auto& x) { return x.second == 0; }), g.end());
  std::sort(g.begin(), g.end());
  return g;
}

TEST(Bubbles, GpipeClosedForm) {
  // Stage s of p: s·f warm-up, (p-1-s)(f+b) between its last forward and first backward, s·b tail.
  const Duration f = 1000, b = 2400;
  for (int p : {1, 2, 4, 8})
    for (int m : {1, 3, 8}) {
      const auto gaps = gaps_by_stage("gpipe", p, m, f, b);
      for (int s = 0; s < p; ++s)
        EXPECT_EQ(gaps[static_cast<std::size_t>(s)],
                  sorted({{BubbleKind::kWarmup, s * f},
                          {BubbleKind::kForwardBackward, (p - 1 - s) * (f + b)},
                          {BubbleKind::kTail, s * b}}))
            << "p " << p << " m " << m << " stage " << s;
    }
}

TEST(Bubbles, OneFOneBClosedForm) {
  // Stage s of p with m >= p: s·f warm-up, (p-1-s)·b before its first backward, p-1-s cool-down gaps of f,
  // s·b tail.
  const Duration f = 1000, b = 2400;
  for (int p : {2, 4, 8})
    for (int m : {8, 12}) {
      const auto gaps = gaps_by_stage("1f1b", p, m, f, b);
      for (int s = 0; s < p; ++s) {
        Gaps expected = {{BubbleKind::kWarmup, s * f},
                         {BubbleKind::kForwardBackward, (p - 1 - s) * b},
                         {BubbleKind::kTail, s * b}};
        for (int k = 0; k < p - 1 - s; ++k) expected.push_back({BubbleKind::kCooldown, f});
        EXPECT_EQ(gaps[static_cast<std::size_t>(s)], sorted(expected))
            << "p " << p << " m " << m << " stage " << s;
      }
    }
}

TEST(Bubbles, MarkersBracketEveryWaitForAnotherStage) {
  // With bubble markers the plan itself shows the waits: each pair of `bubble` ops brackets one, and 1F1B's
  // stage s waits s·f + (p-1-s)·b + (p-1-s)·f in all (everything but its tail); timing is unchanged.
  const int p = 4, m = 8;
  const Duration f = 1000, b = 2400;
  ScheduleInput in = testing::uniform_input(p, m, f, b / 2, b / 2);
  const Duration plain = testing::step_ns(testing::simulate("1f1b", in));
  in.bubble_markers = true;
  const auto r = testing::simulate("1f1b", in);
  EXPECT_EQ(testing::step_ns(r), plain);
  std::vector<Duration> waited(p, 0);
  std::vector<TimePoint> opened(p, -1);
  for (std::size_t i = 0; i < r.plan.ops.size(); ++i) {
    const Op& op = r.plan.ops[i];
    if (op.kind != OpKind::kBubble) continue;
    auto& open = opened[static_cast<std::size_t>(op.tags.stage)];
    if (open < 0) {
      open = r.timeline.end[i];
    } else {
      waited[static_cast<std::size_t>(op.tags.stage)] += r.timeline.start[i] - open;
      open = -1;
    }
  }
  for (int s = 0; s < p; ++s)
    EXPECT_EQ(waited[static_cast<std::size_t>(s)], s * f + (p - 1 - s) * b + (p - 1 - s) * f)
        << "stage " << s;
}

TEST(Bubbles, AddUpToTheBubbleFraction) {
  // Every idle nanosecond of every compute stream is in exactly one bubble.
  for (const char* schedule : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1"}) {
    const ScheduleInput in =
        testing::uniform_input(4, 8, 1000, 1200, 1200, std::string(schedule) == "interleaved-1f1b" ? 2 : 1);
    const Plan plan = build_plan(find_schedule(schedule), in);
    const Timeline tl = Engine{EngineOptions{true}}.run(plan);
    const Metrics m = compute_metrics(plan, tl);
    Duration idle = 0;
    for (const Bubble& bubble : find_bubbles(plan, tl)) idle += bubble.length();
    const double step = static_cast<double>(m.step_span_ns);
    EXPECT_NEAR(static_cast<double>(idle) / (4 * step), m.bubble_fraction, 1e-12) << schedule;
  }
}

TEST(Bubbles, FreeMemoryIsCapacityLessWhatIsHeld) {
  // GPipe holds every microbatch's activations between its last forward and first backward: the bubble there
  // has capacity - m x activations free; the warm-up bubble has all of it.
  ScheduleInput in = testing::uniform_input(2, 4, 1000, 1000, 1000, 1, 1'000'000'000);
  const Plan plan = build_plan(find_schedule("gpipe"), in);
  const Timeline tl = Engine{EngineOptions{true}}.run(plan);
  const std::int64_t capacity = in.hw.gpu_tensor_capacity();
  int checked = 0;
  for (const Bubble& bubble : find_bubbles(plan, tl)) {
    if (bubble.kind == BubbleKind::kForwardBackward) {
      EXPECT_EQ(bubble.free_bytes, capacity - 4'000'000'000);
      ++checked;
    } else if (bubble.kind == BubbleKind::kWarmup) {
      EXPECT_EQ(bubble.free_bytes, capacity);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2);  // stage 0's forward-backward gap, stage 1's warm-up
}

}  // namespace
}  // namespace pipesim::sim
