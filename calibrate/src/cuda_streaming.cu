// HBM streaming: what every memory-bound cost of the simulator stands on (hbm_GBps x hbm_efficiency). The
// kernels of a training step that move memory without arithmetic to speak of: a device copy (what the replay
// issues for an op's memory-bound bytes), a bf16 copy and a bf16 residual add (y = x + y) through 16-byte
// vector loads as framework element-wise kernels use them, an fp32 triad (fp32 element-wise math, e.g. an
// upcast norm), and an fp32 sum (a reduction). Arrays from 1 MiB to far beyond the L2 cache; the rates of the
// largest (at least 4x L2) give the profile's efficiency.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda_benchmarks.hpp"
#include "cuda_timing.cuh"
#include "pipesim/calibrate/curve_fit.hpp"
#include "pipesim/calibrate/timed_buffers.cuh"

namespace pipesim::calibrate {

namespace {

using cuda_check::check;

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop: enough to fill every SM several times.
int blocks_for(std::size_t items) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const std::size_t wanted = (items + kThreads - 1) / kThreads;
  return static_cast<int>(std::min<std::size_t>(wanted, static_cast<std::size_t>(std::max(sms, 1)) * 8));
}

// 16-byte vectors: 8 bf16 values each.
__global__ void copy_vec(const uint4* __restrict__ x, uint4* __restrict__ y, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    y[i] = x[i];
}

__global__ void add_bf16(const uint4* __restrict__ x, uint4* __restrict__ y, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    uint4 a = x[i], b = y[i];
    auto* pa = reinterpret_cast<__nv_bfloat162*>(&a);
    auto* pb = reinterpret_cast<__nv_bfloat162*>(&b);
    for (int k = 0; k < 4; ++k) pb[k] = __hadd2(pa[k], pb[k]);
    y[i] = b;
  }
}

__global__ void triad_fp32(const float4* __restrict__ b, const float4* __restrict__ c, float4* __restrict__ a,
                           float s, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const float4 u = b[i], v = c[i];
    a[i] = make_float4(u.x + s * v.x, u.y + s * v.y, u.z + s * v.z, u.w + s * v.w);
  }
}

__global__ void sum_fp32(const float4* __restrict__ x, std::size_t n, float* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  float acc = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const float4 v = x[i];
    acc += v.x + v.y + v.z + v.w;
  }
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

}  // namespace

void measure_streaming(CudaCalibration& c, const CudaOptions& o,
                       const std::function<void(const std::string&)>& progress) {
  check(cudaSetDevice(0), "cudaSetDevice");
  std::size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  // Largest array: at least 4x L2 (and 1 GiB where memory allows), three of them live at once.
  const std::size_t l2 = static_cast<std::size_t>(std::max<std::int64_t>(c.l2_bytes, 1 << 20));
  const std::size_t largest = std::min(std::max(std::size_t{1} << 30, 4 * l2),
                                       free_b / 4 / (std::size_t{1} << 20) * (std::size_t{1} << 20));
  std::vector<std::size_t> sizes;
  for (std::size_t b = std::size_t{1} << 20; b < largest; b *= o.quick ? 16 : 4) sizes.push_back(b);
  sizes.push_back(largest);
  void* x = device_random(largest, 101);
  void* y = device_random(largest, 102);
  void* z = device_random(largest, 103);
  float* total = device_random_fp32(sizeof(float), 104);
  cudaStream_t s{};
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  for (std::size_t bytes : sizes) {
    progress("streaming: " + std::to_string(bytes >> 20) + " MiB arrays");
    const std::size_t vec = bytes / 16;  // 16-byte vectors per array
    const int blocks = blocks_for(vec);
    const int iters = static_cast<int>(std::clamp<std::size_t>((std::size_t{4} << 30) / bytes, 3, 500));
    auto record = [&](const char* kernel, double bytes_moved, const std::vector<double>& secs) {
      std::vector<double> rates;
      for (double v : secs) rates.push_back(bytes_moved / v / 1e9);
      const SampleStats st = summarize(rates);
      c.streaming.push_back({kernel, static_cast<std::int64_t>(bytes), st.median, st.cv, st.samples});
    };
    const auto b = static_cast<double>(bytes);
    record("memcpy", 2 * b, time_loop(s, iters, o.samples, [&] {
             check(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
           }));
    record("copy_bf16", 2 * b, time_loop(s, iters, o.samples, [&] {
             copy_vec<<<blocks, kThreads, 0, s>>>(static_cast<const uint4*>(x), static_cast<uint4*>(y), vec);
           }));
    record("add_bf16", 3 * b, time_loop(s, iters, o.samples, [&] {
             add_bf16<<<blocks, kThreads, 0, s>>>(static_cast<const uint4*>(x), static_cast<uint4*>(y), vec);
           }));
    record("triad_fp32", 3 * b, time_loop(s, iters, o.samples, [&] {
             triad_fp32<<<blocks, kThreads, 0, s>>>(static_cast<const float4*>(x),
                                                    static_cast<const float4*>(y), static_cast<float4*>(z),
                                                    1e-3f, vec);
           }));
    record("sum_fp32", b, time_loop(s, iters, o.samples, [&] {
             sum_fp32<<<blocks, kThreads, 0, s>>>(static_cast<const float4*>(x), vec, total);
           }));
    check(cudaGetLastError(), "streaming kernels");
  }
  cudaStreamDestroy(s);
  for (void* p : {x, y, z, static_cast<void*>(total)}) cudaFree(p);
}

}  // namespace pipesim::calibrate
