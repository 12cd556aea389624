// Plan checks before a plan is simulated or replayed, and the critical-path report behind `pipesim explain`.
// Both see the plan as a graph over its ops: an edge for every dependency and for every pair of consecutive
// ops on one stream (a stream runs its ops in order).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/engine.hpp"
#include "pipesim/sim/plan.hpp"

namespace pipesim::sim {

/// Boost.Graph topological check: throws DeadlockError naming the ops of a cycle (dependencies and
/// stream order together) when the plan could never run to the end.
void check_plan_order(const Plan& plan, const std::string& file = "");

struct PathShare {
  std::string what;  ///< e.g. "stage 3 compute", "gpu2 -> gpu3 p2p (node0.gpu2.pcie.up)"
  double seconds = 0;
  double share = 0;  ///< of the critical path
};

struct CriticalPath {
  std::vector<OpId> ops;  ///< first to last
  double length_s = 0;    ///< sum of the ops' simulated durations
  double step_time_s = 0;
  std::vector<PathShare> by_resource;  ///< largest first
  std::string advice;                  ///< which stage or link to speed up first
};

/// The longest path through the op graph weighted by the simulated op durations (Boost.Graph DAG longest
/// path), split by stage and link.
CriticalPath critical_path(const Plan& plan, const Timeline& timeline);

}  // namespace pipesim::sim
