// Plans are refused before they are built when they would not fit: an op-count ceiling, and an estimate of
// the memory that building and simulating them takes against a budget (the max_memory option; by default half
// of what this process may use: physical memory, or less under `ulimit -v` / `ulimit -d`).
#pragma once

#include <string>

#include "pipesim/sim/core/option.hpp"

namespace pipesim::sim::detail {

/// Throws InputError on `option` when `estimated_ops` exceeds the op ceiling or, at about 1 KiB per op, the
/// budget (`budget_bytes` > 0, else the default); `fewer` says how to shrink the job.
void check_plan_size(double estimated_ops, double budget_bytes, Option option, const std::string& fewer);

}  // namespace pipesim::sim::detail
