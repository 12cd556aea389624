#include "schedules/paired_partition.hpp"

#include <algorithm>
#include <array>

namespace pipesim::sim {

namespace {

/// A layer's work for balancing: its measured times where profiled, else its FLOPs.
double work(const LayerCost& l) {
  if (l.fwd_ns >= 0)
    return static_cast<double>(l.fwd_ns + std::max<Duration>(0, l.bwd_input_ns) +
                               std::max<Duration>(0, l.bwd_weight_ns));
  return l.fwd_flops + l.bwd_input_flops + l.bwd_weight_flops + l.expert_fwd_flops +
         l.expert_bwd_input_flops + l.expert_bwd_weight_flops;
}

}  // namespace

std::vector<std::int32_t> paired_partition(const std::vector<LayerCost>& layers, const BlockSpan& span,
                                           std::int32_t pp, ChunkPlacement placement) {
  const bool dual = placement == ChunkPlacement::kDual;
  const std::int32_t stages = dual ? pp : 2 * pp;
  // Units of balancing: a rank's two chunks (V), or a pair of stages held together by two ranks (two copies).
  const std::int32_t units = dual ? pp / 2 : pp;  // two copies need pp even
  auto pair_of = [&](std::int32_t u) {
    return dual ? std::array<std::int32_t, 2>{u, pp - 1 - u} : std::array<std::int32_t, 2>{u, 2 * pp - 1 - u};
  };
  double block = 0, embedding = 0, head = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto ii = static_cast<std::int32_t>(i);
    if (ii < span.first)
      embedding += work(layers[i]);
    else if (ii > span.last)
      head += work(layers[i]);
    else
      block += work(layers[i]);
  }
  if (span.count < 1 || block <= 0) return {};
  block /= span.count;
  // Each stage's load: its blocks at the average block's work plus the embedding (stage 0) or the output
  // layer (the last stage); every stage without either needs a block.
  std::vector<std::int32_t> part(static_cast<std::size_t>(stages), 0);
  std::vector<double> load(static_cast<std::size_t>(stages), 0);
  load[0] += embedding;
  load[static_cast<std::size_t>(stages - 1)] += head;
  std::int32_t left = span.count;
  for (std::int32_t s = 0; s < stages; ++s) {
    if (s == 0 || s == stages - 1) continue;
    part[static_cast<std::size_t>(s)] = 1;
    load[static_cast<std::size_t>(s)] += block;
    --left;
  }
  if (left < 0) return {};
  auto unit_load = [&](std::int32_t u) {
    const auto [a, b] = pair_of(u);
    return load[static_cast<std::size_t>(a)] + load[static_cast<std::size_t>(b)];
  };
  // Water-filling: each block goes to the lightest unit, and inside it to the lighter of its two stages
  // (the lower one on ties), which minimizes the heaviest rank for blocks of equal work.
  for (; left > 0; --left) {
    std::int32_t best = 0;
    for (std::int32_t u = 1; u < units; ++u)
      if (unit_load(u) < unit_load(best)) best = u;
    const auto [a, b] = pair_of(best);
    const std::int32_t s = load[static_cast<std::size_t>(b)] < load[static_cast<std::size_t>(a)] ? b : a;
    ++part[static_cast<std::size_t>(s)];
    load[static_cast<std::size_t>(s)] += block;
  }
  return part;
}

}  // namespace pipesim::sim
