// `pipesim calibrate --from-replay MEASURED --plan PLAN`: a hardware profile refit from what a replay
// measured. Each measured op is inverted through the simulator's own cost formulas: compute ops give the GEMM
// efficiency at their GEMM size (after their launches and memory-bound bytes at the base profile's figures),
// host<->GPU copies the copy bandwidth at their size, CPU optimizer steps the Adam rate at their thread
// count. Medians per size replace the base curve over the measured range; the rest of the base profile is
// kept.
#pragma once

#include <string>
#include <vector>

#include "pipesim/replay/compare.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::replay {

struct RefitReport {
  sim::HardwareProfile profile;
  int compute_ops = 0, copy_ops = 0, optimizer_ops = 0;  ///< measured ops each figure was refit from
  std::vector<std::string> notes;                        ///< what could not be refit, and why
};

/// Throws sim::InputError when `measured` is not a timeline of `plan` (op count, kinds, streams).
RefitReport refit_profile(const sim::Plan& plan, const TimelineFile& measured,
                          const sim::HardwareProfile& base, const std::string& name);

}  // namespace pipesim::replay
