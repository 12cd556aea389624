// GPipe: all forwards, then all backwards in microbatch order 0..m-1; holds m microbatches of activations.
#include "schedules/builtin.hpp"
#include "schedules/classic/classic.hpp"

namespace pipesim::sim::detail {

namespace {

std::vector<Task> gpipe_order(const ScheduleShape& s, std::int32_t) {
  std::vector<Task> out;
  for (std::int32_t i = 0; i < s.microbatches; ++i) out.push_back({TaskKind::kForward, i, 0});
  for (std::int32_t i = 0; i < s.microbatches; ++i) out.push_back({TaskKind::kBackward, i, 0});
  return out;
}

}  // namespace

ScheduleDescriptor describe_gpipe() {
  ScheduleDescriptor d = classic_descriptor(
      "gpipe", "GPipe (Huang et al. 2019)",
      "all forwards, then all backwards (microbatch order 0..m-1); holds m microbatches of activations");
  d.order = gpipe_order;
  return d;
}

}  // namespace pipesim::sim::detail
