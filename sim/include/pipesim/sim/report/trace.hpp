// Writers for run outputs: Chrome trace event JSON (opens in Perfetto / chrome://tracing: one process per
// device, one thread per stream, flow arrows for p2p, memory counters) and the pipesim timeline JSON
// ("format": "pipesim-timeline") that replay will also write, so predicted and measured runs compare.
#pragma once

#include <ostream>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan.hpp"
#include "pipesim/sim/report/metrics.hpp"

namespace pipesim::sim {

void write_chrome_trace(std::ostream& out, const Plan& plan, const Timeline& timeline);
void write_timeline(std::ostream& out, const Plan& plan, const Timeline& timeline, const Metrics& metrics);

}  // namespace pipesim::sim
