// The CPU-offload schedules: each builds a whole plan (weights in host memory, streamed to the GPUs).
// Registered in schedules.cpp; semantics in REFERENCE.md and the README.
#pragma once

#include "pipesim/sim/plan.hpp"
#include "pipesim/sim/plan_builder.hpp"

namespace pipesim::sim::detail {

Plan build_mobius(const ScheduleInput& in);
Plan build_spipe(const ScheduleInput& in);
Plan build_roundpipe(const ScheduleInput& in);

}  // namespace pipesim::sim::detail
