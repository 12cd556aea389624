// build_plan: completes the schedule's parameters with its defaults, checks them, and hands the input to the
// shared lowering (order-based) or to the schedule itself (whole-plan).
#include <fmt/format.h>

#include "pipesim/sim/plan_builder.hpp"
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

}  // namespace

Plan build_plan(const ScheduleDescriptor& schedule, const ScheduleInput& input) {
  if (has_every_parameter(schedule, input)) return dispatch(schedule, input);
  ScheduleInput completed = input;  // parameters not set take the descriptor's defaults
  for (const auto& p : schedule.parameters)
    if (!input.parameters.values().count(p.name)) completed.parameters.set(p.name, p.default_value);
  return dispatch(schedule, completed);
}

}  // namespace pipesim::sim
