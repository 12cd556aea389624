// One collective alone on a hardware profile, as nccl-tests runs it: every GPU of `nodes` nodes in one group,
// timed by the simulator exactly as a training plan times its collectives (NCCL's algorithm, protocol and
// latency, the ring's hops over NVLink, PCIe, host memory or the network), reported as nccl-tests reports it.
// A user holds a profile to the nccl-tests results of the machine it describes.
#pragma once

#include <cstdint>

#include "pipesim/sim/core/time.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/hardware/nccl_tuning.hpp"

namespace pipesim::sim {

struct CollectiveProbe {
  Duration time = 0;      ///< from the first member's start to the last member's end
  NcclCollective nccl;    ///< the algorithm and protocol NCCL picks, and its latency
  double algbw_GBps = 0;  ///< message bytes over the time
  double busbw_GBps =
      0;  ///< algbw x 2(n-1)/n for an all-reduce, (n-1)/n otherwise (nccl-tests' bus bandwidth)
};

/// `kind` of `message_bytes` (an all-gather's gathered buffer, a reduce-scatter's input) over `gpus_per_node`
/// GPUs of each of `nodes` nodes of `hw`. Throws InputError for a group of fewer than 2 GPUs or more GPUs a
/// node than the profile's node has.
CollectiveProbe probe_collective(const HardwareProfile& hw, CollectiveKind kind, std::int32_t gpus_per_node,
                                 std::int32_t nodes, std::int64_t message_bytes);

}  // namespace pipesim::sim
