#include "pipesim/sim/workload/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "core/json_reader.hpp"
#include "pipesim/sim/core/error.hpp"
#include "workload/block_traffic.hpp"
#include "workload/fp8_casts.hpp"
#include "workload/selective_ops.hpp"

namespace pipesim::sim {

using detail::json;
using detail::JsonObject;

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

const char* to_string(GradAccumulation g) {
  switch (g) {
    case GradAccumulation::kFused:
      return "fused";
    case GradAccumulation::kMainGrad:
      return "main-grad";
    case GradAccumulation::kAutograd:
      return "autograd";
  }
  return "?";
}

std::int64_t grad_accumulation_bytes_per_param(GradAccumulation g) {
  switch (g) {
    case GradAccumulation::kFused:
      return 0;
    case GradAccumulation::kMainGrad:
      return 2 + 4 + 4;
    case GradAccumulation::kAutograd:
      return 2 + 2 + 2;
  }
  return 0;
}

const char* to_string(CpAttention a) {
  return a == CpAttention::kRing ? "ring" : "allgather";
}

const char* to_string(AttentionKernel a) {
  return a == AttentionKernel::kFlash ? "flash" : "unfused";
}

const char* to_string(LayerRole r) {
  switch (r) {
    case LayerRole::kEmbedding:
      return "embedding";
    case LayerRole::kBlock:
      return "block";
    case LayerRole::kHead:
      return "head";
  }
  return "?";
}

namespace {

// Activation bytes a GPT block saves per s*b*h element ("Reducing Activation Recomputation in Large
// Transformer Models", 16-bit activations): 34 in all, of which the two norms' inputs and the two dropout
// masks (10) are what sequence parallelism splits and the rest (24) what tensor parallelism splits anyway.
constexpr std::int64_t kSavedBytesPerSbh = 34;
constexpr std::int64_t kSequenceParallelBytesPerSbh = 10;
constexpr std::int64_t kTensorParallelBytesPerSbh = kSavedBytesPerSbh - kSequenceParallelBytesPerSbh;

// Weight-GEMM FLOPs per token of a block (2 x multiply-adds of every weight matrix a token meets).
double block_gemm_flops_per_token(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.heads * m.head_dim);
  const double kv = static_cast<double>(m.kv_heads * m.head_dim);
  double attn = h * q + 2 * h * kv + q * h;
  double mlp;
  if (m.is_moe()) {
    mlp = static_cast<double>(m.experts_per_token) * 3.0 * h * static_cast<double>(m.moe_ffn_hidden) +
          h * static_cast<double>(m.num_experts);  // experts + router
  } else {
    mlp = (m.mlp == MlpKind::kSwiGlu ? 3.0 : 2.0) * h * static_cast<double>(m.ffn_hidden);
  }
  return 2.0 * (attn + mlp);
}

// Average keys a query attends to: all of them in an encoder, half under causal attention (fewer with a
// sliding window). With document masking (documents of `doc` tokens packed into the sequence, 0: none) a
// query sees only its own document: the same counts over a document instead of the sequence.
double attended_keys(const ModelSpec& m, std::int64_t block, std::int64_t seq, std::int64_t doc) {
  const std::int64_t span = doc > 0 && doc < seq ? doc : seq;  // the tokens a query may see
  const double s = static_cast<double>(span);
  if (!m.causal) return s;
  bool sliding = !m.layer_is_sliding.empty() && m.layer_is_sliding[static_cast<std::size_t>(block)];
  if (sliding && m.sliding_window < span) {
    const double w = static_cast<double>(m.sliding_window);
    return w * (1.0 - w / (2.0 * s));
  }
  return s / 2.0;
}

// Attention-core FLOPs per token (QK^T and AV): 4 * keys * q.
double attention_flops_per_token(const ModelSpec& m, std::int64_t block, std::int64_t seq, std::int64_t doc) {
  return 4.0 * attended_keys(m, block, seq, doc) * static_cast<double>(m.heads * m.head_dim);
}

/// A dense block's forward GEMMs per TP rank over `tokens` tokens: fused QKV, output projection, the MLP's
/// up (gate and up fused for SwiGLU) and down projections. MoE blocks: the attention projections only.
std::vector<GemmShape> block_gemms(const ModelSpec& m, std::int64_t tokens, std::int64_t t) {
  const std::int64_t h = m.hidden, q = m.heads * m.head_dim, kv = m.kv_heads * m.head_dim;
  std::vector<GemmShape> g{{tokens, ceil_div(q + 2 * kv, t), h, 1}, {tokens, h, ceil_div(q, t), 1}};
  if (!m.is_moe()) {
    const std::int64_t f = ceil_div(m.ffn_hidden, t);
    g.push_back({tokens, (m.mlp == MlpKind::kSwiGlu ? 2 : 1) * f, h, 1});
    g.push_back({tokens, h, f, 1});
  }
  return g;
}

}  // namespace

std::int64_t block_params(const ModelSpec& m) {
  const std::int64_t h = m.hidden, q = m.heads * m.head_dim, kv = m.kv_heads * m.head_dim;
  std::int64_t attn = h * q + 2 * h * kv + q * h;
  std::int64_t mlp = m.is_moe() ? m.num_experts * 3 * h * m.moe_ffn_hidden + h * m.num_experts
                                : (m.mlp == MlpKind::kSwiGlu ? 3 : 2) * h * m.ffn_hidden;
  return attn + mlp + 2 * h;  // two norms
}

double block_forward_flops_per_token(const ModelSpec& m, std::int64_t block, std::int64_t seq) {
  return block_gemm_flops_per_token(m) + attention_flops_per_token(m, block, seq, 0);
}

std::int64_t optimizer_step_bytes_per_param(const std::string& dtype) {
  if (dtype == "fp32") return 4 + 28 + 4;
  constexpr std::int64_t kCopyGrad = 2 + 4, kNorm = 4, kAdam = 16 + 12, kCopyParam = 4 + 2, kZeroGrad = 2;
  const std::int64_t unscale = dtype == "bf16" || dtype == "fp8" ? 0 : 4 + 4;  // fp16 loss scaling
  return kCopyGrad + unscale + kNorm + kAdam + kCopyParam + kZeroGrad;
}

namespace {

/// What every layer's cost is computed from: one rank's share of one microbatch.
struct LayerShape {
  const ModelSpec& m;
  CostOptions o;  // under context parallelism, seq is one rank's s/cp tokens
  const CostOptions& whole;
  std::int64_t t, b, s, h, sbh;
  double tokens;
  std::int64_t boundary;  // the activation sent to the next stage
  std::int64_t tp_bus;    // one TP all-reduce of the block output, per GPU
  std::int64_t residual;  // the residual stream this rank holds
  bool lora;
  TensorSizes sizes;  // what a framework's kernel composition is priced over

  /// Resident bytes per rank: 16 B per trained parameter; a LoRA-frozen weight keeps only its bf16 copy.
  std::int64_t resident(std::int64_t params, std::int64_t trainable) const {
    return lora ? ceil_div(params, t) * 2 + ceil_div(trainable, t) * o.bytes_per_param
                : ceil_div(params, t) * o.bytes_per_param;
  }
};

TensorSizes tensor_sizes(const ModelSpec& m, const CostOptions& o) {
  const auto t = static_cast<double>(o.tp), sb = static_cast<double>(o.seq * o.microbatch_size);
  const auto h = static_cast<double>(m.hidden);
  TensorSizes z;
  z.residual = o.sequence_parallel ? sb * h / t : sb * h;
  z.query = sb * static_cast<double>(m.heads * m.head_dim) / t;
  z.key_value = sb * static_cast<double>(m.kv_heads * m.head_dim) / t;
  z.inner = sb * static_cast<double>(m.is_moe() ? m.experts_per_token * m.moe_ffn_hidden : m.ffn_hidden) / t;
  z.block_params = static_cast<double>(block_params(m)) / t;
  z.logits = sb * static_cast<double>(m.vocab) / t;
  z.vocab_params = static_cast<double>(m.vocab) * h / t;
  return z;
}

LayerShape layer_shape(const ModelSpec& m, const CostOptions& whole) {
  if (whole.cp < 1 || whole.seq % whole.cp != 0)
    throw InputError(Option{"cp"}, "",
                     fmt::format("cp {} must divide the sequence ({})", whole.cp, whole.seq));
  // Under context parallelism everything below is one rank's: s/cp tokens of each sequence.
  CostOptions o = whole;
  o.seq = whole.seq / whole.cp;
  const std::int64_t t = o.tp, b = o.microbatch_size, s = o.seq, h = m.hidden;
  // Byte counts are int64: refuse shapes whose attention scores or logits would not fit (about 1 EB).
  const double largest =
      5.0 * static_cast<double>(m.heads) * static_cast<double>(s) * static_cast<double>(s) *
          static_cast<double>(b) +
      4.0 * static_cast<double>(b) * static_cast<double>(s) * static_cast<double>(m.vocab) +
      static_cast<double>(kSavedBytesPerSbh) * static_cast<double>(s) * static_cast<double>(b) *
          static_cast<double>(h);
  if (largest > 1e18 || o.microbatch_size < 1 || o.seq < 1 || o.tp < 1)
    throw InputError(
        Option{"seq/microbatch_size"}, "",
        fmt::format("seq {} x microbatch size {} gives activations beyond 1 EB per layer; use smaller values",
                    s, b));
  const std::int64_t sbh = s * b * h;
  return LayerShape{
      m,
      o,
      whole,
      t,
      b,
      s,
      h,
      sbh,
      static_cast<double>(b * s),
      // With TP, sequence parallelism splits the boundary activation and norms' inputs by t (Megatron
      // default); 2 bytes an element unless the framework keeps its residual stream wider.
      (o.composition ? o.composition->residual_bytes : 2) * ceil_div(sbh, t),
      // One TP all-reduce (or all-gather + reduce-scatter pair) of the block output moves 2(t-1)/t of it
      // per GPU.
      t > 1 ? 2 * (t - 1) * (2 * sbh) / t : 0,
      o.sequence_parallel ? ceil_div(sbh, t) : sbh,
      o.lora_rank > 0,
      tensor_sizes(m, o),
  };
}

/// A framework's traced launches of a layer in place of what its entries count (kernel_composition.hpp).
void take_launches(const LayerKernels& k, LayerCost& c) {
  if (!k.launches) return;
  c.kernels = k.launches->forward;
  c.input_grad_extra_kernels = k.launches->backward - 2 * k.launches->forward;
}

LayerCost embedding_cost(const LayerShape& x) {
  LayerCost emb;
  emb.role = LayerRole::kEmbedding;
  emb.params = x.m.vocab * x.h;
  emb.trainable_params = x.lora ? 0 : emb.params;
  emb.param_bytes = x.resident(emb.params, emb.trainable_params);
  emb.kernels = 2;
  // The lookup writes the residual stream; its backward reads the gradient and scatter-adds into the table.
  emb.fwd_mem_bytes = kReadWriteBytes * x.residual;
  emb.bwd_mem_bytes = backward_traffic(emb.fwd_mem_bytes);
  if (const KernelComposition* k = x.o.composition.get()) {
    if (!k->embedding.forward.empty()) {
      emb.fwd_mem_bytes = static_cast<std::int64_t>(composition_bytes(k->embedding.forward, x.m, x.sizes));
      emb.kernels = composition_kernels(k->embedding.forward, x.m);
    }
    if (!k->embedding.backward.empty())
      emb.bwd_mem_bytes = static_cast<std::int64_t>(composition_bytes(k->embedding.backward, x.m, x.sizes));
    take_launches(k->embedding, emb);
  }
  emb.output_bytes = x.boundary;
  emb.tp_bus_bytes = x.tp_bus;
  emb.tp_collectives = x.t > 1 ? 1 : 0;
  return emb;
}

/// Parameters of a block's LoRA adapters (rank r beside every weight matrix).
std::int64_t lora_adapter_params(const ModelSpec& m, std::int64_t rank) {
  const std::int64_t h = m.hidden;
  const std::int64_t q = m.heads * m.head_dim, kv = m.kv_heads * m.head_dim;
  const std::int64_t f = m.is_moe() ? m.moe_ffn_hidden * m.num_experts : m.ffn_hidden;
  const std::int64_t mlp_in_out = (m.mlp == MlpKind::kSwiGlu || m.is_moe() ? 3 : 2) * (h + f);
  return rank * ((h + q) + 2 * (h + kv) + (q + h) + mlp_in_out);
}

/// The routed experts of a MoE block: their gate, up and down projections run as three grouped GEMMs;
/// every expert that receives tokens streams its weights (bf16) in each pass. The dense part (attention
/// projections and the router) keeps its own GEMM size.
void add_expert_costs(const LayerShape& x, double gemm, LayerCost& c) {
  const ModelSpec& m = x.m;
  const double expert = 2.0 * x.tokens * static_cast<double>(m.experts_per_token) * 3.0 *
                        static_cast<double>(x.h) * static_cast<double>(m.moe_ffn_hidden);
  // Under expert parallelism a rank holds num_experts / ep of them and receives as many routed tokens as
  // it sends on average, `moe_imbalance` times that on the busiest rank.
  const std::int64_t local_experts = m.num_experts / x.o.ep;
  const auto routed = static_cast<std::int64_t>(
      std::ceil(static_cast<double>(x.b * x.s * m.experts_per_token) * x.o.moe_imbalance));
  const std::int64_t active_experts = std::min<std::int64_t>(local_experts, routed);
  c.expert_fwd_flops = c.expert_bwd_input_flops = c.expert_bwd_weight_flops = expert;
  c.expert_gemm_gflop = expert * x.o.moe_imbalance / 3 / static_cast<double>(x.t) / 1e9;
  c.expert_weight_bytes = ceil_div(active_experts * 3 * x.h * m.moe_ffn_hidden * 2, x.t);
  c.expert_imbalance = x.o.moe_imbalance;
  if (x.o.ep > 1) {
    // Dispatch before the experts and combine after them: each routed copy of a token's hidden state
    // (bf16), split over the TP ranks as the sequence is.
    c.ep_alltoall_bytes = 2 * ceil_div(x.b * x.s * m.experts_per_token * x.h * 2, x.t);
    c.ep_alltoalls = 2;
  }
  c.gemm_gflop = (gemm - expert) / 4 / static_cast<double>(x.t) / 1e9;  // q, k, v and o projections
}

/// Attention that materializes its scores: the masked half of QK^T and AV computed too, and the scores
/// written and read.
void add_unfused_attention(const LayerShape& x, double attn, LayerCost& c) {
  const ModelSpec& m = x.m;
  const std::int64_t scores = ceil_div(m.heads * x.s * x.s * x.b, x.t);
  c.attention_fwd_flops =
      x.tokens * 4.0 * static_cast<double>(x.s) * static_cast<double>(m.heads * m.head_dim);
  c.attention_masked_flops = c.attention_fwd_flops - attn;
  c.attention_bwd_flops = 2 * c.attention_fwd_flops;
  c.attention_recompute_flops = x.o.recompute == Recompute::kNone ? 0 : c.attention_fwd_flops;
  c.attention_fwd_bytes = 4 * scores;                 // QK^T writes each score, AV reads it: 2 B each
  c.attention_bwd_bytes = 2 * c.attention_fwd_bytes;  // dP written; P, dS, dS read
}

/// Saved activations under the recompute policy, and what recomputing costs.
void set_block_activations(const LayerShape& x, double attn, const BlockTraffic& traffic, LayerCost& c) {
  const CostOptions& o = x.o;
  // "Reducing Activation Recomputation": s*b*h*(34 + 5*a*s/h) bytes per layer, split by t with TP + sequence
  // parallel; without sequence parallelism the norms' and dropouts' 10 s*b*h stay whole on every rank. Flash
  // attention keeps no scores.
  // A framework that lists what its kernels save replaces that count.
  const bool listed = o.composition && !o.composition->block.saved.empty();
  const std::int64_t linear_part =
      listed ? static_cast<std::int64_t>(composition_bytes(o.composition->block.saved, x.m, x.sizes))
      : o.sequence_parallel ? kSavedBytesPerSbh * x.sbh / x.t
                            : kSequenceParallelBytesPerSbh * x.sbh + kTensorParallelBytesPerSbh * x.sbh / x.t;
  const std::int64_t score_part =
      o.attention == AttentionKernel::kFlash ? 0 : 5 * x.m.heads * x.s * x.s * x.b / x.t;
  c.attention_score_bytes = score_part;
  switch (o.recompute) {
    case Recompute::kNone:
      c.stored_activation_bytes = linear_part + score_part;
      break;
    case Recompute::kSelective:
      if (o.selective_every_other_linear) {
        // torchtitan's per-op policy: the attention kernel's and every other linear's outputs kept, the rest
        // of the forward re-run before the backward (its element-wise kernels, the other linears, MoE
        // experts).
        const OpSelectiveRecompute ops = every_other_linear(x.m, x.sizes, x.tokens);
        c.stored_activation_bytes = x.boundary + static_cast<std::int64_t>(ops.saved_bytes);
        c.recompute_flops = ops.recompute_flops;
        c.expert_recompute_flops = c.expert_fwd_flops;
        c.recompute_mem_bytes = c.fwd_mem_bytes;
        c.recompute_extra_bytes = std::max<std::int64_t>(0, linear_part - c.stored_activation_bytes);
        break;
      }
      // Megatron's: the attention core recomputed; flash attention stores no scores to drop.
      c.stored_activation_bytes = linear_part;
      c.recompute_flops = o.attention == AttentionKernel::kFlash ? 0 : attn;
      c.recompute_mem_bytes = traffic.attention;
      c.recompute_score_mem_bytes = traffic.scores_forward;
      c.recompute_extra_bytes = score_part;
      break;
    case Recompute::kFull:  // only the layer input kept; the whole forward re-runs in the backward
      c.stored_activation_bytes = x.boundary;
      c.recompute_flops = c.fwd_flops;
      c.expert_recompute_flops = c.expert_fwd_flops;
      c.recompute_mem_bytes = c.fwd_mem_bytes;
      c.recompute_score_mem_bytes = c.fwd_score_mem_bytes;
      c.recompute_extra_bytes = linear_part + score_part - x.boundary;
      break;
  }
}

struct BlockConstants {
  double gemm_flops_per_token;
  std::int64_t params;       // block_params(m)
  std::int64_t lora_params;  // adapters' parameters, 0 without LoRA
  int gemms;                 // weight GEMMs per block
};

/// A dense block's two column linears (q/k/v, the MLP's up) split their forward GEMM and its two row linears
/// (the output and down projections) their input-gradient GEMM around the gathered rows: the local rows,
/// then those before and after them, one GEMM more on a group's end ranks and two more on the others (the
/// step waits for those). All passes' GEMMs average smaller by as much.
void split_shard_first(const LayerShape& x, const BlockConstants& k, LayerCost& c) {
  const std::int32_t more = x.t == 2 ? 1 : 2;  // GEMMs one split adds
  constexpr std::int32_t kColumnLinears = 2, kRowLinears = 2, kPasses = 3;
  c.kernels += kColumnLinears * more;
  c.input_grad_extra_kernels += kRowLinears * more;
  const double launches = kPasses * k.gemms + (kColumnLinears + kRowLinears) * more;
  c.gemm_gflop *= kPasses * k.gemms / launches;
}

LayerCost block_cost(const LayerShape& x, const BlockConstants& k, std::int64_t i) {
  const ModelSpec& m = x.m;
  const CostOptions& o = x.o;
  LayerCost c;
  c.role = LayerRole::kBlock;
  const double gemm = x.tokens * k.gemm_flops_per_token;
  // A rank's queries see the keys of the whole sequence (the causal balance of CP's chunk pairs keeps the
  // average at the sequence's).
  const double attn = x.tokens * attention_flops_per_token(m, i, x.whole.seq, o.doc_tokens);
  c.fwd_flops = gemm + attn;
  c.bwd_input_flops = gemm + 2 * attn;  // dX of every GEMM; attention core backward is twice its forward
  c.bwd_weight_flops = gemm;            // dW of every GEMM
  if (!m.is_moe()) {
    const double q = static_cast<double>(m.heads * m.head_dim);
    c.row_bwd_weight_flops =
        2.0 * x.tokens * (q * static_cast<double>(x.h) + static_cast<double>(x.h * m.ffn_hidden));
  }
  c.gemm_gflop = gemm / k.gemms / static_cast<double>(x.t) / 1e9;
  c.gemms = block_gemms(m, x.b * x.s, x.t);
  if (m.is_moe()) add_expert_costs(x, gemm, c);
  c.kernels = 24;
  // Parameters this rank holds: with expert parallelism, its num_experts / ep experts.
  const std::int64_t expert_params = m.is_moe() ? m.num_experts * 3 * x.h * m.moe_ffn_hidden : 0;
  const std::int64_t held = k.params - expert_params + expert_params / o.ep;
  c.params = held;
  c.trainable_params = x.lora ? k.lora_params : held;
  c.param_bytes = x.resident(held, c.trainable_params);
  if (o.fp8) {
    const std::int64_t linear = held - 2 * x.h - (m.is_moe() ? x.h * m.num_experts : 0);  // not norms, router
    c.fp8_weight_bytes = fp8_weight_cache_bytes(ceil_div(linear, x.t), o.fp8_recipe);
    c.param_bytes += c.fp8_weight_bytes;
  }
  if (x.lora) {
    // Adapters: x A (r) then B (out) beside each frozen matrix; frozen weights get no weight gradient.
    const double adapter = 2.0 * x.tokens * static_cast<double>(k.lora_params);
    c.fwd_flops += adapter;
    c.bwd_input_flops += adapter;
    c.bwd_weight_flops = adapter;
    c.row_bwd_weight_flops = 0;
    c.expert_bwd_weight_flops = 0;  // frozen experts get no weight gradient
  }
  if (o.attention == AttentionKernel::kUnfused) add_unfused_attention(x, attn, c);
  const bool rated_flash = o.attention == AttentionKernel::kFlash && o.attention_rate.forward_tflops > 0 &&
                           o.attention_rate.backward_tflops > 0;
  if (rated_flash) {  // at the kernel's own rate, in 16 bits under FP8 recipes too
    c.fused_attention_fwd_flops = attn;
    c.fused_attention_bwd_flops = 2 * attn;
    c.fused_attention_recompute_flops = o.recompute == Recompute::kFull ? attn : 0;
    c.fused_attention_rate = o.attention_rate;
  }
  if (o.fp8 && o.attention == AttentionKernel::kFlash && !rated_flash) {
    c.wide_fwd_flops = attn;
    c.wide_bwd_input_flops = 2 * attn;
    c.wide_recompute_flops = o.recompute == Recompute::kFull ? attn : 0;
  }
  const BlockTraffic traffic = o.composition
                                   ? with_composition(block_traffic(m, o), o.composition->block, m, x.sizes)
                                   : block_traffic(m, o);
  if (o.composition && !o.composition->block.forward.empty())
    c.kernels = composition_kernels(o.composition->block.forward, m);
  if (o.composition) take_launches(o.composition->block, c);
  // An FP8 recipe's casts of the GEMMs' operands: their bytes, and their launches (the backward's its own
  // count, not twice the forward's).
  const Fp8CastTraffic casts = fp8_cast_traffic(m, o);
  c.fwd_mem_bytes = traffic.forward + casts.forward;
  c.bwd_mem_bytes = traffic.backward + casts.backward;
  c.kernels += casts.forward_kernels;
  c.input_grad_extra_kernels += casts.backward_kernels - 2 * casts.forward_kernels;
  c.fwd_score_mem_bytes = traffic.scores_forward;
  c.bwd_score_mem_bytes = traffic.scores_backward;
  c.output_bytes = x.boundary;
  if (x.whole.cp > 1) c.cp_kv_bytes = 2 * 2 * x.b * x.s * ceil_div(m.kv_heads, x.t) * m.head_dim;
  c.tp_bus_bytes = 2 * x.tp_bus;
  c.tp_collectives = x.t > 1 ? 2 : 0;
  // Each TP collective is a kernel the CPU issues and the GPU launches like any other: an all-reduce per
  // pair, or an all-gather and a reduce-scatter under sequence parallelism.
  c.kernels += c.tp_collectives * (o.sequence_parallel ? 2 : 1);
  c.host_ns = c.tp_collectives * o.tp_collective_host_ns;
  if (o.tp_shard_first_gemms && x.t > 1 && !m.is_moe()) split_shard_first(x, k, c);
  set_block_activations(x, attn, traffic, c);
  return c;
}

LayerCost head_cost(const LayerShape& x) {
  const ModelSpec& m = x.m;
  const std::int64_t t = x.t, b = x.b, s = x.s, h = x.h;
  LayerCost head;
  head.role = LayerRole::kHead;
  const double logits = 2.0 * x.tokens * static_cast<double>(h) * static_cast<double>(m.vocab);
  head.fwd_flops = logits;
  head.bwd_input_flops = logits;
  head.bwd_weight_flops = logits;
  // A vocabulary shard that is not a multiple of 8 (16 bytes of bf16) leaves the logits GEMMs on cuBLAS's
  // alignment-1 kernels, at the GPU's measured rate for them (in 16 bits under FP8 recipes too).
  const bool unaligned = ceil_div(m.vocab, t) % 8 != 0 && x.o.unaligned_gemm_rate.forward_tflops > 0 &&
                         x.o.unaligned_gemm_rate.backward_tflops > 0;
  if (unaligned) {
    head.unaligned_fwd_flops = head.unaligned_bwd_input_flops = head.unaligned_bwd_weight_flops = logits;
    head.unaligned_gemm_rate = x.o.unaligned_gemm_rate;
  } else if (x.o.fp8) {
    head.wide_fwd_flops = head.wide_bwd_input_flops = head.wide_bwd_weight_flops = logits;
  }
  head.gemm_gflop = logits / static_cast<double>(t) / 1e9;
  head.gemms = {{b * s, ceil_div(m.vocab, t), h, 1}};
  head.kernels = 6;
  // Final norm, then Megatron's vocab-parallel cross entropy over fp32 logits: the cast to fp32 (2 B read,
  // 4 B written), max (4), subtract in place (8), exp in place (8), sum (4), normalize in place (8): 38 B
  // per logit; its backward scales the saved softmax in place (8) and casts back (4 B read, 2 written).
  const std::int64_t logit_elements = s * b * ceil_div(m.vocab, t);
  head.fwd_mem_bytes = kReadWriteBytes * x.residual + 38 * logit_elements;
  head.bwd_mem_bytes = backward_traffic(kReadWriteBytes * x.residual) + 14 * logit_elements;
  if (x.o.norm_backward == NormBackward::kTwoPass) head.bwd_mem_bytes += 4 * x.residual;  // the final norm's
  const KernelComposition* k = x.o.composition.get();
  if (k && !k->head.forward.empty()) {
    head.fwd_mem_bytes = static_cast<std::int64_t>(composition_bytes(k->head.forward, m, x.sizes));
    head.kernels = composition_kernels(k->head.forward, m);
  }
  if (k && !k->head.backward.empty())
    head.bwd_mem_bytes = static_cast<std::int64_t>(composition_bytes(k->head.backward, m, x.sizes));
  if (k) take_launches(k->head, head);
  // A tied head still holds its own copy on the last stage (as Megatron does) unless it shares the stage.
  head.params = (m.tie_embeddings ? 0 : m.vocab * h) + h;
  head.trainable_params = x.lora ? 0 : head.params;
  head.param_bytes = x.resident(m.vocab * h + h, head.trainable_params);
  if (m.tie_embeddings) head.tied_copy_bytes = head.param_bytes - x.resident(h, x.lora ? 0 : h);
  if (x.lora) head.bwd_weight_flops = head.unaligned_bwd_weight_flops = 0;  // frozen: input gradient only
  // Vocab-parallel logits kept in fp32 for the loss backward, plus the input to the projection; a framework
  // lists what its loss keeps alive at its peak (the head's forward and backward run back to back).
  head.stored_activation_bytes =
      (k && !k->head.saved.empty() ? static_cast<std::int64_t>(composition_bytes(k->head.saved, m, x.sizes))
                                   : 4 * b * s * ceil_div(m.vocab, t)) +
      x.boundary;
  head.output_bytes = 0;
  return head;
}

}  // namespace

std::vector<LayerCost> model_layer_costs(const ModelSpec& m, const CostOptions& whole) {
  const LayerShape x = layer_shape(m, whole);
  std::vector<LayerCost> out;
  out.reserve(static_cast<std::size_t>(m.layers) + 2);
  out.push_back(embedding_cost(x));
  const BlockConstants k{block_gemm_flops_per_token(m), block_params(m),
                         x.lora ? lora_adapter_params(m, x.o.lora_rank) : 0,
                         m.mlp == MlpKind::kSwiGlu || m.is_moe() ? 7 : 6};
  for (std::int64_t i = 0; i < m.layers; ++i) out.push_back(block_cost(x, k, i));
  out.push_back(head_cost(x));
  const std::int64_t accum = grad_accumulation_bytes_per_param(x.o.grad_accumulation);
  const std::int64_t buffer = x.o.composition ? x.o.composition->grad_buffer_bytes_per_param : 0;
  for (LayerCost& l : out) {
    l.grad_accum_bytes = accum * ceil_div(l.trainable_params, x.t);
    l.grad_buffer_bytes = buffer * ceil_div(l.trainable_params, x.t);
    l.param_bytes += l.grad_buffer_bytes;
  }
  return out;
}

}  // namespace pipesim::sim
