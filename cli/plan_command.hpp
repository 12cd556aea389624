// `pipesim plan`: the best parallel configuration for a model on N GPUs, ranked, with the winner written as
// an executable plan.
#pragma once

#include <string>

#include "pipesim/planner/config_search.hpp"

namespace pipesim::cli {

struct PlanOptions {
  planner::SearchOptions search;
  std::string schedules;  ///< comma-separated
  std::string out;
  std::string format = "table";
};

int run_plan(const PlanOptions& options);

}  // namespace pipesim::cli
