// `pipesim explain PLAN`: checks a saved plan, simulates it and reports its critical path.
#pragma once

#include <string>

namespace pipesim::cli {

int run_explain(const std::string& plan_file, const std::string& format, int top);

}  // namespace pipesim::cli
