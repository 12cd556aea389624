// What the classic (order-based, GPU-resident) schedules share: their common descriptor fields and the check
// of schedules that run one model chunk per rank.
#pragma once

#include <string>

#include "schedules/builtin.hpp"

#include "pipesim/sim/core/option.hpp"

namespace pipesim::sim::detail {

/// Empty for v = 1, else why not.
inline std::string needs_one_chunk(const ScheduleShape& s) {
  return s.virtual_stages != 1
             ? ("uses one model chunk per rank; " + spelled(Option{"virtual_stages"}) + " must be 1")
             : "";
}

/// An order-based descriptor with the classic defaults: M = 4 pp, tried by the planner on any layout with
/// every recompute policy and optionally the offloaded optimizer, contiguous-stage partitions.
inline ScheduleDescriptor classic_descriptor(std::string name, std::string source, std::string description) {
  ScheduleDescriptor d =
      named_descriptor(std::move(name), std::move(source), std::move(description), ScheduleKind::kOrderBased);
  d.check = needs_one_chunk;
  d.constraints = {("one model chunk per rank (" + spelled(Option{"virtual_stages"}) + " 1)")};
  return d;
}

/// What the schedules with two chunks per rank off the loop placement share (ZB-V's V, DualPipe's two
/// copies): B and W split, v = 2, their own placement, a per-rank lower bound only (so the planner tries them
/// when named) and the paired default partition (paired_partition.hpp) instead of the partition search.
inline void place_two_chunks_per_rank(ScheduleDescriptor& d, ChunkPlacement placement) {
  d.multi_chunk = true;
  d.splits_backward = true;
  d.default_virtual_stages = 2;
  d.placement = placement;
  d.planner.virtual_stages = {2};
  d.planner.tried_by_default = false;
  d.partitioner.rule = PartitionRule::kOwnRule;
}

}  // namespace pipesim::sim::detail
