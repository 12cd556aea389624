// Saved plans, as `simulate --plan` and `explain` use them: parsed, checked for order and cycles, executed by
// the engine and explained by the critical path. Plans larger than a fuzz input can sensibly drive are parsed
// and checked only.
#include "fuzz_input.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan_check.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/report/critical_path.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipesim::sim;
  return pipesim::fuzz::expect_only_input_errors([&] {
    Plan plan = plan_from_json(pipesim::fuzz::as_text(data, size), "fuzz.plan.json");
    try {
      check_plan_order(plan);  // a cycle through dependencies and stream order is a deadlock too
      if (plan.ops.size() > 4096) return;
      Timeline tl = Engine{}.run(plan);
      (void)critical_path(plan, tl);
    } catch (const DeadlockError&) {  // reported by the CLI as one line, exit 2
    }
  });
}
