// What a contiguous range of layers costs for one microbatch, per TP rank: the sums every schedule needs to
// place a stage (FLOPs of each pass, measured times of profiled layers, activation and parameter bytes).
#pragma once

#include <cstdint>
#include <vector>

#include "pipesim/sim/core/time.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "pipesim/sim/workload/rated_work.hpp"

namespace pipesim::sim {

/// bf16 weights and gradients cross PCIe and sit on the GPU at 2 bytes per parameter.
inline constexpr std::int64_t kWeightBytesPerParam = 2, kGradBytesPerParam = 2;
/// Host copy of the optimizer per trained parameter: fp32 master weights, Adam m and v.
inline constexpr std::int64_t kAdamStateBytesPerParam = 12;
/// All of a trained parameter's state on the GPU under mixed-precision Adam.
inline constexpr std::int64_t kGpuTrainingBytesPerParam =
    kWeightBytesPerParam + kGradBytesPerParam + kAdamStateBytesPerParam;

struct RangeCost {
  std::int32_t begin = 0, end = 0;  ///< layers [begin, end)
  double fwd = 0, bwd_in = 0, bwd_w = 0;
  double bwd_w_row = 0;  ///< of bwd_w, the row-parallel GEMMs' (LayerCost::row_bwd_weight_flops)
  double bwd = 0;        ///< both backward passes, summed layer by layer
  double recompute = 0;  ///< what the recompute policy re-runs in the backward
  /// Forward FLOPs of the blocks: what re-running the range from its input checkpoint costs (embedding and
  /// head are not recomputed).
  double checkpoint_recompute = 0;
  /// HBM traffic of the memory-bound kernels of each pass (the backward's all in the input-gradient pass).
  std::int64_t fwd_mem = 0, bwd_mem = 0, recompute_mem = 0, checkpoint_recompute_mem = 0;
  /// Of those, unfused attention's softmax, mask and dropout over the scores (LayerCost::*_score_mem_bytes).
  std::int64_t fwd_score_mem = 0, bwd_score_mem = 0, recompute_score_mem = 0,
               checkpoint_recompute_score_mem = 0;
  double gemm = 0;       ///< FLOP-weighted typical GEMM size, GFLOP per TP rank
  GemmList gemms;        ///< the forward's dense GEMMs per TP rank (blocks and head)
  GemmList block_gemms;  ///< the blocks' share: what re-running from a checkpoint runs
  /// The backward's: input and weight gradients, input gradients only, weight gradients only.
  GemmList bwd_gemms, bwd_input_gemms, bwd_weight_gemms;
  /// MoE experts' share of each pass (per TP rank) and their FLOP-weighted GEMM size.
  double expert_fwd = 0, expert_bwd_in = 0, expert_bwd_w = 0, expert_bwd = 0, expert_recompute = 0,
         expert_checkpoint_recompute = 0, expert_gemm = 0;
  std::int64_t expert_weight_bytes = 0;  ///< streamed by each expert pass (forward, dX, dW, recompute)
  /// Unfused attention's score GEMMs per TP rank: FLOPs as performed (all of them inside the pass totals
  /// above) and the score bytes they move, per pass.
  std::int64_t grad_accum_mem = 0;  ///< accumulating the weight gradients (weight-gradient pass)
  double attn_fwd = 0, attn_bwd_in = 0, attn_recompute = 0;
  /// FP8 recipes: of each pass's FLOPs per TP rank, what stays in 16 bits (LayerCost::wide_*).
  double wide_fwd = 0, wide_bwd_in = 0, wide_bwd_w = 0, wide_recompute = 0, wide_checkpoint_recompute = 0;
  std::int64_t attn_fwd_bytes = 0, attn_bwd_bytes = 0, attn_recompute_bytes = 0;
  /// Kernels at their own rate (flash attention with a benchmarked rate, unaligned GEMMs: LayerCost's
  /// fused_attention_* and unaligned_*): FLOPs per TP rank inside each pass's totals, and the blocks' forward
  /// share for checkpoint recompute.
  RatedWork rated_fwd, rated_bwd_in, rated_bwd_w, rated_recompute, rated_checkpoint_recompute;
  std::int32_t kernels = 0;
  std::int32_t input_grad_extra_kernels = 0;  ///< LayerCost::input_grad_extra_kernels
  Duration host_ns = 0;   ///< the forward's CPU time beyond its kernels' dispatch (LayerCost::host_ns)
  bool profiled = false;  ///< measured times below replace the FLOP-based ones
  Duration fwd_ns = 0, bwd_in_ns = 0, bwd_w_ns = 0, bwd_ns = 0, recompute_ns = 0, checkpoint_recompute_ns = 0;
  std::int64_t stored = 0;  ///< activations kept from forward to backward
  /// Re-materialized while the backward runs: recompute re-runs one layer at a time from its checkpoint, so
  /// the largest layer's, not the sum.
  std::int64_t extra = 0;
  std::int64_t weight_grad_share = 0;  ///< of `stored`, what only the weight-gradient pass still needs
  /// Activations live while the range runs its backward from a checkpoint under flash attention (no s^2
  /// scores), as the offload schedules run it.
  std::int64_t working_bytes = 0;
  std::int64_t tp_bus = 0;  ///< TP collective bus bytes per pass
  std::int32_t tp_collectives = 0;
  /// Context parallelism: the keys and values of one forward over the range's attention layers (cp_layers
  /// of them), per rank (LayerCost::cp_kv_bytes).
  std::int64_t cp_kv = 0;
  std::int32_t cp_layers = 0;
  std::int64_t ep_alltoall = 0;  ///< expert-parallel all-to-all buffers per pass (dispatch + combine)
  std::int32_t ep_alltoalls = 0;
  std::int64_t param_bytes = 0;        ///< weights, gradients and optimizer state on the GPU
  std::int64_t grad_buffer_bytes = 0;  ///< of param_bytes, a framework's extra gradient buffer
  std::int64_t fp8_weight_bytes = 0;   ///< of param_bytes, the FP8 weight copies a step keeps
  std::int64_t step_grad_bytes = 0;    ///< of param_bytes, gradients made by the backward, freed by the step
  std::int64_t params = 0;             ///< all weights
  std::int64_t trainable = 0;          ///< parameters the optimizer updates
  std::int64_t input_bytes = 0;        ///< activation entering the range (its checkpoint)
  std::int64_t output_bytes = 0;       ///< activation leaving the range
  std::int64_t weight_bytes() const { return kWeightBytesPerParam * params; }
  std::int64_t grad_bytes() const { return kGradBytesPerParam * trainable; }
};

/// Sums layers [begin, end) of `layers`; FLOPs and parameters are split over `tp` ranks.
RangeCost range_cost(const std::vector<LayerCost>& layers, std::int32_t begin, std::int32_t end,
                     std::int32_t tp = 1);

}  // namespace pipesim::sim
