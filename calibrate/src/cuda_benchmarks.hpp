// The CUDA calibration module's benchmarks, one per .cu file beside cuda_calibration.cu.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "pipesim/calibrate/cuda_calibration.hpp"

namespace pipesim::calibrate {

/// Rates of a copy of `bytes` from per-copy times in seconds (median, coefficient of variation).
CopyPoint copy_point(std::int64_t bytes, const std::vector<double>& seconds);

/// cuBLAS GEMM rates on device 0 at the shapes of transformer blocks of two sizes over token counts.
void measure_gemm(CudaCalibration& c, const CudaOptions& o,
                  const std::function<void(const std::string&)>& progress);

/// HBM streaming on device 0: the memory-bound kernels a training step runs (copies, element-wise ops in
/// bf16 and fp32, a reduction) over arrays from well inside to far beyond the L2 cache.
void measure_streaming(CudaCalibration& c, const CudaOptions& o,
                       const std::function<void(const std::string&)>& progress);

/// NCCL all-reduce, all-gather and reduce-scatter over every GPU by message size, NCCL loaded at run time;
/// without it (or on its error) says why in collectives_note and measures nothing.
void measure_collectives(CudaCalibration& c, const CudaOptions& o,
                         const std::function<void(const std::string&)>& progress);

}  // namespace pipesim::calibrate
