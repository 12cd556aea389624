// DualPipe (DeepSeek-AI, DeepSeek-V3 technical report, 2024): a bidirectional pipeline. The model is split
// into pp stages held twice: rank r runs stage r for the first half of the microbatches, which enter at rank
// 0, and stage pp - 1 - r for the second half, which enter at rank pp - 1 (ChunkPlacement::kDual: twice the
// parameter memory). Each rank's order follows the published schedule's eight steps: forwards of its own
// direction, then of both, zero-bubble backwards (B now, W later) while the pipelines fill, the main phase of
// a forward of one direction paired with a full backward of the other (the pair starts when both inputs are
// there, as one overlapped kernel stream; its communication is what DualPipe hides, its compute still adds
// up), and the drain, where deferred weight
// gradients fill the gaps. Its bubble for uniform stages is (pp/2 - 1)(F&B + B - 3W).
#include <algorithm>
#include <deque>

#include "schedules/builtin.hpp"
#include "schedules/classic/classic.hpp"

#include "pipesim/sim/core/option.hpp"

namespace pipesim::sim::detail {

namespace {

std::string check_dualpipe(const ScheduleShape& s) {
  if (s.pp < 2 || s.pp % 2 != 0) return "runs two pipelines in opposite directions; pp must be even";
  if (s.virtual_stages != 2)
    return ("holds two copies of each stage, one per direction; " + spelled(Option{"virtual_stages"}) +
            " must be 2");
  if (s.microbatches % 2 != 0 || s.microbatches < 2 * s.pp)
    return "sends half of the microbatches each way; microbatches must be even and at least 2 x pp";
  return "";
}

/// The tasks of `rank`: its local chunk 0 runs the first copy (microbatches 0 .. M/2 - 1, entering at rank
/// 0), local chunk 1 the second (M/2 .. M - 1, entering at rank pp - 1). The published schedule names them
/// phases, swapped on the second half of the ranks so that every rank starts with the direction that
/// reaches it first.
std::vector<Task> dualpipe_order(const ScheduleShape& s, std::int32_t rank) {
  const std::int32_t half_ranks = s.pp / 2, half_rank = std::min(rank, s.pp - 1 - rank);
  const std::int32_t half_chunks = s.microbatches / 2;
  const std::int32_t swap = rank >= half_ranks ? 1 : 0;
  std::int32_t next_f[2] = {0, 0}, next_b[2] = {0, 0};
  std::deque<Task> deferred;  // weight gradients of the zero-bubble backwards, oldest first
  std::vector<Task> out;
  auto microbatch = [&](std::int32_t copy, std::int32_t k) { return copy == 0 ? k : half_chunks + k; };
  auto forward = [&](std::int32_t phase) {
    const std::int32_t copy = phase ^ swap;
    out.push_back({TaskKind::kForward, microbatch(copy, next_f[copy]++), copy});
  };
  auto backward = [&](std::int32_t phase, bool zero_bubble) {
    const std::int32_t copy = phase ^ swap;
    const std::int32_t i = microbatch(copy, next_b[copy]++);
    if (!zero_bubble) {
      out.push_back({TaskKind::kBackward, i, copy});
      return;
    }
    out.push_back({TaskKind::kBackwardInput, i, copy});
    deferred.push_back({TaskKind::kBackwardWeight, i, copy});
  };
  auto weight = [&] {
    out.push_back(deferred.front());
    deferred.pop_front();
  };
  auto forward_backward = [&](std::int32_t f, std::int32_t b) {  // overlapped: both inputs, then both passes
    forward(f);
    out.back().paired_with_next = true;
    backward(b, false);
  };
  const std::int32_t outer = half_ranks - half_rank - 1;    // steps the ranks nearer the ends run longer
  for (std::int32_t i = 0; i < 2 * outer; ++i) forward(0);  // 1: its own direction
  for (std::int32_t i = 0; i <= half_rank; ++i) {           // 2: both
    forward(0);
    forward(1);
  }
  for (std::int32_t i = 0; i < outer; ++i) {  // 3: zero-bubble backward, its weights, a forward
    backward(1, true);
    weight();
    forward(1);
  }
  const bool middle = half_rank == half_ranks - 1;
  for (std::int32_t i = 0; i < half_chunks - s.pp + half_rank + 1; ++i) {  // 4: the main phase
    if (i == 0 && middle) {  // the two middle ranks run their first pair apart: a shorter bubble
      forward(0);
      backward(1, false);
    } else {
      forward_backward(0, 1);
    }
    forward_backward(1, 0);
  }
  for (std::int32_t i = 0; i < outer; ++i) {  // 5
    backward(1, false);
    forward_backward(1, 0);
  }
  const std::int32_t drain = half_rank + 1;  // 6: both backwards, the later half zero-bubble
  bool zero_bubble = false;
  for (std::int32_t i = 0; i < drain; ++i) {
    if (i == drain / 2 && half_rank % 2 == 1) zero_bubble = true;
    backward(1, zero_bubble);
    if (i == drain / 2 && half_rank % 2 == 0) zero_bubble = true;
    backward(0, zero_bubble);
  }
  for (std::int32_t i = 0; i < outer; ++i) {  // 7: a deferred weight gradient, a zero-bubble backward
    weight();
    backward(0, true);
  }
  while (!deferred.empty()) weight();  // 8: the rest of the weight gradients
  return out;
}

}  // namespace

ScheduleDescriptor describe_dualpipe() {
  ScheduleDescriptor d = named_descriptor(
      "dualpipe", "DualPipe (DeepSeek-AI 2024, DeepSeek-V3 technical report)",
      "two pipelines in opposite directions over the same ranks, each stage held twice; forward and "
      "backward of the two directions paired, weight gradients deferred into the drain",
      ScheduleKind::kOrderBased);
  d.check = check_dualpipe;
  d.constraints = {"pp even",
                   ("two copies of each stage per rank (" + spelled(Option{"virtual_stages"}) + " 2)"),
                   "microbatches even and at least 2 x pp"};
  place_two_chunks_per_rank(d, ChunkPlacement::kDual);
  d.order = dualpipe_order;
  return d;
}

}  // namespace pipesim::sim::detail
