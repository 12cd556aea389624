// Per-op selective activation checkpointing as torchtitan runs it (torchtitan/distributed/
// activation_checkpoint.py, SelectiveAC's op policy): within each checkpointed block the outputs of the
// attention kernel and of every other linear layer (the first, third, ...) are saved, everything else
// (the other linears, norms, rotary, activations, residual adds) is recomputed in the backward from them and
// the block's input.
#pragma once

#include "pipesim/sim/workload/kernel_composition.hpp"
#include "pipesim/sim/workload/model.hpp"

namespace pipesim::sim {

struct OpSelectiveRecompute {
  double saved_bytes = 0;      ///< per rank, beyond the block's input: bf16 outputs of the saved ops
  double recompute_flops = 0;  ///< the recomputed linears' forward FLOPs (whole layer, before the TP split)
};

/// For a dense block of `m` over `tokens` tokens whose tensors on one rank are `z`: the linears in the order
/// they run, q, k, v, o, then gate, up, down (SwiGLU) or up, down; MoE experts are not linears here (they
/// are recomputed, as torchtitan's grouped GEMMs are not on the save list).
OpSelectiveRecompute every_other_linear(const ModelSpec& m, const TensorSizes& z, double tokens);

}  // namespace pipesim::sim
