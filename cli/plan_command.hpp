// `pipesim plan`: the best parallel configuration for a model on N GPUs, ranked, with the winner written as
// an executable plan.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipesim/planner/config_search.hpp"

namespace pipesim::cli {

struct PlanOptions {
  planner::SearchOptions search;
  std::string schedules;  ///< comma-separated
  std::string out;
  std::string format = "table";
};

int run_plan(const PlanOptions& options);

/// A comma-separated list as given (an empty item stays, for the loader of its kind to refuse).
std::vector<std::string> split_commas(const std::string& text);

/// A searched configuration as `plan --format json` prints it: the simulate keys plus `config`.
nlohmann::ordered_json candidate_json(const planner::Candidate& c);
/// The configuration alone (layout, schedule, sharding, partition, bound, $ per million tokens).
nlohmann::ordered_json config_json(const planner::Candidate& c);

}  // namespace pipesim::cli
