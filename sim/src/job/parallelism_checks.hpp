// The layout's checks of the parallelisms that need the model or the schedule: expert parallelism against
// the model's experts and the data-parallel ranks, context parallelism against the sequence, the attention
// kernel and what is modelled beside it. Each throws InputError naming the option and what is valid.
#pragma once

#include <cstdint>

#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/schedules/schedule.hpp"
#include "pipesim/sim/workload/model.hpp"

namespace pipesim::sim {

/// --ep and --moe-imbalance against the model and the layout.
void check_expert_parallelism(const JobOptions& j, const ModelSpec& m, const ScheduleDescriptor& schedule);

/// --cp and --cp-attention against the sequence `seq`, the job's other options and the schedule.
void check_context_parallelism(const JobOptions& j, std::int64_t seq, const ScheduleDescriptor& schedule);

}  // namespace pipesim::sim
