#include <gtest/gtest.h>

#include <map>
#include <set>

#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/report/critical_path.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

using testing::simulate;
using testing::step_ns;
using testing::uniform_input;

// Stage times in ns: forward 3 ms, backward 5 ms (not 2x, so the closed forms are tested in general).
constexpr Duration kF = 3'000'000, kB = 5'000'000;

TEST(ClassicSchedules, GpipeAnd1f1bBubbleMatchesClosedFormOnGrid) {
  for (const char* name : {"gpipe", "1f1b"}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 16; ++m) {
        auto r = simulate(name, uniform_input(p, m, kF, kB / 2, kB - kB / 2));
        // Exact integer makespan: (m + p - 1)(f + b).
        ASSERT_EQ(step_ns(r), static_cast<Duration>(m + p - 1) * (kF + kB))
            << name << " p=" << p << " m=" << m;
        EXPECT_NEAR(r.metrics.bubble_fraction, static_cast<double>(p - 1) / (m + p - 1), 1e-12)
            << name << " p=" << p << " m=" << m;
      }
    }
  }
}

TEST(ClassicSchedules, InterleavedBubbleMatchesClosedForm) {
  // Chunk times f, b; step = (v*m + p - 1)(f + b), bubble = (p-1)/(v*m + p - 1).
  for (int p = 2; p <= 6; ++p)
    for (int v = 2; v <= 4; ++v)
      for (int m = p; m <= 4 * p; m += p) {
        auto r = simulate("interleaved-1f1b", uniform_input(p, m, kF, kB / 2, kB - kB / 2, v));
        ASSERT_EQ(step_ns(r), static_cast<Duration>(v * m + p - 1) * (kF + kB))
            << "p=" << p << " v=" << v << " m=" << m;
        EXPECT_NEAR(r.metrics.bubble_fraction, static_cast<double>(p - 1) / (v * m + p - 1), 1e-12);
      }
}

TEST(ClassicSchedules, ZbH1MatchesClosedForm) {
  // Uniform F, B, W: step = m(F+B+W) + (p-1)(F+B-W) for m >= p (a third of the 1F1B bubble when F=B=W).
  const Duration f = 2'000'000;
  for (auto [b, w] :
       {std::pair<Duration, Duration>{2'000'000, 2'000'000}, {3'000'000, 1'000'000}, {2'000'000, 1'500'000}})
    for (int p = 1; p <= 6; ++p)
      for (int m = p; m <= 12; ++m) {
        auto r = simulate("zb-h1", uniform_input(p, m, f, b, w));
        ASSERT_EQ(step_ns(r),
                  static_cast<Duration>(m) * (f + b + w) + static_cast<Duration>(p - 1) * (f + b - w))
            << "p=" << p << " m=" << m << " b=" << b << " w=" << w;
      }
  auto one = simulate("1f1b", uniform_input(4, 8, f, f, f));
  auto zb = simulate("zb-h1", uniform_input(4, 8, f, f, f));
  // Bubble time (p-1)(F+B-W) = (p-1)F versus (p-1)(F+B+W) = 3(p-1)F: one third.
  EXPECT_EQ(step_ns(zb) - 8 * 3 * f, (step_ns(one) - 8 * 3 * f) / 3);
}

TEST(ClassicSchedules, ZbVReachesTheCriticalPathBound) {
  // Uniform chunk passes F = B = W = u, zero-time hops: every rank runs 2m chunks x (F + B + W) = 6m u of
  // work, and the last rank can start nothing before microbatch 0's forward has come down p - 1 chunks: no
  // schedule beats 6m u + (p-1) u. ZB-V's order reaches it exactly for m = p and every m >= 2p (and for
  // p <= 4 any m >= p); between, it stays within (p-1) u of it, never above ZB-H1's bubble on whole stages of
  // 2u passes ((p-1)(F+B-W) = 2(p-1) u; 1F1B's is 6(p-1) u).
  const Duration u = 1'000'000;
  for (int p = 2; p <= 12; ++p)
    for (int m = p; m <= 3 * p + 1; ++m) {
      const Duration bound = static_cast<Duration>(6 * m + p - 1) * u;
      const Duration step = step_ns(simulate("zb-v", uniform_input(p, m, u, u, u, 2)));
      if (p <= 4 || m == p || m >= 2 * p) {
        EXPECT_EQ(step, bound) << "p=" << p << " m=" << m;
      } else {
        EXPECT_GE(step, bound) << "p=" << p << " m=" << m;
        EXPECT_LE(step, bound + (p - 1) * u) << "p=" << p << " m=" << m;
      }
      const Duration zb_h1 = step_ns(simulate("zb-h1", uniform_input(p, m, 2 * u, 2 * u, 2 * u)));
      EXPECT_LE(step - 6 * m * u, zb_h1 - 6 * m * u) << "p=" << p << " m=" << m;
    }
  // The V: rank r holds model chunks r and 2p-1-r, so the first and the last chunk share rank 0.
  auto r = simulate("zb-v", uniform_input(4, 8, u, u, u, 2));
  std::map<int, std::set<std::int32_t>> chunks_of_rank;  // stage -> the layers (one per chunk) it runs
  for (const Op& op : r.plan.ops)
    if (op.kind == OpKind::kForward) chunks_of_rank[op.tags.stage].insert(op.tags.layer_begin);
  EXPECT_EQ(chunks_of_rank[0], (std::set<std::int32_t>{0, 7}));
  EXPECT_EQ(chunks_of_rank[3], (std::set<std::int32_t>{3, 4}));
}

TEST(ClassicSchedules, DualPipeHasItsPublishedBubble) {
  // Uniform stages, zero-time hops, the input-gradient pass as long as the forward (F = B_in) and any W:
  // DualPipe's step is M(F + B) + (pp/2 - 1)(F&B + B - 3W), B the whole backward and F&B a forward and a
  // backward paired, against 1F1B's (pp - 1)(F + B) and ZB1P's (ZB-H1) (pp - 1)(F + B - 2W) on the same
  // stages (DeepSeek-V3 technical report, Table 2).
  const Duration u = 1'000'000;
  for (Duration w : {u, u / 2, u / 4})
    for (int p = 2; p <= 8; p += 2)
      for (int m : {2 * p, 2 * p + 2, 4 * p}) {
        const Duration f = u, b = u + w;  // forward; whole backward (input gradient u, weight gradient w)
        auto in = uniform_input(p, m, f, u, w);
        in.virtual_stages = 2;  // each rank holds two stages of one block: stage r and stage p - 1 - r
        const Duration work = m * (f + b);
        EXPECT_EQ(step_ns(simulate("dualpipe", in)), work + (p / 2 - 1) * ((f + b) + b - 3 * w))
            << "p=" << p << " m=" << m << " w=" << w;
        EXPECT_EQ(step_ns(simulate("1f1b", uniform_input(p, m, f, u, w))), work + (p - 1) * (f + b));
        EXPECT_EQ(step_ns(simulate("zb-h1", uniform_input(p, m, f, u, w))), work + (p - 1) * (f + b - 2 * w));
      }
}

TEST(ClassicSchedules, DualPipeHoldsEachStageTwiceAndRunsEveryPassOnce) {
  // llama3-8b over 4 ranks: rank r runs stages r and 3 - r (blocks 8r .. 8r+7 and the mirror), so every
  // rank holds two stages' weights: twice 1F1B's in all. Each microbatch runs one copy, each pass once.
  JobOptions even = testing::job("llama3-8b", "h100-sxm-8x", 4, 1, 1, 8);
  even.partition = "8,8,8,8";  // one copy's stages (the default split evens out the output layer instead)
  const Plan dual = testing::plan_of("dualpipe", even);
  const Plan one = testing::plan_of("1f1b", testing::job("llama3-8b", "h100-sxm-8x", 4, 1, 1, 8));
  std::int64_t dual_weights = 0, one_weights = 0;
  for (const Device& d : dual.devices) dual_weights += d.resident_bytes;
  for (const Device& d : one.devices) one_weights += d.resident_bytes;
  EXPECT_EQ(dual_weights, 2 * one_weights);
  std::map<int, std::set<std::int32_t>> first_layer_of_rank;
  std::map<std::pair<int, int>, int> forwards, input_grads, weight_grads;  // (first layer, microbatch)
  for (const Op& op : dual.ops) {
    const std::pair key{op.tags.layer_begin, op.tags.microbatch};
    if (op.kind == OpKind::kForward) {
      first_layer_of_rank[op.tags.stage].insert(op.tags.layer_begin);
      ++forwards[key];
    }
    if (op.kind == OpKind::kBackward || op.kind == OpKind::kBackwardInput) ++input_grads[key];
    if (op.kind == OpKind::kBackward || op.kind == OpKind::kBackwardWeight) ++weight_grads[key];
  }
  // Layer 0 is the embedding: stage 0 holds layers 0 .. 8 (embedding + 8 blocks), stage 3 the head.
  EXPECT_EQ(first_layer_of_rank[0], (std::set<std::int32_t>{0, 25}));
  EXPECT_EQ(first_layer_of_rank[1], (std::set<std::int32_t>{9, 17}));
  EXPECT_EQ(forwards.size(), 4u * 8u);
  for (const auto* passes : {&forwards, &input_grads, &weight_grads}) {
    EXPECT_EQ(passes->size(), 4u * 8u);
    for (const auto& [key, n] : *passes) EXPECT_EQ(n, 1) << key.first << " mb " << key.second;
  }
}

TEST(ClassicSchedules, ZbVHoldsNoMoreActivationsThan1f1b) {
  // Chunks of half a stage: at most 2p chunk activations in flight per rank, 1F1B's p whole stages.
  const std::int64_t act = 1'000'000;
  for (int p : {2, 4, 8})
    for (int m : {p, 2 * p}) {
      auto one = simulate("1f1b", uniform_input(p, m, 2 * kF, kB, kB, 1, 2 * act));
      auto v = simulate("zb-v", uniform_input(p, m, kF, kB / 2, kB / 2, 2, act));
      EXPECT_LE(v.metrics.peak_gpu_mem_bytes, one.metrics.peak_gpu_mem_bytes) << "p=" << p << " m=" << m;
    }
}

TEST(ClassicSchedules, PeakActivationsPerRank) {
  const std::int64_t act = 1'000'000;
  for (int p : {2, 4, 8})
    for (int m : {1, 3, 8, 16}) {
      auto one = simulate("1f1b", uniform_input(p, m, kF, kB / 2, kB / 2, 1, act));
      auto gp = simulate("gpipe", uniform_input(p, m, kF, kB / 2, kB / 2, 1, act));
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(one.metrics.gpus[static_cast<std::size_t>(r)].peak_mem_bytes, std::min(m, p - r) * act)
            << "1f1b p=" << p << " m=" << m << " rank " << r;
        EXPECT_EQ(gp.metrics.gpus[static_cast<std::size_t>(r)].peak_mem_bytes, m * act) << "gpipe rank " << r;
      }
    }
}

TEST(ClassicSchedules, StepGradientsLiveFromTheFirstBackwardToTheOptimizerStep) {
  // One block of 1,600 B of parameter state, of which 400 B are gradients zero_grad(set_to_none=True) frees;
  // 1,000 B of activations a microbatch and 300 B its backward works in. With one microbatch the gradients
  // come as the activations go: 1,200 + 1,000 + 300 at the backward's start. With two, the first backward's
  // gradients stay beside the second microbatch's activations: 1,200 + 400 + 1,000 + 300. Gradients kept
  // between steps are always there: 1,600 + 1,000 + 300.
  for (int m : {1, 2})
    for (std::int64_t grads : {400, 0}) {
      ScheduleInput in = uniform_input(1, m, kF, kB / 2, kB / 2, 1, 1000);
      in.costs[0][0].param_bytes = 1600;
      in.costs[0][0].step_grad_bytes = grads;
      in.costs[0][0].recompute_extra_bytes = 300;
      const std::int64_t expected = grads == 0 ? 2900 : m == 1 ? 2500 : 2900;
      const auto r = simulate("1f1b", in);
      EXPECT_EQ(r.metrics.gpus[0].peak_mem_bytes, expected) << "m=" << m << " grads=" << grads;
      EXPECT_EQ(r.plan.devices[0].resident_bytes, 1600 - grads);
    }
}

TEST(ClassicSchedules, EveryPassRunsOnceInDependencyOrder) {
  for (const char* name : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-v"}) {
    const ScheduleDescriptor& s = find_schedule(name);
    const int v = s.default_virtual_stages;
    auto r = simulate(name, uniform_input(4, 8, kF, kB / 2, kB / 2, v));
    std::map<std::tuple<int, int, int>, int> count;  // (kind, chunk layer, microbatch)
    std::map<std::pair<int, int>, TimePoint> fwd_end, bwd_start;
    for (std::size_t i = 0; i < r.plan.ops.size(); ++i) {
      const Op& op = r.plan.ops[i];
      if (op.kind == OpKind::kP2P || op.kind == OpKind::kOptimizer) continue;
      ++count[{static_cast<int>(op.kind), op.tags.layer_begin, op.tags.microbatch}];
      if (op.kind == OpKind::kForward) fwd_end[{op.tags.layer_begin, op.tags.microbatch}] = r.timeline.end[i];
      if (op.kind == OpKind::kBackward || op.kind == OpKind::kBackwardInput)
        bwd_start[{op.tags.layer_begin, op.tags.microbatch}] = r.timeline.start[i];
    }
    for (const auto& [key, c] : count) EXPECT_EQ(c, 1) << name;
    const int layers = 4 * v;
    const bool split = s.splits_backward;
    EXPECT_EQ(count.size(), static_cast<std::size_t>(layers * 8 * (split ? 3 : 2))) << name;
    for (int mb = 0; mb < 8; ++mb)
      for (int l = 0; l < layers; ++l) {
        if (l > 0) {
          EXPECT_GE(fwd_end.at({l, mb}), fwd_end.at({l - 1, mb})) << name;
        }
        EXPECT_GE(bwd_start.at({l, mb}), fwd_end.at({layers - 1, mb})) << name;
        if (l + 1 < layers) {
          EXPECT_GE(bwd_start.at({l, mb}), bwd_start.at({l + 1, mb})) << name;
        }
      }
  }
}

TEST(ClassicSchedules, DeterministicPlansAndTimelines) {
  for (const auto& s : schedule_registry()) {
    if (s.kind == ScheduleKind::kWholePlan) continue;  // offload schedules: see test_offload_schedules.cpp
    auto in = uniform_input(4, 8, kF, kB / 2, kB / 2, s.default_virtual_stages, 1000);
    auto a = simulate(s.name, in);
    auto b = simulate(s.name, in);
    EXPECT_EQ(plan_to_json(a.plan), plan_to_json(b.plan)) << s.name;
    EXPECT_EQ(a.timeline.start, b.timeline.start) << s.name;
    EXPECT_EQ(a.timeline.end, b.timeline.end) << s.name;
  }
}

TEST(ClassicSchedules, RejectsShapesTheyCannotRun) {
  EXPECT_THROW(simulate("interleaved-1f1b", uniform_input(4, 6, kF, kB, kB, 2)), InputError);  // m % p != 0
  EXPECT_THROW(simulate("1f1b", uniform_input(4, 8, kF, kB, kB, 2)), InputError);              // v != 1
  EXPECT_THROW(find_schedule("2f2b"), InputError);
}

}  // namespace
}  // namespace pipesim::sim
