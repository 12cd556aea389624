// Published rates of fused attention kernels on a GPU (a hardware profile's `gpu.attention_kernels`): the
// TFLOP/s a kernel family (flash-attn-2, cudnn, ...) reaches by head dimension and sequence length, as its
// authors benchmark it. A framework names the kernel it runs (its `attention_kernel` setting); a profile
// without that kernel leaves the attention core at the GEMM rate.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pipesim::sim {

/// One benchmarked shape. FLOPs are counted as the FlashAttention benchmarks count them: a causal forward
/// does half of 4 s^2 d per head, and a backward 2.5 times its forward's FLOPs (five matrix products
/// against two).
struct AttentionKernelPoint {
  std::int64_t head_dim = 0;
  std::int64_t seq = 0;
  double forward_tflops = 0;   ///< causal forward
  double backward_tflops = 0;  ///< backward
};

struct AttentionKernelRates {
  std::vector<AttentionKernelPoint> points;  ///< by head_dim, then seq, both increasing
  std::string source;
};

/// A kernel's rates in the FLOPs pipesim counts (for the attention core a backward twice its forward's
/// FLOPs); 0: not known, the GEMM rate.
struct KernelRate {
  double forward_tflops = 0;
  double backward_tflops = 0;
};

/// Backward FLOPs the benchmarks count per backward FLOP pipesim counts (2.5 against 2 forward's worth).
inline constexpr double kBenchmarkedBackwardFlopsRatio = 2.5 / 2.0;

/// The rates at `head_dim` and `seq`: the benchmarked head dimension nearest in ratio (the smaller on a
/// tie), the sequence interpolated in log2 between its points and held at the ends.
KernelRate attention_rate(const AttentionKernelRates& kernel, std::int64_t head_dim, std::int64_t seq);

}  // namespace pipesim::sim
