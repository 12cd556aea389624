// `pipesim check RESULT [--plan PLAN]`: holds a saved result (simulate's JSON, or a timeline from simulate
// or replay) to the invariants every fresh result is checked against; exit code 3 names the first broken.
#pragma once

#include <string>

namespace pipesim::cli {

int run_check(const std::string& result_file, const std::string& plan_file);

}  // namespace pipesim::cli
