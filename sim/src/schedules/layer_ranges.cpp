#include "schedules/layer_ranges.hpp"

#include <sstream>
#include <string>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"

namespace pipesim::sim {

BlockSpan block_span(const std::vector<LayerCost>& layers) {
  BlockSpan s;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].role != LayerRole::kBlock) continue;
    if (s.count == 0) s.first = static_cast<std::int32_t>(i);
    s.last = static_cast<std::int32_t>(i);
    ++s.count;
  }
  return s;
}

std::vector<LayerRange> chunk_layer_ranges(const BlockSpan& blocks, std::int32_t layer_count,
                                           const std::vector<std::int32_t>& blocks_per_chunk) {
  std::vector<LayerRange> ranges;
  const auto chunks = static_cast<std::int32_t>(blocks_per_chunk.size());
  std::int32_t at = blocks.first;
  for (std::int32_t c = 0; c < chunks; ++c) {
    const std::int32_t n = blocks_per_chunk[static_cast<std::size_t>(c)];
    ranges.push_back({c == 0 ? 0 : at, c == chunks - 1 ? layer_count : at + n});
    at += n;
  }
  return ranges;
}

std::vector<std::int32_t> balanced_partition(std::int32_t blocks, std::int32_t chunks) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(chunks), blocks / chunks);
  for (std::int32_t i = 0; i < blocks % chunks; ++i) ++out[static_cast<std::size_t>(i)];
  return out;
}

std::vector<std::int32_t> parse_partition(const std::string& text) {
  std::vector<std::int32_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    long v = -1;
    try {
      v = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || v < 0 || v > 1'000'000)
      throw InputError(
          Option{"partition"}, "",
          fmt::format("'{}' is not a block count; expected comma-separated integers >= 0, e.g. 8,8,8,8",
                      item));
    out.push_back(static_cast<std::int32_t>(v));
  }
  if (out.empty())
    throw InputError(Option{"partition"}, "", "empty; expected comma-separated block counts, e.g. 8,8,8,8");
  return out;
}
}  // namespace pipesim::sim
