// 1F1B (PipeDream-flush; PyTorch Schedule1F1B order): min(m, p-rank) warm-up forwards, then one backward and
// one forward in turn, then the remaining backwards; holds p-rank microbatches of activations.
#include <algorithm>

#include "schedules/builtin.hpp"
#include "schedules/classic/classic.hpp"

namespace pipesim::sim::detail {

namespace {

std::vector<Task> one_f_one_b_order(const ScheduleShape& s, std::int32_t rank) {
  std::vector<Task> out;
  const std::int32_t m = s.microbatches, warm = std::min(m, s.pp - rank);
  for (std::int32_t i = 0; i < warm; ++i) out.push_back({TaskKind::kForward, i, 0});
  for (std::int32_t i = 0, next = warm; i < m; ++i) {
    out.push_back({TaskKind::kBackward, i, 0});
    if (next < m) out.push_back({TaskKind::kForward, next++, 0});
  }
  return out;
}

}  // namespace

ScheduleDescriptor describe_one_f_one_b() {
  ScheduleDescriptor d = classic_descriptor(
      "1f1b", "PipeDream-flush / Megatron-LM; PyTorch Schedule1F1B order",
      "warm-up min(m, p-rank) forwards, then one backward one forward, then cool-down; holds p-rank "
      "microbatches");
  d.order = one_f_one_b_order;
  d.planner.stands_for_single_stage = true;
  return d;
}

}  // namespace pipesim::sim::detail
