#include "schedules/range_cost.hpp"

#include <algorithm>

namespace pipesim::sim {

namespace {

/// A layer's attention work on the range: unfused attention's score GEMMs and bytes, flash attention at its
/// kernel's rate, and what FP8 recipes keep in 16 bits; and the head's unaligned GEMMs at their own rate.
void add_attention(const LayerCost& l, double t, RangeCost& r) {
  // Unfused attention also computes the masked scores: hardware work beyond the model's FLOPs.
  r.fwd += l.attention_masked_flops / t;
  r.bwd_in += 2 * l.attention_masked_flops / t;
  r.bwd += 2 * l.attention_masked_flops / t;
  if (l.attention_recompute_flops > 0) r.recompute += l.attention_masked_flops / t;
  r.wide_fwd += l.wide_fwd_flops / t;
  r.wide_bwd_in += l.wide_bwd_input_flops / t;
  r.wide_bwd_w += l.wide_bwd_weight_flops / t;
  r.wide_recompute += l.wide_recompute_flops / t;
  if (l.role == LayerRole::kBlock) r.wide_checkpoint_recompute += l.wide_fwd_flops / t;
  const KernelRate& a = l.fused_attention_rate;
  r.rated_fwd.add(l.fused_attention_fwd_flops / t, a.forward_tflops);
  r.rated_bwd_in.add(l.fused_attention_bwd_flops / t, a.backward_tflops);
  r.rated_recompute.add(l.fused_attention_recompute_flops / t, a.forward_tflops);
  if (l.role == LayerRole::kBlock)
    r.rated_checkpoint_recompute.add(l.fused_attention_fwd_flops / t, a.forward_tflops);
  const KernelRate& u = l.unaligned_gemm_rate;
  r.rated_fwd.add(l.unaligned_fwd_flops / t, u.forward_tflops);
  r.rated_bwd_in.add(l.unaligned_bwd_input_flops / t, u.backward_tflops);
  r.rated_bwd_w.add(l.unaligned_bwd_weight_flops / t, u.backward_tflops);
  r.attn_fwd += l.attention_fwd_flops / t;
  r.attn_bwd_in += l.attention_bwd_flops / t;
  r.attn_recompute += l.attention_recompute_flops / t;
  r.attn_fwd_bytes += l.attention_fwd_bytes;
  r.attn_bwd_bytes += l.attention_bwd_bytes;
  if (l.attention_recompute_flops > 0) r.attn_recompute_bytes += l.attention_fwd_bytes;
}

}  // namespace

RangeCost range_cost(const std::vector<LayerCost>& layers, std::int32_t begin, std::int32_t end,
                     std::int32_t tp) {
  RangeCost r;
  r.begin = begin;
  r.end = end;
  const auto t = static_cast<double>(tp);
  double weighted = 0, expert_weighted = 0;
  std::vector<GemmShape> gemms, block_gemms;
  for (std::int32_t i = begin; i < end; ++i) {
    const LayerCost& l = layers[static_cast<std::size_t>(i)];
    r.fwd += l.fwd_flops / t;
    r.bwd_in += l.bwd_input_flops / t;
    r.bwd_w += l.bwd_weight_flops / t;
    r.bwd_w_row += l.row_bwd_weight_flops / t;
    r.bwd += (l.bwd_input_flops + l.bwd_weight_flops) / t;
    r.recompute += l.recompute_flops / t;
    // The busiest expert-parallel rank sets the pace: its experts do `expert_imbalance` times the average.
    const double straggler = l.expert_imbalance - 1;
    r.fwd += straggler * l.expert_fwd_flops / t;
    r.bwd_in += straggler * l.expert_bwd_input_flops / t;
    r.bwd_w += straggler * l.expert_bwd_weight_flops / t;
    r.bwd += straggler * (l.expert_bwd_input_flops + l.expert_bwd_weight_flops) / t;
    r.recompute += straggler * l.expert_recompute_flops / t;
    r.expert_fwd += l.expert_imbalance * l.expert_fwd_flops / t;
    r.expert_bwd_in += l.expert_imbalance * l.expert_bwd_input_flops / t;
    r.expert_bwd_w += l.expert_imbalance * l.expert_bwd_weight_flops / t;
    r.expert_bwd += l.expert_imbalance * (l.expert_bwd_input_flops + l.expert_bwd_weight_flops) / t;
    r.expert_recompute += l.expert_imbalance * l.expert_recompute_flops / t;
    expert_weighted += l.expert_imbalance * l.expert_fwd_flops * l.expert_gemm_gflop;
    r.expert_weight_bytes += l.expert_weight_bytes;
    r.fwd_mem += l.fwd_mem_bytes;
    r.bwd_mem += l.bwd_mem_bytes;
    r.grad_accum_mem += l.grad_accum_bytes;
    r.recompute_mem += l.recompute_mem_bytes;
    r.fwd_score_mem += l.fwd_score_mem_bytes;
    r.bwd_score_mem += l.bwd_score_mem_bytes;
    r.recompute_score_mem += l.recompute_score_mem_bytes;
    weighted += l.fwd_flops * l.gemm_gflop;
    r.kernels += l.kernels;
    r.input_grad_extra_kernels += l.input_grad_extra_kernels;
    r.host_ns += l.host_ns;
    if (l.fwd_ns >= 0) {
      r.profiled = true;
      r.fwd_ns += l.fwd_ns;
      r.bwd_in_ns += l.bwd_input_ns;
      r.bwd_w_ns += l.bwd_weight_ns;
      r.bwd_ns += l.bwd_input_ns + l.bwd_weight_ns;
      r.recompute_ns += std::max<Duration>(0, l.recompute_ns);
    }
    if (l.role == LayerRole::kBlock) {
      r.checkpoint_recompute += l.fwd_flops / t;
      r.expert_checkpoint_recompute += l.expert_fwd_flops / t;
      r.checkpoint_recompute_mem += l.fwd_mem_bytes;
      r.checkpoint_recompute_score_mem += l.fwd_score_mem_bytes;
      r.checkpoint_recompute_ns += std::max<Duration>(0, l.fwd_ns);
    }
    for (const auto& g : l.gemms) {
      add_gemms(gemms, g);
      if (l.role == LayerRole::kBlock) add_gemms(block_gemms, g);
    }
    r.stored += l.stored_activation_bytes;
    r.extra = std::max(r.extra, l.recompute_extra_bytes);  // recomputed one layer at a time
    r.weight_grad_share += weight_grad_activation_bytes(l);
    r.working_bytes += l.stored_activation_bytes + l.recompute_extra_bytes - l.attention_score_bytes;
    r.tp_bus += l.tp_bus_bytes;
    r.tp_collectives += l.tp_collectives;
    r.cp_kv += l.cp_kv_bytes;
    if (l.cp_kv_bytes > 0) ++r.cp_layers;
    add_attention(l, t, r);
    r.ep_alltoall += l.ep_alltoall_bytes;
    r.ep_alltoalls += l.ep_alltoalls;
    // A tied embedding and head on one stage share one matrix.
    r.param_bytes += l.param_bytes - (begin == 0 ? l.tied_copy_bytes : 0);
    r.grad_buffer_bytes += l.grad_buffer_bytes;
    r.fp8_weight_bytes += l.fp8_weight_bytes;
    r.step_grad_bytes += l.step_grad_bytes;
    r.params += (l.params + tp - 1) / tp;
    r.trainable += (l.trainable_params + tp - 1) / tp;
  }
  r.bwd_gemms = backward_gemms(gemms, true, true);
  r.bwd_input_gemms = backward_gemms(gemms, true, false);
  r.bwd_weight_gemms = backward_gemms(gemms, false, true);
  r.gemms = std::move(gemms);
  r.block_gemms = std::move(block_gemms);
  r.gemm = r.fwd > 0 ? weighted / (r.fwd * t) : 0;
  r.expert_gemm = r.expert_fwd > 0 ? expert_weighted / (r.expert_fwd * t) : 0;
  r.input_bytes = begin > 0 ? layers[static_cast<std::size_t>(begin - 1)].output_bytes : 0;
  r.output_bytes = end > begin ? layers[static_cast<std::size_t>(end - 1)].output_bytes : 0;
  return r;
}

}  // namespace pipesim::sim
