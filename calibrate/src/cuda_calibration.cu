// CUDA microbenchmarks (see cuda_calibration.hpp). Every timing: warm-up, then `samples` samples of a loop
// timed with CUDA events; medians and coefficients of variation go into the profile.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_benchmarks.hpp"
#include "cuda_timing.cuh"
#include "pipesim/calibrate/cuda_calibration.hpp"
#include "pipesim/calibrate/cuda_check.hpp"
#include "pipesim/calibrate/curve_fit.hpp"
#include "pipesim/calibrate/spin_kernel.cuh"
#include "pipesim/calibrate/timed_buffers.cuh"

namespace pipesim::calibrate {

namespace {

using cuda_check::check;
using cuda_check::CudaError;

__global__ void empty_kernel() {}

}  // namespace

CopyPoint copy_point(std::int64_t bytes, const std::vector<double>& seconds) {
  std::vector<double> rates;
  for (double s : seconds) rates.push_back(static_cast<double>(bytes) / s / 1e9);
  SampleStats st = summarize(rates);
  return {bytes, st.median, st.cv, st.samples};
}

namespace {

int iterations_for(std::int64_t bytes) {
  // Enough copies per sample that the loop lasts well beyond the event timer resolution.
  return static_cast<int>(
      std::clamp<std::int64_t>((std::int64_t{256} << 20) / std::max<std::int64_t>(bytes, 1), 2, 2000));
}

void measure_copies(CudaCalibration& c, const CudaOptions& o,
                    const std::function<void(const std::string&)>& progress) {
  check(cudaSetDevice(0), "cudaSetDevice");
  std::size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  std::vector<std::int64_t> sizes;
  const std::int64_t max_bytes =
      std::min<std::int64_t>(std::int64_t{1} << 30, static_cast<std::int64_t>(free_b / 4));
  for (std::int64_t b = 4096; b <= max_bytes; b *= o.quick ? 16 : 4) sizes.push_back(b);
  const std::int64_t big = sizes.back();
  void* dev = device_random(static_cast<std::size_t>(big), 11);
  void* dev2 = device_random(static_cast<std::size_t>(big), 12);
  // Page-locking time alone (the buffers are filled afterwards, outside the timed part).
  auto t0 = std::chrono::steady_clock::now();
  void* pinned = nullptr;
  // timed-buffers: filled by host_fill_random right after its allocation is timed.
  check(cudaHostAlloc(&pinned, static_cast<std::size_t>(big), cudaHostAllocDefault), "cudaHostAlloc");
  double alloc_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  c.pinned_alloc_ms_per_GiB = alloc_s * 1e3 / (static_cast<double>(big) / (1 << 30));
  host_fill_random(pinned, static_cast<std::size_t>(big), 13);
  void* pinned2 = pinned_random(static_cast<std::size_t>(big), 14);
  std::unique_ptr<char[]> pageable(new char[static_cast<std::size_t>(big)]);
  host_fill_random(pageable.get(), static_cast<std::size_t>(big), 15);
  cudaStream_t s1{}, s2{};
  check(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "cudaStreamCreate");
  for (std::int64_t b : sizes) {
    progress("copies: " + std::to_string(b) + " bytes");
    const int it = iterations_for(b);
    const auto sz = static_cast<std::size_t>(b);
    c.h2d_pinned.push_back(copy_point(b, time_loop(s1, it, o.samples, [&] {
                                        cudaMemcpyAsync(dev, pinned, sz, cudaMemcpyHostToDevice, s1);
                                      })));
    c.d2h_pinned.push_back(copy_point(b, time_loop(s1, it, o.samples, [&] {
                                        cudaMemcpyAsync(pinned, dev, sz, cudaMemcpyDeviceToHost, s1);
                                      })));
    c.h2d_pageable.push_back(copy_point(b, time_loop(s1, it, o.samples, [&] {
                                          cudaMemcpyAsync(dev, pageable.get(), sz, cudaMemcpyHostToDevice,
                                                          s1);
                                        })));
    c.d2h_pageable.push_back(copy_point(b, time_loop(s1, it, o.samples, [&] {
                                          cudaMemcpyAsync(pageable.get(), dev, sz, cudaMemcpyDeviceToHost,
                                                          s1);
                                        })));
    // Both directions at once on two streams: each direction timed by its own events.
    std::vector<double> up, down;
    Events e1, e2;
    for (int smp = 0; smp <= o.samples; ++smp) {
      check(cudaEventRecord(e1.start, s1), "rec");
      check(cudaEventRecord(e2.start, s2), "rec");
      for (int i = 0; i < it; ++i) {
        cudaMemcpyAsync(dev, pinned, sz, cudaMemcpyHostToDevice, s1);
        cudaMemcpyAsync(pinned2, dev2, sz, cudaMemcpyDeviceToHost, s2);
      }
      check(cudaEventRecord(e1.stop, s1), "rec");
      check(cudaEventRecord(e2.stop, s2), "rec");
      double a = e1.elapsed_ms() * 1e-3 / it, d = e2.elapsed_ms() * 1e-3 / it;
      if (smp == 0) continue;  // warm-up sample
      up.push_back(a);
      down.push_back(d);
    }
    c.bidir_h2d.push_back(copy_point(b, up));
    c.bidir_d2h.push_back(copy_point(b, down));
  }
  check(cudaGetLastError(), "copies");
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
  cudaFree(dev);
  cudaFree(dev2);
  cudaFreeHost(pinned);
  cudaFreeHost(pinned2);
}

void measure_all_gpus(CudaCalibration& c, const CudaOptions& o) {
  const std::size_t bytes = std::size_t{256} << 20;
  std::vector<void*> dev(static_cast<std::size_t>(c.device_count)), host(dev.size());
  std::vector<cudaStream_t> streams(dev.size());
  std::vector<std::unique_ptr<Events>> ev;
  for (int d = 0; d < c.device_count; ++d) {
    check(cudaSetDevice(d), "cudaSetDevice");
    dev[static_cast<std::size_t>(d)] = device_random(bytes, 20 + static_cast<std::uint64_t>(d));
    host[static_cast<std::size_t>(d)] =
        pinned_random(bytes, 40 + static_cast<std::uint64_t>(d), cudaHostAllocPortable);
    check(cudaStreamCreateWithFlags(&streams[static_cast<std::size_t>(d)], cudaStreamNonBlocking),
          "cudaStreamCreate");
    ev.push_back(std::make_unique<Events>());
  }
  std::vector<std::vector<double>> rates(dev.size());
  const int it = 8;
  for (int smp = 0; smp <= o.samples; ++smp) {
    for (int d = 0; d < c.device_count; ++d) {
      auto i = static_cast<std::size_t>(d);
      check(cudaSetDevice(d), "cudaSetDevice");
      check(cudaEventRecord(ev[i]->start, streams[i]), "rec");
      for (int k = 0; k < it; ++k)
        cudaMemcpyAsync(dev[i], host[i], bytes, cudaMemcpyHostToDevice, streams[i]);
      check(cudaEventRecord(ev[i]->stop, streams[i]), "rec");
    }
    for (int d = 0; d < c.device_count; ++d) {
      auto i = static_cast<std::size_t>(d);
      check(cudaSetDevice(d), "cudaSetDevice");
      double s = ev[i]->elapsed_ms() * 1e-3 / it;
      if (smp > 0) rates[i].push_back(static_cast<double>(bytes) / s / 1e9);
    }
  }
  for (int d = 0; d < c.device_count; ++d) {
    auto i = static_cast<std::size_t>(d);
    c.all_gpus_h2d_GBps.push_back(summarize(rates[i]).median);
    check(cudaSetDevice(d), "cudaSetDevice");
    ev[i].reset();
    cudaStreamDestroy(streams[i]);
    cudaFree(dev[i]);
    cudaFreeHost(host[i]);
  }
}

void measure_p2p(CudaCalibration& c, const CudaOptions& o) {
  const std::size_t bytes = std::size_t{256} << 20;
  const auto n = static_cast<std::size_t>(c.device_count);
  c.p2p_GBps.assign(n, std::vector<double>(n, 0.0));
  std::vector<void*> buf(n);
  for (int d = 0; d < c.device_count; ++d) {
    check(cudaSetDevice(d), "cudaSetDevice");
    buf[static_cast<std::size_t>(d)] = device_random(bytes, 60 + static_cast<std::uint64_t>(d));
    for (int p = 0; p < c.device_count; ++p) {
      int can = 0;
      if (p != d && cudaDeviceCanAccessPeer(&can, d, p) == cudaSuccess && can)
        cudaDeviceEnablePeerAccess(p, 0);
    }
  }
  cudaGetLastError();  // peer access already enabled is not an error here
  for (int src = 0; src < c.device_count; ++src) {
    check(cudaSetDevice(src), "cudaSetDevice");
    cudaStream_t s{};
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    for (int dst = 0; dst < c.device_count; ++dst) {
      if (src == dst) continue;
      auto secs = time_loop(s, 4, o.samples, [&] {
        cudaMemcpyPeerAsync(buf[static_cast<std::size_t>(dst)], dst, buf[static_cast<std::size_t>(src)], src,
                            bytes, s);
      });
      c.p2p_GBps[static_cast<std::size_t>(src)][static_cast<std::size_t>(dst)] =
          copy_point(static_cast<std::int64_t>(bytes), secs).GBps;
    }
    cudaStreamDestroy(s);
  }
  for (int d = 0; d < c.device_count; ++d) {
    cudaSetDevice(d);
    cudaFree(buf[static_cast<std::size_t>(d)]);
  }
}

void measure_launch(CudaCalibration& c, const CudaOptions& o) {
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t s{};
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  // The host's issue rate: empty kernels launched back to back, each waiting for the CPU to launch it.
  auto secs = time_loop(s, 1000, o.samples, [&] { empty_kernel<<<1, 1, 0, s>>>(); });
  check(cudaGetLastError(), "empty kernel");
  c.host_launch_us = summarize(secs).median * 1e6;
  // The GPU's own cost per kernel: the same kernels all queued behind a 20 ms spin, timed from the spin's end
  // to the last one's end. This is the gap between kernels of a stream the CPU keeps ahead of.
  Events ev;
  constexpr int kQueued = 1000;
  std::vector<double> gpu_side;
  for (int smp = 0; smp <= o.samples; ++smp) {
    spin_kernel<<<1, 1, 0, s>>>(20'000'000);
    check(cudaEventRecord(ev.start, s), "rec");
    for (int i = 0; i < kQueued; ++i) empty_kernel<<<1, 1, 0, s>>>();
    check(cudaEventRecord(ev.stop, s), "rec");
    const double ms = ev.elapsed_ms();
    if (smp > 0) gpu_side.push_back(ms * 1e-3 / kQueued);  // the first sample warms up
  }
  check(cudaGetLastError(), "queued kernels");
  c.launch_overhead_us = summarize(gpu_side).median * 1e6;
  // Event timer resolution: the smallest non-zero interval two back-to-back events report.
  double best = 1e9;
  for (int i = 0; i < 200; ++i) {
    check(cudaEventRecord(ev.start, s), "rec");
    check(cudaEventRecord(ev.stop, s), "rec");
    double ms = ev.elapsed_ms();
    if (ms > 0) best = std::min(best, ms);
  }
  c.event_resolution_us = best < 1e9 ? best * 1e3 : 0;
  cudaStreamDestroy(s);
}

}  // namespace

namespace {
CudaCalibration run_on_device(const CudaOptions& o, const std::function<void(const std::string&)>& progress) {
  CudaCalibration c;
  c.samples = o.samples;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    c.why_not = std::string("no CUDA device: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return c;
  }
  try {
    c.device_count = count;
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    c.gpu_model = prop.name;
    c.l2_bytes = prop.l2CacheSize;
    c.memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    c.driver_version = std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10);
    c.runtime_version = std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10);
    progress("launch overhead and event resolution");
    measure_launch(c, o);
    measure_copies(c, o, progress);
    progress("all GPUs copying at once");
    measure_all_gpus(c, o);
    progress("P2P matrix");
    measure_p2p(c, o);
    measure_gemm(c, o, progress);
    measure_streaming(c, o, progress);
    try {  // the other figures stand without them
      measure_collectives(c, o, progress);
    } catch (const CudaError& err) {
      c.collectives_note = std::string("collectives not measured: ") + err.what();
    }
    c.ran = true;
  } catch (const CudaError& err) {
    c.ran = false;
    c.why_not = err.what();
  }
  return c;
}

}  // namespace

}  // namespace pipesim::calibrate

// The entry point the calibrate library finds with dlsym: the simulator never loads CUDA itself.
extern "C" void pipesim_cuda_calibration_entry(const pipesim::calibrate::CudaOptions* options,
                                               const std::function<void(const std::string&)>* progress,
                                               pipesim::calibrate::CudaCalibration* out) {
  *out = pipesim::calibrate::run_on_device(*options, *progress);
}
