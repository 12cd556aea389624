// The timeline and Chrome trace writers: every op appears once with its simulated start and end, one
// process per device, one thread per stream, a flow arrow per p2p transfer.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "pipesim/sim/report/trace.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

testing::RunResult small_run() {
  ScheduleInput in = testing::uniform_input(3, 4, 1'000'000, 500'000, 500'000, 1, 1000);
  in.p2p_fixed_ns = 250'000;
  return testing::simulate("1f1b", in);
}

TEST(Trace, TimelineHoldsEveryOpWithItsTimes) {
  auto r = small_run();
  std::ostringstream out;
  write_timeline(out, r.plan, r.timeline, r.metrics);
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["format"], "pipesim-timeline");
  EXPECT_EQ(j["version"], 1);
  ASSERT_EQ(j["ops"].size(), r.plan.ops.size());
  for (std::size_t i = 0; i < r.plan.ops.size(); ++i) {
    EXPECT_EQ(j["ops"][i]["op"], i);
    EXPECT_EQ(j["ops"][i]["start_ns"], r.timeline.start[i]);
    EXPECT_EQ(j["ops"][i]["end_ns"], r.timeline.end[i]);
  }
  EXPECT_EQ(j["metrics"]["schedule"], "1f1b");
  EXPECT_DOUBLE_EQ(j["metrics"]["step_time_s"].get<double>(), r.metrics.step_time_s);
}

TEST(Trace, ChromeTraceHasProcessesThreadsSlicesAndFlows) {
  auto r = small_run();
  r.timeline = Engine(EngineOptions{true}).run(r.plan);  // with memory samples for the counters
  std::ostringstream out;
  write_chrome_trace(out, r.plan, r.timeline);
  const auto j = nlohmann::json::parse(out.str());
  const auto& events = j.is_array() ? j : j["traceEvents"];
  std::map<std::string, std::size_t> by_phase;
  std::size_t processes = 0, threads = 0;
  for (const auto& e : events) {
    ++by_phase[e["ph"].get<std::string>()];
    if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
    if (e["ph"] == "M" && e["name"] == "thread_name") ++threads;
  }
  std::size_t p2p = 0, timed = 0;
  for (std::size_t i = 0; i < r.plan.ops.size(); ++i) {
    p2p += r.plan.ops[i].kind == OpKind::kP2P ? 1 : 0;
    timed += r.timeline.end[i] > r.timeline.start[i] ? 1 : 0;
  }
  EXPECT_EQ(processes, r.plan.devices.size());
  EXPECT_EQ(threads, r.plan.streams.size());
  EXPECT_GE(by_phase["X"], timed);  // every op that takes time is a slice
  EXPECT_LE(by_phase["X"], r.plan.ops.size());
  EXPECT_EQ(by_phase["s"], p2p);  // 2 (p - 1) m = 16 transfers, each a flow start and end
  EXPECT_EQ(by_phase["f"], p2p);
  EXPECT_EQ(p2p, 16u);
  EXPECT_GT(by_phase["C"], 0u);  // memory counters
}

}  // namespace
}  // namespace pipesim::sim
