// `pipesim import-trace TRACE --out FILE`: a PyTorch profiler trace of one training step into a profiled
// workload (--workload), each kernel given to its layer and pass, with a report of where the GPU's time went.
#pragma once

#include <cstdint>
#include <string>

#include "pipesim/trace_import/host_wait.hpp"

namespace pipesim::cli {

struct ImportTraceOptions {
  std::string trace;        ///< Kineto chrome-trace JSON, plain or gzip
  std::string et;           ///< the matching execution trace (optional): activation memory
  std::string out;          ///< the pipesim-workload to write
  std::string name;         ///< the workload's name (default: the trace's file name)
  std::int32_t blocks = 0;  ///< write the traced blocks' mean this many times (0: as traced)
  std::int64_t step = -1;   ///< the ProfilerStep#N to import (-1: the last the trace marks)
  bool all_steps = false;   ///< the mean of every step the trace marks instead
  std::int64_t seq = 0, microbatch_size = 0;
  bool tied_embeddings = false;
  std::int64_t bytes_per_param = 16;
  /// What the profiler spent per recorded event (host_wait.hpp): taken out of the CPU's traced time.
  double profiler_op_us = trace_import::ProfilerCost{}.op_us;
  double profiler_python_us = trace_import::ProfilerCost{}.python_us;
  /// The step measured without the profiler (ms; 0: not given): the two costs are scaled to replay it.
  double measured_step_ms = 0;
  std::string format = "table";
};

int run_import_trace(const ImportTraceOptions& options);

/// `pipesim calibrate --from-trace TRACE --out FILE`: `base` (empty: the shipped profile of the trace's GPU)
/// with its GEMM-efficiency curve refit from the trace's GEMMs at `dtype`'s peak, and its streaming
/// efficiency from the element-wise ops of `framework` (empty: megatron-core) that ran it; with
/// `framework_out`, also that framework with the CPU's time a launch the trace shows (host_dispatch_us).
int run_calibrate_from_trace(const std::string& trace, const std::string& base, const std::string& out,
                             const std::string& name, const std::string& dtype, const std::string& framework,
                             const std::string& framework_out = "");

}  // namespace pipesim::cli
