#include "check_command.hpp"

#include <iostream>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/report/saved_result.hpp"

namespace pipesim::cli {

int run_check(const std::string& result_file, const std::string& plan_file) {
  const std::vector<sim::SavedResult> results = sim::load_saved_results(result_file);
  std::optional<sim::Plan> plan;
  if (!plan_file.empty()) plan = sim::load_plan(plan_file);
  bool timeline = false;
  for (const sim::SavedResult& r : results) {
    sim::check_saved_result(r, plan ? &*plan : nullptr);
    timeline = timeline || r.has_ops;
  }
  std::cout << fmt::format("{}: {} result{} hold{} every invariant ({}{})\n", result_file, results.size(),
                           results.size() == 1 ? "" : "s", results.size() == 1 ? "s" : "",
                           timeline && plan ? "metrics, op times and memory against " + plan_file : "metrics",
                           timeline && !plan ? "; give --plan to check the op times too" : "");
  return 0;
}

}  // namespace pipesim::cli
