// A profiled workload (`pipesim-workload`): a model as measured, layer by layer, instead of priced from its
// shape: each layer's forward and backward times for one microbatch, and where the profile says so its
// launches, parameters, activations and the optimizer's step (pipesim import-trace writes them from a
// PyTorch profiler trace).
#pragma once

#include <string>
#include <vector>

#include "pipesim/sim/core/time.hpp"
#include "pipesim/sim/workload/cost_model.hpp"

namespace pipesim::sim {

/// A profiled workload: per-layer measured times for one microbatch, as users measured them.
struct Workload {
  std::string name;
  std::vector<LayerCost> layers;
  std::int64_t microbatch_size = 0;  ///< 0 when unknown
  std::int64_t seq = 0;
  /// The measured optimizer step of the whole model (`optimizer_ms`), or -1: priced from the parameters.
  Duration optimizer_ns = -1;
};

Workload parse_workload(const std::string& json_text, const std::string& file, Recompute recompute);

/// A profiled layer's pass lasts at least the CPU's issuing of the launches it counted (`dispatch_ns` each):
/// its measured times are the GPU's. Layer by layer, as a trace shows them: the CPU cannot issue the next
/// layer's kernels ahead of a slow one's by more than the launch queue holds.
void bound_by_dispatch(Duration dispatch_ns, std::vector<LayerCost>& layers);
Workload load_workload(const std::string& path, Recompute recompute);

}  // namespace pipesim::sim
