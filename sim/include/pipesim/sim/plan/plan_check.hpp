// Checks of a plan before it is simulated or replayed: its references, and that it can run to the end.
#pragma once

#include <string>

#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::sim {

/// Checks the plan's references (streams, devices, deps, payload endpoints); throws InputError naming
/// `file` and the JSON path.
void validate_plan(const Plan& plan, const std::string& file = "plan");

/// Boost.Graph topological check: throws DeadlockError naming the ops of a cycle (dependencies and
/// stream order together) when the plan could never run to the end.
void check_plan_order(const Plan& plan, const std::string& file = "");

}  // namespace pipesim::sim
