// Layer ranges of pipeline stages: where the transformer blocks are, how blocks split into chunks, and the
// layer range [begin, end) of each chunk (the embedding rides with the first chunk, the head with the last).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "pipesim/sim/workload/cost_model.hpp"

namespace pipesim::sim {

/// Index range of the transformer blocks: layers before `first` are the embedding, from `last + 1` the head.
struct BlockSpan {
  std::int32_t first = 0, last = -1, count = 0;
};
BlockSpan block_span(const std::vector<LayerCost>& layers);

using LayerRange = std::pair<std::int32_t, std::int32_t>;  ///< [begin, end)

/// Layer ranges of chunks holding `blocks_per_chunk[c]` blocks: the embedding joins chunk 0 and the head the
/// last chunk. A chunk may come out empty (0 blocks, not the first or last); callers decide if that is valid.
std::vector<LayerRange> chunk_layer_ranges(const BlockSpan& blocks, std::int32_t layer_count,
                                           const std::vector<std::int32_t>& blocks_per_chunk);

}  // namespace pipesim::sim
