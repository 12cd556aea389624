// The part of a plan's metadata every schedule fills the same way: the job (model, batch, iterations,
// sequence, dtype, LoRA rank) and the FLOPs of one optimizer step that MFU and HFU divide by.
#pragma once

#include <functional>

#include "pipesim/sim/plan/plan.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"

namespace pipesim::sim {

/// `recompute_flops(layer)`: what the schedule re-runs of a layer in the backward (counted by HFU only).
void fill_job_metadata(PlanMeta& meta, const ScheduleInput& in,
                       const std::function<double(const LayerCost&)>& recompute_flops);

}  // namespace pipesim::sim
