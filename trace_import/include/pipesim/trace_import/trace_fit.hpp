// `pipesim calibrate --from-trace`: what a profiled step says about the GPU it ran on. Every GEMM the
// profiler recorded with its shapes (aten::linear, addmm, mm, bmm: the forward's and the backward's) and the
// GEMM kernels it launched give an achieved rate at that GEMM's size; their medians by size replace the base
// profile's GEMM-efficiency curve over the sizes seen. The element-wise ops whose bytes their shapes tell
// (casts, copies, adds, multiplies) and the one kernel each launched give the rate the GPU streams at. So the
// cost model prices other microbatch sizes, sequence lengths and tensor-parallel splits of the same model at
// rates measured on that GPU.
#pragma once

#include <string>
#include <vector>

#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/trace_import/kineto_trace.hpp"

namespace pipesim::trace_import {

/// One recorded GEMM: its FLOPs and the time of the GEMM kernels launched inside it.
struct GemmTiming {
  double flops = 0;
  double gpu_us = 0;
};

/// The trace's GEMMs that launched a GEMM kernel, outermost ops only (a linear's own mm is the linear's),
/// with every matrix dimension a multiple of 8: an unaligned GEMM (an odd vocabulary's output layer) runs
/// cuBLAS's alignment-1 kernels, which profiles rate apart (unaligned_gemm_tflops).
std::vector<GemmTiming> gemm_timings(const KinetoTrace& trace);

/// One element-wise op (StreamingOp) that launched exactly one kernel, an element-wise one or a copy: the
/// bytes it moved and that kernel's time.
struct StreamingTiming {
  double bytes = 0;
  double gpu_us = 0;
};

/// The trace's element-wise ops that launched one element-wise kernel each, by the innermost such op whose
/// span holds the launch.
std::vector<StreamingTiming> streaming_timings(const KinetoTrace& trace);

/// Only ops moving at least this many bytes rate the streaming: at 3 TB/s they run 5.6 us and more, so a
/// kernel's fixed start (1 to 2 us) does not dominate them.
inline constexpr double kStreamingMinBytes = 16.0 * (1 << 20);
/// Fewer such ops than this leave the base profile's streaming rate in place.
inline constexpr int kStreamingMinOps = 8;

struct TraceFit {
  sim::HardwareProfile profile;
  int gemms = 0;                   ///< GEMM ops the curve was refit from
  int streaming_ops = 0;           ///< element-wise ops the streaming rate was fit from (0: not fit)
  double streaming_GBps = 0;       ///< what those ops streamed at
  double host_dispatch_us = 0;     ///< the CPU's time a launch, without the profiler's own (0: none found)
  std::vector<std::string> notes;  ///< what was taken from the trace, and what could not be
};

/// `base` with its GEMM-efficiency curve refit from the trace's GEMMs at `dtype`'s peak (medians per size,
/// sizes rounded to two significant digits) and its streaming efficiency (hbm_efficiency) from the
/// element-wise ops' bytes over their kernels' time, all ops of kStreamingMinBytes and more together. Those
/// kernels are the traced framework's: `elementwise_share` is the share of the GPU's streaming rate its
/// element-wise kernels reach (the framework file's elementwise_efficiency, 1 for one that states none), so
/// the profile's own rate is theirs over that share. The rest of `base` kept. Throws InputError naming the
/// trace when it recorded no GEMM with its shapes (record_shapes=True).
TraceFit fit_profile(const KinetoTrace& trace, const sim::HardwareProfile& base, const std::string& dtype,
                     const std::string& name, double elementwise_share = 1.0);

}  // namespace pipesim::trace_import
