// Replay: executes a pipesim-plan for real and measures it, so a prediction can be checked on the machine it
// is about. One issue loop for every backend: a thread per plan stream runs the stream's ops in order, each
// when its dependencies are done; collectives start on all their members at once; memory effects are applied
// as the plan says. A plan that cannot progress fails with the stuck ops named after `timeout_s` without a
// finished op; a cyclic plan is refused before anything runs.
#pragma once

#include <string>
#include <vector>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::replay {

struct ReplayOptions {
  std::string backend = "host";  ///< host (runs everywhere) or cuda
  int iterations = 3;            ///< measured runs of the whole plan, after one warm-up
  /// Every op's work (FLOPs, bytes, parameters, fixed durations) times this; measured times are divided by
  /// it. 1 replays the plan as it is; smaller values replay GPU-sized plans on a host in reasonable time.
  double work_scale = 1;
  double timeout_s = 60;  ///< no op finishing for this long: the plan is stuck
  /// One process per node of the plan (started with `mpirun -np NODES`), each running its node's streams;
  /// cross-node transfers and dependencies go over MPI. Host backend only.
  bool mpi = false;
};

/// Where and how the replay ran (written beside the measured timeline).
struct ReplayEnvironment {
  std::string backend;
  std::string host;                      ///< CPU model, cores
  int threads = 0;                       ///< plan streams replayed, one thread each
  double compute_gflops_per_thread = 0;  ///< host backend: the rate compute ops' FLOPs run at, measured
  double work_scale = 1;
  std::vector<double> iteration_s;  ///< makespan of each measured run
  std::string
      timing;  ///< CUDA backend: how op times were taken (CUPTI activity records, or CUDA events and why)
};

struct ReplayResult {
  sim::Timeline timeline;  ///< the measured run with the median makespan, in the simulator's format
  ReplayEnvironment environment;
  bool root = true;  ///< multi-node: only rank 0 holds the whole timeline (and writes the outputs)
};

/// Checks the plan (references, cycles), then replays it. Throws sim::InputError for bad options or an
/// unknown or unavailable backend, sim::DeadlockError naming the stuck ops when the plan cannot progress.
ReplayResult replay_plan(const sim::Plan& plan, const ReplayOptions& options);

/// A hardware profile of this machine as the host backend runs plans (a "GPU" is one stream's thread: its FMA
/// rate, its memcpy rate for every link, the Adam kernel's rate): simulating a plan with it predicts what
/// `replay --backend host` measures. Measured now (about a second).
sim::HardwareProfile host_backend_profile(const std::string& name);

/// The environment as JSON (an object), for the measured timeline file.
std::string environment_json(const ReplayEnvironment& environment);

}  // namespace pipesim::replay
