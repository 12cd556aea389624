// build_plan: completes the schedule's parameters with its defaults, checks them, and hands the input to the
// shared lowering (order-based) or to the schedule itself (whole-plan).
#include <fmt/format.h>

#include "pipesim/sim/schedules/plan_builder.hpp"
#include "schedules/order_lowering.hpp"

namespace pipesim::sim {

namespace {

bool has_every_parameter(const ScheduleDescriptor& schedule, const ScheduleInput& input) {
  for (const auto& p : schedule.parameters)
    if (!input.parameters.values().count(p.name)) return false;
  return true;
}

Plan dispatch(const ScheduleDescriptor& schedule, const ScheduleInput& input) {
  for (const auto& p : schedule.parameters) check_parameter(p, input.parameters.values().at(p.name));
  switch (schedule.kind) {
    case ScheduleKind::kOrderBased:
      return lower_order_based(schedule, input);
    case ScheduleKind::kWholePlan:
      return schedule.build(input);
  }
  throw std::logic_error(fmt::format("schedule {} has an unknown kind", schedule.name));
}

ScheduleInput completed(const ScheduleDescriptor& schedule, const ScheduleInput& input) {
  ScheduleInput out = input;  // parameters not set take the descriptor's defaults
  for (const auto& p : schedule.parameters)
    if (!input.parameters.values().count(p.name)) out.parameters.set_default(p.name, p.default_value);
  return out;
}

}  // namespace

Plan build_plan(const ScheduleDescriptor& schedule, const ScheduleInput& input) {
  if (has_every_parameter(schedule, input)) return dispatch(schedule, input);
  return dispatch(schedule, completed(schedule, input));
}

Duration schedule_lower_bound_ns(const ScheduleDescriptor& schedule, const ScheduleInput& input) {
  if (schedule.kind != ScheduleKind::kOrderBased) return 0;
  const ScheduleInput full = has_every_parameter(schedule, input) ? input : completed(schedule, input);
  for (const auto& p : schedule.parameters) check_parameter(p, full.parameters.values().at(p.name));
  return order_based_lower_bound(schedule, full);
}

}  // namespace pipesim::sim
