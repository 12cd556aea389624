// Declarations of the built-in schedules' descriptor functions (listed in builtin_schedules.def).
#pragma once

#include <string>
#include <utility>

#include "pipesim/sim/schedules/schedule.hpp"

namespace pipesim::sim::detail {

/// A descriptor with its identity and kind set; the family helpers (classic, offload) fill in the rest.
inline ScheduleDescriptor named_descriptor(std::string name, std::string source, std::string description,
                                           ScheduleKind kind) {
  ScheduleDescriptor d;
  d.name = std::move(name);
  d.source = std::move(source);
  d.description = std::move(description);
  d.kind = kind;
  return d;
}

#define PIPESIM_SCHEDULE(describe) ScheduleDescriptor describe();
#include "schedules/builtin_schedules.def"
#undef PIPESIM_SCHEDULE

}  // namespace pipesim::sim::detail
