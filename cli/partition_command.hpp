// `pipesim partition`: the optimal layer partition for a schedule, against the uniform split and DeepSpeed's
// `parameters` method.
#pragma once

#include <string>

#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/schedules/schedule.hpp"

namespace pipesim::cli {

struct PartitionOptions {
  sim::JobOptions job;
  std::string schedule = sim::default_schedule().name;
  double max_mem_fraction = 0.9;
  std::string format = "table";
};

int run_partition(const PartitionOptions& options);

}  // namespace pipesim::cli
