// A traced step as a profiled workload (`pipesim-workload`, what --workload reads): each layer's measured
// forward and backward time and launches, and the optimizer's step, so that the planner and the simulator
// place the measured model on pipelines of many GPUs. A trace of a few blocks stands for a deeper model of
// the same blocks (`blocks`).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "pipesim/trace_import/step_profile.hpp"

namespace pipesim::trace_import {

struct WorkloadOptions {
  std::string name;         ///< the workload's name
  std::string source;       ///< the trace it came from
  std::int32_t blocks = 0;  ///< blocks of the model to write (their traced mean, repeated); 0: as traced
  std::int64_t seq = 0;     ///< the traced sequence length, when known (0: not written)
  std::int64_t microbatch_size = 0;
  bool tied_embeddings = false;       ///< the head's vocabulary matrix is the embedding's (counted once)
  std::int64_t bytes_per_param = 16;  ///< on the GPU: fp32 weights and gradients and Adam's two moments
};

/// The workload of `step`. GPU activity launched outside the model's modules, the autograd engine and the
/// optimizer is counted in the head's backward, so that the step's kernel time is the trace's.
nlohmann::ordered_json workload_json(const StepProfile& step, const WorkloadOptions& options);

/// The import's report: the layers, the optimizer, each kernel class's time and share, and what no span
/// claimed.
nlohmann::ordered_json step_report(const StepProfile& step);

}  // namespace pipesim::trace_import
