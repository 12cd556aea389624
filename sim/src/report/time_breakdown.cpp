#include "pipesim/sim/report/time_breakdown.hpp"

#include "report/op_sweep.hpp"

namespace pipesim::sim {

TimeBreakdown compute_time_breakdown(const Plan& plan, const Timeline& tl) {
  const SweepContext ctx(plan, tl);
  return breakdown_of(ctx, sweep_plan(ctx));
}

}  // namespace pipesim::sim
