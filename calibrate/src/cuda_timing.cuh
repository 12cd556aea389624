// Timing shared by the CUDA calibration's benchmarks: CUDA events around a loop after a warm-up, the
// per-operation time of each sample. Included only by the module's .cu files.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "pipesim/calibrate/cuda_check.hpp"

namespace pipesim::calibrate {
namespace {

struct Events {
  cudaEvent_t start{}, stop{};
  Events() {
    cuda_check::check(cudaEventCreate(&start), "cudaEventCreate");
    cuda_check::check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  double elapsed_ms() {
    cuda_check::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    cuda_check::check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    return ms;
  }
};

/// Runs `body` (which enqueues one operation on `stream`) `iters` times per sample, `samples` samples after a
/// warm-up, and returns the per-operation time of each sample in seconds.
template <typename Body>
std::vector<double> time_loop(cudaStream_t stream, int iters, int samples, Body&& body) {
  Events ev;
  body();  // warm-up
  cuda_check::check(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> out;
  for (int s = 0; s < samples; ++s) {
    cuda_check::check(cudaEventRecord(ev.start, stream), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) body();
    cuda_check::check(cudaEventRecord(ev.stop, stream), "cudaEventRecord");
    out.push_back(ev.elapsed_ms() * 1e-3 / iters);
  }
  return out;
}

}  // namespace
}  // namespace pipesim::calibrate
