// `pipesim calibrate --from-trace`: what a profiled step says about the GPU it ran on. Every GEMM the
// profiler recorded with its shapes (aten::linear, addmm, mm, bmm: the forward's and the backward's) and the
// GEMM kernels it launched give an achieved rate at that GEMM's size; their medians by size replace the base
// profile's GEMM-efficiency curve over the sizes seen, so that the cost model prices other microbatch sizes,
// sequence lengths and tensor-parallel splits of the same model at rates measured on that GPU.
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

struct TraceFit {
  sim::HardwareProfile profile;
  int gemms = 0;                   ///< GEMM ops the curve was refit from
  std::vector<std::string> notes;  ///< what was taken from the trace, and what could not be
};

/// `base` with its GEMM-efficiency curve refit from the trace's GEMMs at `dtype`'s peak (medians per size,
/// sizes rounded to two significant digits); the rest of `base` kept. Throws InputError naming the trace when
/// it recorded no GEMM with its shapes (record_shapes=True).
TraceFit fit_profile(const KinetoTrace& trace, const sim::HardwareProfile& base, const std::string& dtype,
                     const std::string& name);

}  // namespace pipesim::trace_import
