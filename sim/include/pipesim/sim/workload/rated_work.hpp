// Kernels that each run at a published rate of their own (fused attention, unaligned GEMMs): their FLOPs and
// summed time, which an op carries as one rate.
#pragma once

namespace pipesim::sim {

/// FLOPs of kernels that each run at a rate of their own, and their summed time at those rates: the op's
/// kernels at `tflops()` take exactly that time.
struct RatedWork {
  double flops = 0;
  double seconds = 0;
  void add(double kernel_flops, double kernel_tflops) {
    if (kernel_flops <= 0 || kernel_tflops <= 0) return;
    flops += kernel_flops;
    seconds += kernel_flops / (kernel_tflops * 1e12);
  }
  double tflops() const { return seconds > 0 ? flops / seconds / 1e12 : 0; }
  RatedWork operator+(const RatedWork& o) const { return {flops + o.flops, seconds + o.seconds}; }
};

}  // namespace pipesim::sim
