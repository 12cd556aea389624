// What the classic (order-based, GPU-resident) schedules share: their common descriptor fields and the check
// of schedules that run one model chunk per rank.
#pragma once

#include <string>

#include "schedules/builtin.hpp"

namespace pipesim::sim::detail {

/// Empty for v = 1, else why not.
inline std::string needs_one_chunk(const ScheduleShape& s) {
  return s.virtual_stages != 1 ? "uses one model chunk per rank; --virtual-stages must be 1" : "";
}

/// An order-based descriptor with the classic defaults: M = 4 pp, tried by the planner on any layout with
/// every recompute policy and optionally the offloaded optimizer, contiguous-stage partitions.
inline ScheduleDescriptor classic_descriptor(std::string name, std::string source, std::string description) {
  ScheduleDescriptor d =
      named_descriptor(std::move(name), std::move(source), std::move(description), ScheduleKind::kOrderBased);
  d.check = needs_one_chunk;
  d.constraints = {"one model chunk per rank (--virtual-stages 1)"};
  return d;
}

}  // namespace pipesim::sim::detail
