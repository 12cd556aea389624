// `pipesim simulate`: resolve the job, build the plan of each requested schedule, run the engine, print.
#pragma once

#include <string>

#include "pipesim/sim/job/job.hpp"

namespace pipesim::cli {

struct SimulateOptions {
  sim::JobOptions job;
  std::string schedule = "all";
  std::string plan_file;  ///< run a saved plan instead of generating one
  std::string trace_file;
  std::string trace_dir;  ///< one trace per schedule: DIR/<schedule>.trace.json
  std::string timeline_file;
  std::string plan_out;
  std::string chakra_dir;  ///< Chakra execution traces, one per GPU: DIR/<schedule>.<rank>.et
  std::string format = "table";
  /// Fill jobs in the bubbles (PipeFill): shipped names or files, the queue policy, the main job's allowed
  /// slowdown and the fixed cost of a context switch.
  std::string fill_jobs;
  std::string fill_policy = "fifo";
  double fill_max_slowdown = 0.05;
  double fill_switch_us = 50;
};

/// Returns the process exit code; library errors propagate as exceptions to main.
int run_simulate(const SimulateOptions& options);

}  // namespace pipesim::cli
