// `pipesim replay PLAN`: executes a saved plan on this machine (host backend; cuda backend planned), writes
// the measured pipesim-timeline and prints it against the simulator's prediction for the same plan.
// `pipesim compare PREDICTED MEASURED`: two timelines of one plan side by side.
#pragma once

#include <string>

#include "pipesim/replay/replay.hpp"

namespace pipesim::cli {

struct ReplayCommandOptions {
  std::string plan_file;
  replay::ReplayOptions replay;
  std::string out;    ///< measured pipesim-timeline
  std::string trace;  ///< Chrome trace of the measured run
  std::string format = "table";
};

int run_replay(const ReplayCommandOptions& options);
/// `calibrate --from-replay MEASURED --plan PLAN --out FILE [--base PROFILE]` (base: the plan's own profile).
int run_refit(const std::string& measured, const std::string& plan_file, const std::string& base,
              const std::string& out, const std::string& name);
int run_compare(const std::string& predicted, const std::string& measured, const std::string& format,
                int top);

}  // namespace pipesim::cli
