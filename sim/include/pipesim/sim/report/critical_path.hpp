// The critical path of a simulated run, behind `pipesim explain`: the longest path through the plan's ops
// (dependencies and stream order) weighted by their simulated durations, split by stage and link.
#pragma once

#include <string>
#include <vector>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::sim {

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
