// CUDA microbenchmarks: host<->device copies over transfer sizes (pinned and pageable, one direction and both
// at once, every GPU at once), the P2P bandwidth matrix, cuBLAS GEMM throughput on transformer shapes (random
// operands), HBM streaming (copies, element-wise kernels, a reduction, inside and beyond L2), kernel launch
// overhead and event timer resolution, and NCCL collectives over every GPU by message size (nccl-tests style,
// NCCL loaded at run time). Method as in nvbandwidth: warm-up, CUDA-event timing of a loop,
// several samples, median and coefficient of variation. Compiled whenever nvcc is found; without a device (or
// without CUDA at build time) it reports why it did not run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pipesim::calibrate {

struct CopyPoint {
  std::int64_t bytes = 0;
  double GBps = 0;  ///< median
  double cv = 0;
  int samples = 0;
};

struct GemmPoint {
  std::string shape;  ///< block width and GEMM: h4096/qkv, h2048/mlp_up, ..., h4096/lm_head
  std::int64_t m = 0, n = 0, k = 0;
  std::string dtype;  ///< bf16 inputs (fp16 on GPUs before Ampere), fp32 accumulate
  double tflops = 0;  ///< median achieved
  double cv = 0;
  int samples = 0;
};

/// A memory-bound kernel's rate: bytes read plus written per second.
struct StreamPoint {
  std::string kernel;      ///< memcpy, copy_bf16, add_bf16, triad_fp32, sum_fp32
  std::int64_t bytes = 0;  ///< size of one array
  double GBps = 0;         ///< median
  double cv = 0;
  int samples = 0;
};

/// One NCCL collective over `ranks` GPUs at one message size, as nccl-tests reports it: the algorithm
/// bandwidth (the buffer over the time) and the bus bandwidth (algbw times collective_bus_factor, see below).
/// With one rank NCCL copies locally and the bus bandwidth is 0.
struct CollectivePoint {
  std::string op;          ///< all_reduce, all_gather, reduce_scatter
  std::int64_t bytes = 0;  ///< the whole buffer (all_gather's output, reduce_scatter's input), bf16
  int ranks = 0;
  double algbw_GBps = 0;  ///< median
  double busbw_GBps = 0;
  double cv = 0;
  int samples = 0;
};

/// busbw / algbw of a collective over `ranks` GPUs (nccl-tests doc/PERFORMANCE.md: the
/// bandwidth a ring's links carry, comparable with the hardware's): all-reduce 2(n-1)/n,
/// all-gather and reduce-scatter (n-1)/n; 0 for one rank or an unknown collective.
inline double collective_bus_factor(const std::string& op, int ranks) {
  if (ranks < 2) return 0;
  const double n = ranks;
  if (op == "all_reduce") return 2 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter") return (n - 1) / n;
  return 0;
}

/// The kernels measure_streaming times, with the bytes each moves per element of its array's dtype.
inline constexpr const char* kStreamingKernels[] = {"memcpy", "copy_bf16", "add_bf16", "triad_fp32",
                                                    "sum_fp32"};

struct CudaCalibration {
  bool ran = false;
  std::string why_not;  ///< why it did not run (no CUDA at build time, no device, an error)
  int device_count = 0;
  std::string gpu_model;
  std::int64_t memory_bytes = 0;
  std::string driver_version;
  std::string runtime_version;
  std::vector<CopyPoint> h2d_pinned, d2h_pinned, h2d_pageable, d2h_pageable;
  std::vector<CopyPoint> bidir_h2d, bidir_d2h;  ///< both directions at once, device 0
  std::vector<double> all_gpus_h2d_GBps;        ///< per device, every device copying at once
  std::vector<std::vector<double>> p2p_GBps;    ///< [src][dst], 0 on the diagonal
  std::vector<GemmPoint> gemm;
  std::vector<StreamPoint> streaming;  ///< device 0
  std::int64_t l2_bytes = 0;
  double launch_overhead_us = 0;  ///< GPU-side time per kernel, kernels queued (no CPU in the way)
  double host_launch_us = 0;      ///< time per kernel when each waits for the CPU to launch it
  double event_resolution_us = 0;
  double pinned_alloc_ms_per_GiB = 0;
  int samples = 0;
  std::vector<CollectivePoint> collectives;
  std::string collectives_note;  ///< the NCCL library and version measured, or why collectives were not
};

struct CudaOptions {
  bool quick = false;
  int samples = 5;
};

/// True when this build contains the CUDA benchmarks.
bool cuda_compiled();
CudaCalibration run_cuda_calibration(const CudaOptions& options,
                                     const std::function<void(const std::string&)>& progress);
/// Raw measurements as JSON (saved beside a calibrated profile).
std::string cuda_calibration_to_json(const CudaCalibration& c);

}  // namespace pipesim::calibrate
