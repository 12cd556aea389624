// Buffers for timed CUDA work (the calibration's GEMMs, copies and streams; the replay's operands and copy
// buffers): allocated here and filled with operand_values, never left constant or zero (see
// operand_values.hpp). Every timed allocation of the CUDA modules goes through these functions; a test
// (scripts/check-timed-buffers.py) refuses raw allocations elsewhere. Included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "pipesim/calibrate/cuda_check.hpp"
#include "pipesim/calibrate/operand_values.hpp"

namespace pipesim::calibrate {
// Internal linkage: each .cu of a module that includes this gets its own copy of the kernels.
namespace {

__global__ void fill_random_bf16_kernel(__nv_bfloat16* x, std::size_t n, std::uint64_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    x[i] = __float2bfloat16(operand_value(seed, i));
}

__global__ void fill_random_fp32_kernel(float* x, std::size_t n, std::uint64_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    x[i] = operand_value(seed, i);
}

/// Device memory of `bytes` (a multiple of 2) holding random bf16 operands; synchronizes the device.
inline void* device_random(std::size_t bytes, std::uint64_t seed) {
  void* p = nullptr;
  cuda_check::check(cudaMalloc(&p, bytes), "cudaMalloc");
  fill_random_bf16_kernel<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p), bytes / 2, seed);
  cuda_check::check(cudaGetLastError(), "fill_random_bf16_kernel");
  cuda_check::check(cudaDeviceSynchronize(), "fill_random_bf16_kernel");
  return p;
}

/// Device memory of `bytes` (a multiple of 4) holding random fp32 values; synchronizes the device.
inline float* device_random_fp32(std::size_t bytes, std::uint64_t seed) {
  void* p = nullptr;
  cuda_check::check(cudaMalloc(&p, bytes), "cudaMalloc");
  fill_random_fp32_kernel<<<1024, 256>>>(static_cast<float*>(p), bytes / 4, seed);
  cuda_check::check(cudaGetLastError(), "fill_random_fp32_kernel");
  cuda_check::check(cudaDeviceSynchronize(), "fill_random_fp32_kernel");
  return static_cast<float*>(p);
}

/// Fills host memory with random bf16 operands.
inline void host_fill_random(void* p, std::size_t bytes, std::uint64_t seed) {
  auto* x = static_cast<std::uint16_t*>(p);
  for (std::size_t i = 0; i < bytes / 2; ++i) {
    const float v = operand_value(seed, i);
    std::uint32_t bits = 0;
    static_assert(sizeof(bits) == sizeof(v));
    __builtin_memcpy(&bits, &v, sizeof(v));
    x[i] = static_cast<std::uint16_t>(bits >> 16);
  }
}

/// Pinned (page-locked) host memory of `bytes` holding random bf16 operands; `flags` as cudaHostAlloc's.
inline void* pinned_random(std::size_t bytes, std::uint64_t seed, unsigned flags = cudaHostAllocDefault) {
  void* p = nullptr;
  cuda_check::check(cudaHostAlloc(&p, bytes, flags), "cudaHostAlloc");
  host_fill_random(p, bytes, seed);
  return p;
}

}  // namespace
}  // namespace pipesim::calibrate
