// ZB-H1 (Zero Bubble PP): 1F1B with the backward split into B (input grad) and W (weight grad); rank r keeps
// up to r weight-gradient passes pending and runs them in its cool-down, which fills the 1F1B drain bubble:
// step = m(F+B+W) + (p-1)(F+B-W) for uniform stages, at the in-flight activation count of 1F1B plus the
// inputs of the linear layers that the pending W passes still hold.
#include <algorithm>
#include <deque>

#include "schedules/builtin.hpp"
#include "schedules/classic/classic.hpp"

namespace pipesim::sim::detail {

namespace {

std::vector<Task> zb_h1_order(const ScheduleShape& s, std::int32_t rank) {
  std::vector<Task> out;
  const std::int32_t m = s.microbatches, warm = std::min(m, s.pp - rank);
  for (std::int32_t i = 0; i < warm; ++i) out.push_back({TaskKind::kForward, i, 0});
  std::deque<std::int32_t> pending;
  for (std::int32_t i = 0, next = warm; i < m; ++i) {
    out.push_back({TaskKind::kBackwardInput, i, 0});
    pending.push_back(i);
    if (next < m) out.push_back({TaskKind::kForward, next++, 0});
    while (static_cast<std::int32_t>(pending.size()) > rank) {
      out.push_back({TaskKind::kBackwardWeight, pending.front(), 0});
      pending.pop_front();
    }
  }
  for (std::int32_t i : pending) out.push_back({TaskKind::kBackwardWeight, i, 0});
  return out;
}

}  // namespace

ScheduleDescriptor describe_zb_h1() {
  ScheduleDescriptor d = classic_descriptor(
      "zb-h1", "Zero Bubble PP, ZB-H1 (Qi et al. 2024)",
      "backward split into B (input grad) and W (weight grad); W deferred into the cool-down bubbles");
  d.constraints.push_back("m >= 1 (the closed-form bubble holds for m >= p)");
  d.order = zb_h1_order;
  d.splits_backward = true;
  return d;
}

}  // namespace pipesim::sim::detail
