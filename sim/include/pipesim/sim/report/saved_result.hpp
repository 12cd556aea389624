// A result read back from a file pipesim wrote, to check its invariants again (`pipesim check`): the JSON of
// `simulate --format json` (its metrics and fill claims), or a timeline (`simulate --timeline`,
// `replay --out`: its metrics and every op's times). A result from another version, a replay or an edited
// file is held to the same invariants as a fresh one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipesim/sim/plan/plan.hpp"
#include "pipesim/sim/report/invariants.hpp"
#include "pipesim/sim/report/metrics.hpp"

namespace pipesim::sim {

struct SavedResult {
  std::string path;
  Metrics metrics;
  std::int64_t global_batch = 0;
  std::int32_t seq = 0;
  std::int64_t gpu_capacity_bytes = 0;
  std::optional<FillClaims> fill;  ///< simulate --fill-jobs
  bool has_ops = false;            ///< a timeline: the op times below
  bool measured = false;           ///< a timeline of a replay: its speed is not bounded by the profile's peak
  std::vector<TimePoint> start, end;
};

/// Reads either kind of file (simulate --schedule all writes an array: one result each); a number written as
/// null (not finite) is read as NaN, for the invariants to name. Throws InputError naming the file and JSON
/// path for anything else malformed.
std::vector<SavedResult> load_saved_results(const std::string& path);
/// The same from the file's text (`path` names it in errors).
std::vector<SavedResult> parse_saved_results(const std::string& text, const std::string& path);

/// Checks a saved result's invariants; with the plan it ran, a timeline's op times and memory as well.
/// Throws InvariantError for the first broken, InputError when the timeline is not of that plan.
void check_saved_result(const SavedResult& result, const Plan* plan);

}  // namespace pipesim::sim
