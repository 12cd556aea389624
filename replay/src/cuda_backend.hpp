// `replay --backend cuda` (see cuda_backend.cpp): the measured runs, or sim::InputError saying why the CUDA
// replay did not run (no nvcc at build time, no device, too few GPUs for the plan).
#pragma once

#include <vector>

#include "cuda_replay_abi.hpp"
#include "pipesim/replay/replay.hpp"

namespace pipesim::replay {

bool cuda_replay_compiled();
/// The plan as plain data for the CUDA module, work scaled by `scale` (memory kept at full size); ops' waits
/// include, for collectives, what every member waits for (members start together). Throws InputError when
/// no issue order exists.
cuda_abi::Request flatten_for_cuda(const sim::Plan& plan, double scale);
/// Every measured run's op start/end (ns from the run's origin, work as scaled); fills env.host.
std::vector<sim::Timeline> run_cuda_replay(const sim::Plan& plan, const ReplayOptions& options,
                                           ReplayEnvironment& env);

}  // namespace pipesim::replay
