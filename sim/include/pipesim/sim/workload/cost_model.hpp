// Cost model: turns a model (or a profiled workload) into per-layer costs for one microbatch: FLOPs of the
// forward, backward-input and backward-weight passes, parameters, stored activations under a recompute
// policy, boundary bytes for pipeline p2p and TP collective bytes. Layers are: embedding, each transformer
// block, and the head (final norm + LM head + loss) as its own layer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipesim/sim/core/time.hpp"
#include "pipesim/sim/hardware/attention_kernels.hpp"
#include "pipesim/sim/workload/gemm_shape.hpp"
#include "pipesim/sim/workload/kernel_composition.hpp"
#include "pipesim/sim/workload/model.hpp"

namespace pipesim::sim {

enum class Recompute { kNone, kSelective, kFull };
enum class LayerRole { kEmbedding, kBlock, kHead };
/// How attention runs: kUnfused materializes the a x s x s scores (a softmax kernel, and a dropout kernel
/// when dropout is on, read and write them, as Megatron-LM did before flash attention); kFlash keeps them on
/// chip.
enum class AttentionKernel { kUnfused, kFlash };
/// How a step's microbatches accumulate weight gradients: inside the weight-gradient GEMM into the fp32
/// gradient buffer (gradient-accumulation fusion, current Megatron-LM); as Megatron-LM's local DDP did
/// before that fusion, each backward's 16-bit gradients added into fp32 main gradients (read 2 + 4, write
/// 4: 10 B per parameter per microbatch); or as PyTorch autograd does, into the 16-bit `.grad` (read 2 + 2,
/// write 2: 6 B).
enum class GradAccumulation { kFused, kMainGrad, kAutograd };
/// Where biases and their gradients are computed. kFused: a bias is added in its GEMM's epilogue and its
/// gradient in the weight-gradient GEMM's (Transformer Engine): no traffic of their own. kSeparate:
/// Megatron-LM's linear layers before Transformer Engine (2021-2022): the q/k/v projection of a [s, b, h]
/// input is a matmul and then a bias add of its own (the other biases ride in the fused bias-GELU and
/// bias-dropout-add kernels), and every bias gradient is a reduction over its output's gradient.
enum class BiasKernels { kFused, kSeparate };
/// How a norm's backward runs. kOnePass: the input gradient and the weight (and bias) gradient's partial
/// sums from one read of the input and the output gradient (persistent layer norm, Transformer Engine).
/// kTwoPass: one kernel reads them for the weight gradient, another reads them again for the input gradient
/// (Megatron-LM's fused layer norm before its persistent kernel of late 2021, PyTorch's layer norm).
enum class NormBackward { kOnePass, kTwoPass };
/// How context-parallel attention gets the other ranks' keys and values: passed round a ring block by block,
/// each step's transfer overlapping the attention on the block before (ring attention, Transformer Engine's
/// p2p); or all-gathered before the attention and their gradients reduce-scattered after it (Llama 3).
enum class CpAttention { kRing, kAllGather };
const char* to_string(CpAttention a);
const char* to_string(AttentionKernel a);

const char* to_string(GradAccumulation g);
/// HBM bytes per trained parameter that accumulating one microbatch's weight gradients moves.
std::int64_t grad_accumulation_bytes_per_param(GradAccumulation g);
const char* to_string(Recompute r);
const char* to_string(LayerRole r);

struct LayerCost {
  LayerRole role = LayerRole::kBlock;
  // Per microbatch, whole layer (before the TP split).
  double fwd_flops = 0;
  double bwd_input_flops = 0;
  double bwd_weight_flops = 0;
  /// Of bwd_weight_flops, the row-parallel GEMMs' (attention output and MLP down projections): in a layer's
  /// backward they run before the column-parallel layers', whose weight gradients alone hide the
  /// asynchronous all-reduce of those layers' input gradients.
  double row_bwd_weight_flops = 0;
  double recompute_flops = 0;    ///< re-run in the backward under the recompute policy
  double gemm_gflop = 0;         ///< a typical GEMM of the layer, per TP rank
  std::vector<GemmShape> gemms;  ///< the forward's dense GEMMs per TP rank (not the experts')
  std::int32_t kernels = 0;      ///< kernel launches of the forward
  /// Launches the input-gradient pass adds beyond the forward's (CostOptions::tp_shard_first_gemms): the
  /// backward otherwise launches the forward's kernels once per gradient it computes.
  std::int32_t input_grad_extra_kernels = 0;
  /// CPU time the forward's issuing takes beyond its kernels' dispatch: its TP collectives' calls into the
  /// framework's communication library (CostOptions::tp_collective_host_ns).
  Duration host_ns = 0;
  // Measured times of a profiled workload (>= 0 replace the FLOP-based times).
  Duration fwd_ns = -1, bwd_input_ns = -1, bwd_weight_ns = -1, recompute_ns = -1;
  std::int64_t params = 0;            ///< whole layer
  std::int64_t trainable_params = 0;  ///< updated by the optimizer (all, or the LoRA adapters)
  std::int64_t param_bytes = 0;       ///< weights + grads + optimizer state per TP rank
  /// Of a tied head's param_bytes, its copy of the embedding matrix: a stage holding the embedding too holds
  /// the matrix once.
  std::int64_t tied_copy_bytes = 0;
  /// Of param_bytes, a framework's extra gradient buffer (KernelComposition::grad_buffer_bytes_per_param),
  /// kept whole whatever the data-parallel sharding.
  std::int64_t grad_buffer_bytes = 0;
  /// Of param_bytes, the FP8 copies of the block's linear weights Transformer Engine keeps from a step's
  /// first microbatch to its last (fp8_weight_cache_bytes), kept whole whatever the data-parallel sharding.
  std::int64_t fp8_weight_bytes = 0;
  /// Of param_bytes, the gradients a step makes in its backward and frees after its optimizer step
  /// (PyTorch's zero_grad(set_to_none=True)): absent while the next forward's activations build up.
  std::int64_t step_grad_bytes = 0;
  std::int64_t attention_score_bytes = 0;    ///< the 5 a s^2 b / t part (absent with flash attention)
  std::int64_t stored_activation_bytes = 0;  ///< per TP rank, kept from forward to backward
  std::int64_t recompute_extra_bytes = 0;    ///< re-materialized during the backward (freed with it)
  std::int64_t output_bytes = 0;             ///< boundary activation sent to the next stage, per TP rank
  std::int64_t tp_bus_bytes = 0;    ///< TP collective bus bytes per GPU per forward (same in backward)
  std::int32_t tp_collectives = 0;  ///< TP collectives per forward
  // MoE experts run as grouped GEMMs over the tokens routed to each: their share of each pass's FLOPs (before
  // the TP split), the size of one grouped GEMM per TP rank, and the expert weights (or weight gradients) a
  // pass streams per TP rank. With few tokens per expert the pass is bound by those bytes, not the FLOPs.
  double expert_fwd_flops = 0, expert_bwd_input_flops = 0, expert_bwd_weight_flops = 0;
  double expert_recompute_flops = 0;
  double expert_gemm_gflop = 0;
  std::int64_t expert_weight_bytes = 0;
  /// Expert parallelism: the busiest rank's expert work over the average (load imbalance, >= 1; the
  /// all-to-all waits for it), and the tokens' dispatch plus combine all-to-all buffers of one pass per TP
  /// rank (the same again for the gradients in the backward).
  double expert_imbalance = 1;
  // Unfused attention (scores in HBM): the score GEMMs compute all s x s scores (the causal mask is applied
  // afterwards), and write or read each score (2 B) once per GEMM: QK^T and AV in the forward, four in the
  // backward. These FLOPs as performed (before the TP split) and bytes per TP rank; the score GEMMs take the
  // longer of the two. Zero with flash attention, which skips masked blocks and keeps the scores on chip.
  double attention_fwd_flops = 0, attention_bwd_flops = 0, attention_recompute_flops = 0;
  double attention_masked_flops = 0;  ///< of attention_fwd_flops, the masked half not in fwd_flops
  std::int64_t attention_fwd_bytes = 0, attention_bwd_bytes = 0;
  /// Flash attention with a published rate on this GPU (CostOptions::attention_rate): the attention core's
  /// FLOPs per pass (as performed, before the TP split; inside the pass totals) and the kernel's rates.
  double fused_attention_fwd_flops = 0, fused_attention_bwd_flops = 0, fused_attention_recompute_flops = 0;
  KernelRate fused_attention_rate{};
  /// The output head's GEMMs when its vocabulary shard is not a multiple of 8
  /// (CostOptions::unaligned_gemm_rate): FLOPs per pass as performed (before the TP split; inside the pass
  /// totals) and the unaligned kernels' rates.
  double unaligned_fwd_flops = 0, unaligned_bwd_input_flops = 0, unaligned_bwd_weight_flops = 0;
  KernelRate unaligned_gemm_rate{};
  std::int64_t ep_alltoall_bytes = 0;
  std::int32_t ep_alltoalls = 0;  ///< all-to-alls per pass
  /// Context parallelism: this rank's keys and values of one forward (bf16, per TP rank): what it passes
  /// round the context-parallel ring, or contributes to the all-gather, cp - 1 times per pass (0: no CP).
  std::int64_t cp_kv_bytes = 0;
  // HBM traffic of the memory-bound kernels per TP rank (norms, activation functions, dropout, residual adds,
  // softmax over materialized scores, the loss), priced at the GPU's streaming bandwidth. The backward's
  // belongs to the input-gradient pass; the weight-gradient pass is GEMMs only.
  std::int64_t fwd_mem_bytes = 0;
  std::int64_t bwd_mem_bytes = 0;
  /// Adding this microbatch's weight gradients into the step's accumulated ones (weight-gradient pass).
  std::int64_t grad_accum_bytes = 0;
  std::int64_t recompute_mem_bytes = 0;
  /// Of the three above, unfused attention's softmax, mask and dropout over the scores (timed at the GPU's
  /// unfused_attention_efficiency).
  std::int64_t fwd_score_mem_bytes = 0, bwd_score_mem_bytes = 0, recompute_score_mem_bytes = 0;
  /// FP8 recipes (CostOptions::fp8): of each pass's FLOPs (before the TP split), what stays in 16 bits, the
  /// flash attention core and the output head (unfused attention's score GEMMs are separate above).
  double wide_fwd_flops = 0, wide_bwd_input_flops = 0, wide_bwd_weight_flops = 0, wide_recompute_flops = 0;
};

/// A block's stored activations in Korthikanti's count are 34 s*b*h bytes; 14 of them (the inputs of the
/// linear layers) are only needed by the weight-gradient pass, so a split backward frees 20 with B and 14
/// with W.
inline constexpr std::int64_t kActivationUnits = 34, kWeightGradActivationUnits = 14;

/// Bytes of a layer's stored activations that a deferred weight-gradient pass still holds (blocks only).
inline std::int64_t weight_grad_activation_bytes(const LayerCost& l) {
  return l.role == LayerRole::kBlock
             ? l.stored_activation_bytes * kWeightGradActivationUnits / kActivationUnits
             : 0;
}

/// How Transformer Engine scales FP8 operands (Megatron-Core's --fp8-recipe): delayed (a per-tensor scale
/// from the amax history, computed while casting), tensorwise (current per-tensor scaling: the amax of each
/// tensor first, then the cast) or mxfp8 (Blackwell's 1x32 block scaling).
enum class Fp8Recipe : std::uint8_t { kDelayed, kTensorwise, kMxfp8 };

struct CostOptions {
  std::int64_t microbatch_size = 1;
  std::int64_t seq = 2048;
  std::int32_t tp = 1;
  Recompute recompute = Recompute::kNone;
  /// Bytes per parameter resident on the GPU: bf16 weight + bf16 grad + fp32 master, m, v (mixed-precision
  /// Adam).
  std::int64_t bytes_per_param = 16;
  /// LoRA rank (0: full fine-tuning). Adapters on every block matrix (q, k, v, o and the MLP): frozen weights
  /// stay (bf16, no gradients or optimizer state), adapters are trained.
  std::int64_t lora_rank = 0;
  AttentionKernel attention = AttentionKernel::kUnfused;
  /// Flash attention's rates on this GPU for the framework's kernel at this head dimension and sequence
  /// (0: not published, the GEMM rate).
  KernelRate attention_rate{};
  /// The GPU's rate for GEMMs with a dimension that is not a multiple of 8 (HardwareProfile's unaligned_gemm;
  /// 0: the GEMM curve): the output head's when its vocabulary shard is unaligned.
  KernelRate unaligned_gemm_rate{};
  /// Sequence parallelism: norms, dropout and residual adds work on s/t of the sequence per TP rank (Megatron
  /// since 2022); without it every TP rank runs them on the whole sequence.
  bool sequence_parallel = true;
  bool dropout =
      false;  ///< dropout on attention probabilities and both residual branches (GPT-style training)
  /// MoE expert parallelism: experts split over `ep` data-parallel ranks, tokens exchanged by all-to-all;
  /// `moe_imbalance`: the busiest rank's routed tokens over the average (1: perfectly balanced).
  std::int32_t ep = 1;
  double moe_imbalance = 1;
  GradAccumulation grad_accumulation = GradAccumulation::kFused;
  BiasKernels bias_kernels = BiasKernels::kFused;
  NormBackward norm_backward = NormBackward::kOnePass;
  /// An FP8 recipe (Transformer Engine style): the blocks' GEMMs in FP8, the attention core and the output
  /// head in 16 bits (LayerCost::wide_*), their operands quantized as `fp8_recipe` does (fp8_casts.hpp).
  bool fp8 = false;
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  /// Document masking: documents of this many tokens on average packed into each sequence, attention only
  /// within a document (0: the whole sequence). Kernels that skip masked blocks (flash attention) do that
  /// much less attention work; unfused attention computes every score anyway.
  std::int64_t doc_tokens = 0;
  /// Context parallelism: each sequence split over `cp` ranks (2 cp chunks, rank r holding chunks r and
  /// 2cp-1-r, so causal attention is balanced): every per-token cost and activation on s/cp tokens, each
  /// query still attending over the whole sequence's keys.
  std::int32_t cp = 1;
  /// The framework's own element-wise kernels and saved tensors, where its file states them (null: the
  /// built-in Megatron-Core composition: fused bf16 kernels).
  std::shared_ptr<const KernelComposition> composition{};
  /// CPU time to issue one forward TP collective pair beyond the kernel dispatch its launches already cost
  /// (Framework::host_collective_us; 0: none).
  Duration tp_collective_host_ns = 0;
  /// The TP linears compute the local rows first while the all-gather runs, then the gathered rows before
  /// and after them (Framework::tp_async_gemms shard-first, with asynchronous TP under sequence
  /// parallelism): each column linear's forward GEMM and each row linear's input-gradient GEMM is split
  /// three ways (two on the group's end ranks).
  bool tp_shard_first_gemms = false;
  /// Selective recompute as torchtitan's per-op policy runs it (Framework::selective_recompute
  /// every-other-linear, selective_ops.hpp), not Megatron's attention core.
  bool selective_every_other_linear = false;
};

/// Bytes a memory-bound kernel moves per element: 2 B activations (bf16/fp16), read once and written once.
inline constexpr std::int64_t kReadWriteBytes = 4;

/// HBM bytes one GPU optimizer step moves per parameter it updates, step by step as Megatron-LM's
/// mixed-precision optimizer runs them with 16-bit gradients: copy the gradient into the fp32 main gradient
/// (2 + 4), with fp16 unscale it and check for inf/NaN (4 + 4), read it for the clipping norm (4), Adam
/// (read param, grad, m, v: 16; write param, m, v: 12), copy the fp32 param to the 16-bit model (4 + 2),
/// zero the 16-bit gradient (2). fp16: 54, bf16: 46; fp32 training has no copies: 4 + 28 + 4 = 36.
std::int64_t optimizer_step_bytes_per_param(const std::string& dtype);

/// Per-layer costs of a transformer: [embedding, block 0 .. block L-1, head].
std::vector<LayerCost> model_layer_costs(const ModelSpec& model, const CostOptions& options);

/// Forward FLOPs per token of one transformer block at sequence length `seq` (causal attention).
double block_forward_flops_per_token(const ModelSpec& model, std::int64_t block, std::int64_t seq);
/// Parameters of one transformer block.
std::int64_t block_params(const ModelSpec& model);

}  // namespace pipesim::sim
