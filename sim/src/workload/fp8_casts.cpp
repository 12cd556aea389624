#include "workload/fp8_casts.hpp"

namespace pipesim::sim {

Fp8CastTraffic fp8_cast_traffic(const ModelSpec& m, const CostOptions& o) {
  Fp8CastTraffic c;
  if (!o.fp8) return c;
  const std::int64_t t = o.tp, sb = o.seq * o.microbatch_size;
  const bool gated = m.mlp == MlpKind::kSwiGlu || m.is_moe();
  // Elements per rank, as block_traffic counts them: the residual stream (split under sequence parallelism;
  // a column linear's input is quantized before its all-gather), the attention heads' output, the MLP's
  // inner activation and the q/k/v projection's output.
  const std::int64_t residual = o.sequence_parallel ? ceil_div(sb * m.hidden, t) : sb * m.hidden;
  const std::int64_t heads_out = ceil_div(sb * m.heads * m.head_dim, t);
  const std::int64_t inner =
      ceil_div(sb * (m.is_moe() ? m.experts_per_token * m.moe_ffn_hidden : m.ffn_hidden), t);
  const std::int64_t qkv = ceil_div(sb * (m.heads + 2 * m.kv_heads) * m.head_dim, t);
  // A cast reads 2 B and writes two 1-byte copies; current scaling's amax pass reads 2 B more.
  const bool tensorwise = o.fp8_recipe == Fp8Recipe::kTensorwise;
  const std::int64_t cast = tensorwise ? 6 : 4;
  const std::int32_t cast_kernels = tensorwise ? 2 : 1;
  const bool after_norm = o.fp8_recipe != Fp8Recipe::kDelayed;  // delayed scaling casts inside the norm
  // Forward: the two norm-fed GEMM inputs (q/k/v, MLP up), then the output and MLP-down projections' inputs.
  if (after_norm) {
    c.forward += 2 * 4 * residual;
    c.forward_kernels += 2;
  }
  c.forward += cast * (heads_out + inner);
  c.forward_kernels += 2 * cast_kernels;
  // Backward: the output gradients of MLP down (the residual's), MLP up (gate and up), the output
  // projection (the residual's) and q/k/v.
  c.backward += cast * (residual + (gated ? 2 : 1) * inner + residual + qkv);
  c.backward_kernels += 4 * cast_kernels;
  return c;
}

std::int64_t fp8_weight_cache_bytes(std::int64_t weights, Fp8Recipe recipe) {
  return 2 * weights + (recipe == Fp8Recipe::kMxfp8 ? 2 * ceil_div(weights, 32) : 0);
}

}  // namespace pipesim::sim
