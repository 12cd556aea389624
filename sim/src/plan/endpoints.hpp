// Where a plan's device sits in the cluster's topology: a GPU (node, index), a node's host memory or its
// NVMe volume, the ends of the path a transfer takes.
#pragma once

#include "hardware/topology.hpp"
#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::sim {

inline Endpoint endpoint_of(const Device& device) {
  return {device.node, device.kind == DeviceKind::kGpu    ? device.local_index
                       : device.kind == DeviceKind::kNvme ? Endpoint::kNvme
                                                          : Endpoint::kHostMemory};
}

}  // namespace pipesim::sim
