#include "explain_command.hpp"

#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan_check.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/report/critical_path.hpp"

namespace pipesim::cli {

int run_explain(const std::string& plan_file, const std::string& format, int top) {
  sim::Plan plan = sim::load_plan(plan_file);
  sim::check_plan_order(plan, plan_file);
  sim::Timeline tl = sim::Engine{}.run(plan);
  sim::CriticalPath cp = sim::critical_path(plan, tl);
  if (format == "json") {
    nlohmann::ordered_json j;
    j["plan"] = plan_file;
    j["run_time_s"] = cp.step_time_s;
    j["critical_path_s"] = cp.length_s;
    j["critical_path_ops"] = cp.ops.size();
    auto shares = nlohmann::ordered_json::array();
    for (const auto& s : cp.by_resource)
      shares.push_back({{"resource", s.what}, {"seconds", s.seconds}, {"share", s.share}});
    j["by_resource"] = std::move(shares);
    j["advice"] = cp.advice;
    std::cout << pipesim::sim::json_text(j, 2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{}: {} on {}, {} ops; run time {:.4f} s\n", plan_file, plan.meta.schedule,
                           plan.hw.name, plan.ops.size(), cp.step_time_s);
  std::cout << fmt::format(
      "critical path: {} ops, {:.4f} s of op time ({:.1f}% of the run; the rest is waiting for "
      "shared links and cores)\n",
      cp.ops.size(), cp.length_s, cp.step_time_s > 0 ? 100 * cp.length_s / cp.step_time_s : 0.0);
  std::cout << fmt::format("{:>9} {:>7}  {}\n", "seconds", "share", "resource on the critical path");
  for (std::size_t k = 0; k < cp.by_resource.size() && static_cast<int>(k) < top; ++k)
    std::cout << fmt::format("{:>9.4f} {:>6.1f}%  {}\n", cp.by_resource[k].seconds,
                             100 * cp.by_resource[k].share, cp.by_resource[k].what);
  std::cout << cp.advice << "\n";
  return 0;
}

}  // namespace pipesim::cli
