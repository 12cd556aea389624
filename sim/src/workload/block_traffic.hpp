// HBM traffic of a transformer block's memory-bound kernels per TP rank (norms, activations, residual adds,
// biases, unfused attention's score kernels) as the built-in Megatron-Core composition prices them, and a
// framework's own composition in their place (kernel_composition.hpp).
#pragma once

#include <cstdint>

#include "pipesim/sim/workload/cost_model.hpp"

namespace pipesim::sim {

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

/// HBM traffic of one block's memory-bound kernels per TP rank: the forward's, of it `attention` the part
/// selective recompute re-runs (the score path and the context's copy back), and the share of each pass over
/// the scores themselves.
struct BlockTraffic {
  std::int64_t forward = 0, backward = 0, attention = 0, attention_backward = 0;
  std::int64_t scores_forward = 0, scores_backward = 0;
};

/// A memory-bound kernel's backward reads its output gradient and its saved input and writes its input
/// gradient: three accesses where the forward made two.
std::int64_t backward_traffic(std::int64_t forward);

BlockTraffic block_traffic(const ModelSpec& m, const CostOptions& o);

/// A framework's own kernels in place of the built-in ones, pass by pass (unfused attention's score kernels
/// stay the built-in ones).
BlockTraffic with_composition(BlockTraffic b, const LayerKernels& k, const ModelSpec& m,
                              const TensorSizes& sz);

}  // namespace pipesim::sim
