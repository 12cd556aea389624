// Where a traced step's GPU waited for its CPU. A GPU idles between two kernels when the CPU has not yet
// launched the second: eager PyTorch's Python, dispatch and launch calls take longer than the kernel before.
// A trace shows those waits, but under the profiler: it spends time on every event it records (an op with its
// shapes, a Python frame), so the CPU side of a trace runs up to twice as long as without it. The waits are
// found by replaying the step: the CPU advances from one launch to the next by the time the trace shows
// between them less the profiler's cost for each event recorded in between, and less the profiler's own work
// the trace records as such (CUPTI's buffer requests); the GPU starts each kernel when it
// is launched and its stream is free, and runs it for its traced duration; a call that waits for the GPU
// (a synchronize) holds the CPU until the GPU has finished.
#pragma once

#include <cstdint>
#include <vector>

#include "pipesim/trace_import/kineto_trace.hpp"

namespace pipesim::trace_import {

/// What the profiler spends per event it records, in microseconds of CPU time, beyond the work itself.
/// Defaults: measured for torch.profiler with record_shapes and with_stack (PyTorch 2.11, the H100 host of
/// tests/validation/traces; docs/trace-import.md says how). A trace without with_stack has no Python frames;
/// one without record_shapes costs less an op.
struct ProfilerCost {
  double op_us = 5.0;      ///< an op, an annotation, a CUDA runtime or driver call
  double python_us = 2.0;  ///< a Python frame
};

struct HostWait {
  /// Microseconds the GPU idled before each activity of KinetoTrace::gpu (same order), waiting for the CPU
  /// to launch it.
  std::vector<double> before;
  double wait_us = 0;  ///< their sum
  double cpu_us = 0;   ///< the launching threads' time from the first launch to the last, less the profiler's
  double step_us = 0;  ///< the replayed step: the first activity's start to the last one's end
  std::int64_t launches = 0;  ///< calls that put work on the GPU
};

/// Replays `trace` (one step's events: profile_step windows them) as above.
HostWait replay_host(const KinetoTrace& trace, const ProfilerCost& cost);

}  // namespace pipesim::trace_import
