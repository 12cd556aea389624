// Declarations of the built-in schedules' descriptor functions (listed in builtin_schedules.def).
#pragma once

#include "pipesim/sim/schedule.hpp"

namespace pipesim::sim::detail {

#define PIPESIM_SCHEDULE(describe) ScheduleDescriptor describe();
#include "schedules/builtin_schedules.def"
#undef PIPESIM_SCHEDULE

}  // namespace pipesim::sim::detail
