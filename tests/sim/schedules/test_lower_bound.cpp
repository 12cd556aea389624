// The schedules' lower bounds, which the planner prunes with, never exceed the step time the engine
// simulates: a property over random configurations of every order-based schedule, exact in integer ns.
#include <gtest/gtest.h>

#include <random>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/schedules/schedule.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

template <class T>
T pick(std::mt19937& rng, std::initializer_list<T> from) {
  return *(from.begin() + std::uniform_int_distribution<std::size_t>(0, from.size() - 1)(rng));
}

template <class T>
T pick(std::mt19937& rng, const std::vector<T>& from) {
  return from[std::uniform_int_distribution<std::size_t>(0, from.size() - 1)(rng)];
}

TEST(LowerBound, NeverExceedsTheSimulatedStep) {
  std::mt19937 rng(20261123);
  const std::vector<std::string> schedules{"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-v", "dualpipe"};
  const std::vector<std::string> models{"llama2-7b", "qwen3-1.7b", "gpt-oss-20b"};
  const std::vector<std::string> hws{"h100-sxm-8x", "rtx4090-8x", "a100-80g-sxm-8x"};
  const std::vector<int> degrees{1, 2, 4};
  std::int64_t checked = 0, positive = 0, tight = 0;
  for (int trial = 0; trial < 180; ++trial) {
    JobOptions j = testing::job(pick(rng, models), pick(rng, hws), pick(rng, degrees), pick(rng, {1, 2}),
                                pick(rng, {1, 2}), 0);
    const std::string name = pick(rng, schedules);
    const bool two_chunks = name == "interleaved-1f1b" || name == "zb-v" || name == "dualpipe";
    j.virtual_stages = two_chunks ? 2 : 1;
    j.microbatches = j.pp * std::uniform_int_distribution<int>(1, 3)(rng) + (two_chunks ? 0 : 1);
    if (name == "dualpipe") j.microbatches = 2 * j.pp * std::uniform_int_distribution<int>(1, 2)(rng);
    j.microbatch_size = pick(rng, {1.0, 2.0});
    j.seq = pick(rng, std::vector<std::int64_t>{512, 1024, 2048});
    j.recompute = pick(rng, std::vector<std::string>{"none", "selective", "full"});
    j.attention = pick(rng, std::vector<std::string>{"flash", "unfused"});
    j.grad_sync = pick(rng, std::vector<std::string>{"overlap", "after-backward"});
    j.grad_accumulation = pick(rng, std::vector<std::string>{"fused", "main-grad"});
    j.sequence_parallel = pick(rng, {true, false});
    j.blocking_p2p = pick(rng, {true, false});
    j.accum_steps = pick(rng, {1, 2});
    j.tp_overlap = pick(rng, std::vector<std::string>{"none", "backward"});
    if (j.dp > 1) j.zero = pick(rng, {0, 1, 2, 3});
    j.cp = pick(rng, {1, 1, 2});
    if (j.cp > 1) j.attention = "flash";
    const auto& s = find_schedule(name);
    Duration bound = 0;
    Plan plan;
    try {
      ScheduleInput in = make_schedule_input(j, s);
      bound = schedule_lower_bound_ns(s, in);
      plan = build_plan(s, in);
    } catch (const InputError&) {
      continue;  // not a configuration this schedule runs
    }
    const Timeline tl = Engine{}.run(plan);
    const Metrics m = compute_metrics(plan, tl);
    ++checked;
    if (bound > 0) ++positive;
    if (bound * 10 >= m.step_span_ns * 8) ++tight;
    EXPECT_LE(bound, m.step_span_ns) << name << " " << j.model << " " << j.hw << " pp " << j.pp << " tp "
                                     << j.tp << " dp " << j.dp << " m " << j.microbatches << " trial "
                                     << trial;
  }
  EXPECT_GE(checked, 60);
  EXPECT_EQ(positive, checked) << "every order-based configuration has a bound";
  EXPECT_GE(tight * 2, checked) << "most bounds are within 20 % of the step (else nothing is pruned)";
}

TEST(LowerBound, SchedulesWithoutAProofAreNeverPruned) {
  // The offload schedules measure a steady state over several iterations: no bound, so always simulated.
  JobOptions j = testing::job("llama2-7b", "rtx4090-8x", 4, 1, 1, 8);
  for (const char* name : {"mobius", "roundpipe", "spipe"}) {
    const auto& s = find_schedule(name);
    EXPECT_EQ(schedule_lower_bound_ns(s, make_schedule_input(j, s)), 0) << name;
  }
}

}  // namespace
}  // namespace pipesim::sim
