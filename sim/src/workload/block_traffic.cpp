#include "workload/block_traffic.hpp"

namespace pipesim::sim {

std::int64_t backward_traffic(std::int64_t forward) {
  return forward * 3 / 2;
}

BlockTraffic block_traffic(const ModelSpec& m, const CostOptions& o) {
  const std::int64_t t = o.tp, sb = o.seq * o.microbatch_size;
  // Elements per rank of the residual stream (split by t under sequence parallelism), of the attention
  // heads' output, of the MLP's inner activation and of the scores.
  const std::int64_t residual = o.sequence_parallel ? ceil_div(sb * m.hidden, t) : sb * m.hidden;
  const std::int64_t heads_out = ceil_div(sb * m.heads * m.head_dim, t);
  const std::int64_t inner =
      ceil_div(sb * (m.is_moe() ? m.experts_per_token * m.moe_ffn_hidden : m.ffn_hidden), t);
  const std::int64_t scores = ceil_div(m.heads * o.seq * o.seq * o.microbatch_size, t);
  BlockTraffic b;
  // Two norms read and write the residual stream; two residual adds read branch and residual and write the
  // sum, plus a 1-byte mask each with dropout.
  b.forward = 2 * kReadWriteBytes * residual + 2 * (6 + (o.dropout ? 1 : 0)) * residual;
  // The activation function: GELU reads and writes the inner activation; SwiGLU reads gate and up, writes
  // one.
  const bool gated = m.mlp == MlpKind::kSwiGlu || m.is_moe();
  b.forward += (gated ? 6 : kReadWriteBytes) * inner;
  b.backward = backward_traffic(b.forward);
  if (o.bias_kernels == BiasKernels::kSeparate) {
    // The q/k/v bias added by a kernel of its own (its output read and written); in the backward, each
    // trained bias gradient reads its output's gradient (2 B): the MLP's over every routed copy of a token in
    // an MoE block. LoRA freezes the biases.
    const std::int64_t qkv = ceil_div(sb * (m.heads + 2 * m.kv_heads) * m.head_dim, t);
    const std::int64_t up = (gated ? 2 : 1) * inner;
    const std::int64_t down = m.is_moe() ? m.experts_per_token * residual : residual;
    if (m.qkv_bias) b.forward += kReadWriteBytes * qkv;
    if (o.lora_rank == 0)
      b.backward += 2 * ((m.qkv_bias ? qkv : 0) + (m.out_bias ? residual : 0) + (m.mlp_bias ? up + down : 0));
  }
  // A two-pass norm backward reads its input and output gradient (2 B each) again: two norms.
  if (o.norm_backward == NormBackward::kTwoPass) b.backward += 2 * 4 * residual;
  if (o.attention == AttentionKernel::kUnfused) {
    // Softmax reads and writes the scores; dropout reads and writes them and writes a 1-byte mask. In the
    // backward, dropout reads the gradient and its mask and writes (5 B), softmax reads the gradient and its
    // output and writes (6 B). The context goes back from per-head to token-major layout.
    b.scores_forward = kReadWriteBytes * scores + (o.dropout ? 5 * scores : 0);
    b.scores_backward = 6 * scores + (o.dropout ? 5 * scores : 0);
    b.attention = b.scores_forward + kReadWriteBytes * heads_out;
    b.attention_backward = b.scores_backward + backward_traffic(kReadWriteBytes * heads_out);
    b.forward += b.attention;
    b.backward += b.attention_backward;
  }
  return b;
}

BlockTraffic with_composition(BlockTraffic b, const LayerKernels& k, const ModelSpec& m,
                              const TensorSizes& sz) {
  if (!k.forward.empty())
    b.forward = static_cast<std::int64_t>(composition_bytes(k.forward, m, sz)) + b.attention;
  if (!k.backward.empty())
    b.backward = static_cast<std::int64_t>(composition_bytes(k.backward, m, sz)) + b.attention_backward;
  return b;
}

}  // namespace pipesim::sim
