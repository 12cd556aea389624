// The quantization passes of an FP8 recipe as Transformer Engine runs them under Megatron-Core: before each
// of a block's GEMMs its 16-bit operands are cast to FP8, rowwise for this GEMM and columnwise (Hopper: a
// transposed copy; Blackwell: the other scaling direction) for the backward's weight gradient, so every cast
// reads 2 B and writes 2 B an element. Where the cast is fused into the norm before a layer (TE's
// LayerNormLinear) only current scaling and MXFP8 pay it, as a pass of its own after the norm
// (transformer_engine/pytorch/csrc/extensions/normalization.cpp: FUSED_NORM_AMAX_FP8, UNFUSED); current
// scaling reads each other tensor once more for its amax first (Float8CurrentScalingQuantizer).
#pragma once

#include <cstdint>

#include "pipesim/sim/workload/cost_model.hpp"
#include "pipesim/sim/workload/model.hpp"
#include "workload/block_traffic.hpp"

namespace pipesim::sim {

struct Fp8CastTraffic {
  std::int64_t forward = 0, backward = 0;  ///< bytes per rank and microbatch
  std::int32_t forward_kernels = 0, backward_kernels = 0;
};

/// One block's casts on one rank (TP and sequence-parallel shards as the block's own kernels): the forward
/// quantizes the inputs of the q/k/v and MLP-up GEMMs (behind a norm) and of the output and MLP-down
/// projections; the backward the output gradients of all four.
Fp8CastTraffic fp8_cast_traffic(const ModelSpec& m, const CostOptions& o);

/// The FP8 copies of `weights` linear weight elements (one rank's) that stay on the GPU through a step: a
/// Transformer Engine linear told which microbatch is the step's first (Megatron-Core's TELinear passes
/// is_first_microbatch unless disable_parameter_transpose_cache) quantizes its weight on that one and keeps
/// the result in its weight workspace for the others (transformer_engine/pytorch/module/base.py
/// quantize_weight, `cache`), rowwise for the forward and columnwise for the input gradient: 2 B an element,
/// and MXFP8's E8M0 scale of every 32 elements in each direction (2/32 B more).
std::int64_t fp8_weight_cache_bytes(std::int64_t weights, Fp8Recipe recipe);

}  // namespace pipesim::sim
