#include "schedules/plan_size_guard.hpp"

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/memory_budget.hpp"
#include "pipesim/sim/core/option.hpp"
#include "pipesim/sim/core/units.hpp"

namespace pipesim::sim::detail {

namespace {
constexpr double kMaxOps = 67108864;  // 2^26
// What a plan holds per op while it is built and simulated (the op and its dependencies, the engine's state,
// the timeline): 320-560 bytes measured on the 8192-GPU benchmarks; 1 KiB leaves room for the ops the
// estimates do not count.
constexpr double kBytesPerOp = 1024;
}  // namespace

void check_plan_size(double estimated_ops, double budget_bytes, Option option, const std::string& fewer) {
  if (!(estimated_ops <= kMaxOps))
    throw InputError(option, "",
                     fmt::format("about {:.0f} ops to simulate; valid: at most {:.0f} ({})", estimated_ops,
                                 kMaxOps, fewer));
  const double budget = budget_bytes > 0 ? budget_bytes : default_memory_budget_bytes();
  if (budget > 0 && estimated_ops * kBytesPerOp > budget)
    throw InputError(
        option, "",
        fmt::format("about {:.0f} ops would take about {:.1f} GiB to simulate, over the {:.1f} GiB "
                    "budget ({}; default half of the memory this process may use): {}",
                    estimated_ops, estimated_ops * kBytesPerOp / kBytesPerGiB, budget / kBytesPerGiB,
                    spelled(Option{"max_memory"}), fewer));
}

}  // namespace pipesim::sim::detail
