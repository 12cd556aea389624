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

__device__ inline void store(__nv_bfloat16& out, float v) {
  out = __float2bfloat16(v);
}
__device__ inline void store(float& out, float v) {
  out = v;
}

template <class T>
__global__ void fill_random_kernel(T* x, std::size_t n, std::uint64_t seed) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    store(x[i], operand_value(seed, i));
}

/// Device memory of `bytes` holding random values of T; synchronizes the device.
template <class T>
T* device_random_of(std::size_t bytes, std::uint64_t seed) {
  void* p = nullptr;
  cuda_check::check(cudaMalloc(&p, bytes), "cudaMalloc");
  fill_random_kernel<T><<<1024, 256>>>(static_cast<T*>(p), bytes / sizeof(T), seed);
  cuda_check::check(cudaGetLastError(), "fill_random_kernel");
  cuda_check::check(cudaDeviceSynchronize(), "fill_random_kernel");
  return static_cast<T*>(p);
}

/// Device memory of `bytes` (a multiple of 2) holding random bf16 operands; synchronizes the device.
inline void* device_random(std::size_t bytes, std::uint64_t seed) {
  return device_random_of<__nv_bfloat16>(bytes, seed);
}

/// Device memory of `bytes` (a multiple of 4) holding random fp32 values; synchronizes the device.
inline float* device_random_fp32(std::size_t bytes, std::uint64_t seed) {
  return device_random_of<float>(bytes, seed);
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
