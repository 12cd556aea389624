// Plan <-> JSON ("format": "pipesim-plan", "version": 1). Lossless: load(save(plan)) == plan field by field,
// and save(load(text)) reproduces the text. The hardware profile travels inside the plan so a saved plan runs
// with no other input.
#pragma once

#include <string>

#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::sim {

std::string plan_to_json(const Plan& plan);
Plan plan_from_json(const std::string& json_text, const std::string& file);
Plan load_plan(const std::string& path);

}  // namespace pipesim::sim
