// What the replay library hands the CUDA replay module (a separate shared object linked against the CUDA
// runtime and cuBLAS, loaded only for `replay --backend cuda`): the plan flattened to plain data, and what
// the module hands back. C++17, no pipesim headers: nvcc compiles the module.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pipesim::replay::cuda_abi {

enum class Work : std::int32_t { kNone, kCompute, kCopy, kCpuAdam, kFixed };

struct Op {
  std::int32_t stream = 0;
  Work work = Work::kNone;
  double flops = 0;                 ///< compute: GEMM FLOPs to run
  double gemm_gflop = 0;            ///< compute: one GEMM's size, picks the square GEMM run without shapes
  std::vector<std::int64_t> gemms;  ///< compute: the plan's shape hints, m, n, k, count per GEMM (scaled)
  std::int64_t copy_bytes = 0;      ///< compute: memory-bound bytes / 2 copied on the device; copy: bytes
  std::int32_t src_gpu = -1, dst_gpu = -1;  ///< copy endpoints: GPU index in the plan, -1 host memory
  std::int64_t fixed_ns = 0;                ///< fixed: busy the stream this long
  std::int64_t params = 0;                  ///< CPU Adam: parameters
  std::int32_t threads = 1;                 ///< CPU Adam: threads
  std::vector<std::int32_t> waits;          ///< ops this one waits for (dependencies, collective peers' deps)
  /// Memory effects on the op's GPU, from its stream-ordered pool: allocated before the op's work, freed
  /// (the GPU's oldest live allocations first) after it.
  std::int64_t alloc_bytes = 0, free_bytes = 0;
};

struct Stream {
  std::int32_t gpu = -1;  ///< plan GPU index the stream runs on; -1: a host stream
};

struct Request {
  std::vector<Stream> streams;
  std::vector<Op> ops;
  std::vector<std::int32_t> issue_order;  ///< a topological order of the ops (dependencies and stream order)
  std::int32_t gpus = 0;
  std::vector<std::int64_t>
      resident_bytes;  ///< per GPU: allocated for the whole run (weights, optimizer state)
  int iterations = 1;
  double timeout_s = 60;
  /// Runs the calibration's CPU Adam over `params` parameters on `threads` threads (host streams' ops).
  void (*cpu_adam)(std::int64_t params, int threads) = nullptr;
};

struct Outcome {
  bool ran = false;
  std::string why_not;
  std::string device;  ///< GPU model(s), driver and runtime versions
  /// Per measured run: start and end of every op in ns from the run's origin.
  std::vector<std::vector<std::int64_t>> start, end;
  /// Per measured run and GPU: the memory pool's high-water mark (bytes in use at its peak).
  std::vector<std::vector<std::int64_t>> peak_bytes;
  std::string timing;  ///< how op times were taken: CUPTI activity records, or CUDA events and why
};

}  // namespace pipesim::replay::cuda_abi

extern "C" void pipesim_cuda_replay_entry(const pipesim::replay::cuda_abi::Request* request,
                                          pipesim::replay::cuda_abi::Outcome* outcome);
