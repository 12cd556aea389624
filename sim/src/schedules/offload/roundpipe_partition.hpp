// RoundPipe's automatic partitioning: separate forward and backward partitions of the layers (the first
// backward stage fused with the last layers' forward and the loss), chosen for the cheapest
// max(#stages, #GPUs) x T over candidate stage times T, under a per-stage GPU memory cap.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/workload/cost_model.hpp"

namespace pipesim::sim {

struct RoundPipePartition {
  std::vector<std::pair<std::int32_t, std::int32_t>> forward;   ///< layer ranges F0 .. F(nf-1)
  std::vector<std::pair<std::int32_t, std::int32_t>> backward;  ///< FB (the last layers) first, then B1 ..
  std::int64_t stage_time_ns = 0;                               ///< the chosen T (per microbatch)
  double cost_ns = 0;                                           ///< max(#stages, #GPUs) x T
};

/// Candidate T: every contiguous sum of per-layer backward times within [maxLayer, 1.1 maxLayer]. For each T,
/// pack greedily: the fused stage from the end, forward stages from the back, backward stages from the front,
/// each under T and under a memory cap of 0.6 x GPU memory, half per stage (the other half is the prefetch).
/// Throws InputError when a single layer does not fit the memory cap.
RoundPipePartition roundpipe_partition(const std::vector<LayerCost>& layers, const HardwareProfile& hw,
                                       const std::string& dtype, std::int32_t microbatches);

/// A partition the user gives as layer counts (embedding and head count as layers): forward stages from the
/// first layer up; backward stages in the order they run, the fused stage (the last layers) first, then each
/// next one below. Its stage time is the longest stage's. Throws InputError naming --partition when the
/// counts do not tile the layers.
RoundPipePartition given_roundpipe_partition(const std::vector<LayerCost>& layers, const HardwareProfile& hw,
                                             const std::string& dtype,
                                             const std::vector<std::int32_t>& forward,
                                             const std::vector<std::int32_t>& backward);

}  // namespace pipesim::sim
