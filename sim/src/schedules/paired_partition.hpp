// The default partition of placements that put two chunks on every rank (ZB-V's V, DualPipe's two copies):
// each rank's pair of chunks gets blocks so that the ranks' work is even, the rank whose pair holds the
// embedding and the output layer (rank 0 in the V; ranks 0 and pp-1 with two copies) taking fewer blocks.
#pragma once

#include <cstdint>
#include <vector>

#include "pipesim/sim/schedules/schedule.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "schedules/layer_ranges.hpp"

namespace pipesim::sim {

/// Blocks per model stage (2pp for kV, pp for kDual); empty when the blocks cannot give every chunk that
/// holds neither the embedding nor the output layer at least one (the caller falls back to a balanced split).
std::vector<std::int32_t> paired_partition(const std::vector<LayerCost>& layers, const BlockSpan& span,
                                           std::int32_t pp, ChunkPlacement placement);

}  // namespace pipesim::sim
