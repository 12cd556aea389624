#include "schedules/plan_metadata.hpp"

namespace pipesim::sim {

void fill_job_metadata(PlanMeta& m, const ScheduleInput& in,
                       const std::function<double(const LayerCost&)>& recompute_flops) {
  m.model = in.model_name;
  m.framework = in.framework;
  m.virtual_stages = in.virtual_stages;
  m.microbatches = in.microbatches;
  m.accum_steps = in.accum_steps;
  m.iterations = in.iterations;
  m.seq = static_cast<std::int32_t>(in.seq);
  m.global_batch = in.global_batch;
  m.dtype = in.dtype;
  m.host_dispatch_ns = in.host_dispatch_ns;
  m.elementwise_efficiency = in.elementwise_efficiency;
  m.gpu_speed_cv = in.gpu_speed_cv;
  m.communicator_bytes = in.communicator_bytes;
  m.lora_rank = in.lora_rank;
  double model = 0, hardware = 0;
  for (std::int32_t i = 0; i < in.microbatches; ++i)
    for (const LayerCost& l :
         in.costs[static_cast<std::size_t>(in.cost_of_microbatch[static_cast<std::size_t>(i)])]) {
      model += l.fwd_flops + l.bwd_input_flops + l.bwd_weight_flops;
      hardware += l.fwd_flops + l.bwd_input_flops + l.bwd_weight_flops + recompute_flops(l);
    }
  // The costs are one context-parallel rank's share of each sequence.
  m.model_flops_per_step = model * in.accum_steps * in.dp * in.cp;
  m.hardware_flops_per_step = hardware * in.accum_steps * in.dp * in.cp;
}

}  // namespace pipesim::sim
