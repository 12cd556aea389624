// `pipesim bubbles`: simulate one schedule and list every GPU's idle intervals (where, how long, how much
// memory is free in them), summed per GPU with a histogram of their lengths.
#pragma once

#include <string>

#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/schedules/schedule.hpp"

namespace pipesim::cli {

struct BubblesOptions {
  sim::JobOptions job;
  std::string schedule = sim::default_schedule().name;
  std::string plan_file;  ///< a saved plan instead of the job
  std::string format = "table";
};

int run_bubbles(const BubblesOptions& options);

}  // namespace pipesim::cli
