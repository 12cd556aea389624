#include <gtest/gtest.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/job/option_parsing.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "pipesim/sim/workload/model.hpp"
#include "pipesim/sim/workload/profiled_workload.hpp"

namespace pipesim::sim {
namespace {

TEST(CostModel, Llama2_7bParametersByHand) {
  ModelSpec m = load_model("llama2-7b");
  // Attention 4h^2 = 67,108,864; SwiGLU MLP 3 * 4096 * 11008 = 135,266,304; two RMSNorms 8,192.
  EXPECT_EQ(block_params(m), 67'108'864 + 135'266'304 + 8'192);
  auto layers = model_layer_costs(m, CostOptions{1, 4096, 1, Recompute::kNone});
  ASSERT_EQ(layers.size(), 34u);
  std::int64_t total = 0;
  for (const auto& l : layers) total += l.params;
  EXPECT_EQ(total, 6'738'415'616);  // the published 6.74B: 32 blocks + embedding + untied head + final norm
}

TEST(CostModel, OptimizerStepTrafficByHand) {
  // grad copy 2+4, [fp16: unscale 4+4], norm 4, Adam 16+12, param copy 4+2, zero grad 2.
  EXPECT_EQ(optimizer_step_bytes_per_param("fp16"), 6 + 8 + 4 + 28 + 6 + 2);
  EXPECT_EQ(optimizer_step_bytes_per_param("fp16_acc16"), 54);
  EXPECT_EQ(optimizer_step_bytes_per_param("bf16"), 6 + 4 + 28 + 6 + 2);
  EXPECT_EQ(optimizer_step_bytes_per_param("fp32"), 4 + 28 + 4);
}

TEST(CostModel, GradientAccumulationTrafficByHand) {
  // llama2-7b, tp 2: a block trains 202,383,360 parameters (101,191,680 per rank), the embedding and the
  // untied head 131,072,000 and 131,076,096 (65,536,000 and 65,538,048 per rank).
  ModelSpec m = load_model("llama2-7b");
  CostOptions o{1, 1024, 2, Recompute::kNone};
  EXPECT_EQ(grad_accumulation_bytes_per_param(GradAccumulation::kMainGrad), 2 + 4 + 4);
  EXPECT_EQ(grad_accumulation_bytes_per_param(GradAccumulation::kAutograd), 2 + 2 + 2);
  for (const LayerCost& l : model_layer_costs(m, o)) EXPECT_EQ(l.grad_accum_bytes, 0) << "fused: in the GEMM";
  o.grad_accumulation = GradAccumulation::kMainGrad;
  auto layers = model_layer_costs(m, o);
  EXPECT_EQ(layers.front().grad_accum_bytes, 10 * 65'536'000);
  EXPECT_EQ(layers[1].grad_accum_bytes, 10 * 101'191'680);
  EXPECT_EQ(layers.back().grad_accum_bytes, 10 * 65'538'048);
  o.grad_accumulation = GradAccumulation::kAutograd;
  EXPECT_EQ(model_layer_costs(m, o)[1].grad_accum_bytes, 6 * 101'191'680);
  EXPECT_EQ(parse_grad_accumulation("main-grad"), GradAccumulation::kMainGrad);
  EXPECT_THROW(parse_grad_accumulation("fp32"), InputError);
}

TEST(CostModel, GemmShapesAccountForTheGemmFlops) {
  // llama2-7b, tp 2: QKV 8192 x 6144 x 4096 (h -> 3h/2), O 8192 x 4096 x 2048, gate+up 8192 x 11008 x 4096,
  // down 8192 x 4096 x 5504, head 8192 x 16000 x 4096; their 2mnk sum is the layer's GEMM FLOPs / tp.
  ModelSpec m = load_model("llama2-7b");
  const std::int64_t s = 4096, b = 2, t = 2;
  auto layers = model_layer_costs(m, CostOptions{b, s, t, Recompute::kNone});
  const std::int64_t tok = b * s;
  EXPECT_EQ(layers[1].gemms,
            (std::vector<GemmShape>{
                {tok, 6144, 4096, 1}, {tok, 4096, 2048, 1}, {tok, 11008, 4096, 1}, {tok, 4096, 5504, 1}}));
  EXPECT_DOUBLE_EQ(gemm_flops(layers[1].gemms) * t, layers[1].bwd_weight_flops);
  EXPECT_EQ(layers.back().gemms, (std::vector<GemmShape>{{tok, 16000, 4096, 1}}));
  EXPECT_DOUBLE_EQ(gemm_flops(layers.back().gemms) * t, layers.back().fwd_flops);
  // The backward: dX and dW of every GEMM, twice the forward's FLOPs.
  EXPECT_DOUBLE_EQ(gemm_flops(backward_gemms(layers[1].gemms, true, true)), 2 * gemm_flops(layers[1].gemms));
  EXPECT_EQ(backward_gemms({{8, 3, 5, 2}}, true, false), (std::vector<GemmShape>{{8, 5, 3, 2}}));
  EXPECT_EQ(backward_gemms({{8, 3, 5, 2}}, false, true), (std::vector<GemmShape>{{5, 3, 8, 2}}));
}

TEST(CostModel, BlockFlopsByHand) {
  ModelSpec m = load_model("llama2-7b");
  const std::int64_t s = 4096, b = 2, h = 4096;
  auto layers = model_layer_costs(m, CostOptions{b, s, 1, Recompute::kNone});
  const double tokens = static_cast<double>(b * s);
  const double gemm = 2.0 * (4.0 * h * h + 3.0 * h * 11008) * tokens;  // every weight, 2 FLOPs per MAC
  const double attn = 4.0 * (s / 2.0) * h * tokens;                    // QK^T and AV, causal half
  const LayerCost& blk = layers[1];
  EXPECT_DOUBLE_EQ(blk.fwd_flops, gemm + attn);
  EXPECT_DOUBLE_EQ(blk.bwd_input_flops, gemm + 2 * attn);
  EXPECT_DOUBLE_EQ(blk.bwd_weight_flops, gemm);
  // Dense GPT (Narayanan et al. 2021): 24 b s h^2 + 4 b s^2 h forward FLOPs per block with a 4h GELU MLP.
  ModelSpec g = load_model("gpt3-175b");
  auto gl = model_layer_costs(g, CostOptions{1, 2048, 1, Recompute::kNone});
  const double H = 12288, S = 2048;
  EXPECT_DOUBLE_EQ(gl[1].fwd_flops, 24 * S * H * H + 2 * S * S * H);  // causal: half of 4 b s^2 h
  EXPECT_DOUBLE_EQ(gl.back().fwd_flops, 2 * S * H * 50257);           // logits
}

TEST(CostModel, DocumentMaskingCutsFlashAttentionWorkNotUnfused) {
  // Llama-2-7B at 8K tokens packed with 2K-token documents: a query attends to half of its document (1,024
  // keys on average) instead of half the sequence (4,096): a quarter of the attention-core FLOPs.
  ModelSpec m = load_model("llama2-7b");
  const std::int64_t s = 8192, h = 4096;
  CostOptions o{1, s, 1, Recompute::kNone};
  o.attention = AttentionKernel::kFlash;
  const auto whole = model_layer_costs(m, o);
  o.doc_tokens = 2048;
  const auto docs = model_layer_costs(m, o);
  const double tokens = s;
  EXPECT_DOUBLE_EQ(whole[1].fwd_flops - docs[1].fwd_flops, 4.0 * (4096 - 1024) * h * tokens);
  EXPECT_DOUBLE_EQ(whole[1].bwd_input_flops - docs[1].bwd_input_flops, 2 * 4.0 * (4096 - 1024) * h * tokens);
  EXPECT_DOUBLE_EQ(whole[1].bwd_weight_flops, docs[1].bwd_weight_flops);
  // Documents as long as the sequence change nothing.
  o.doc_tokens = s;
  EXPECT_DOUBLE_EQ(model_layer_costs(m, o)[1].fwd_flops, whole[1].fwd_flops);
  // Unfused attention computes every score anyway: the useful FLOPs shrink, the masked ones grow as much.
  o.attention = AttentionKernel::kUnfused;
  o.doc_tokens = 0;
  const auto unfused = model_layer_costs(m, o);
  o.doc_tokens = 2048;
  const auto unfused_docs = model_layer_costs(m, o);
  EXPECT_DOUBLE_EQ(unfused[1].attention_fwd_flops, unfused_docs[1].attention_fwd_flops);
  EXPECT_DOUBLE_EQ(unfused_docs[1].attention_masked_flops - unfused[1].attention_masked_flops,
                   4.0 * (4096 - 1024) * h * tokens);
}

TEST(CostModel, GqaAndMoeFlops) {
  ModelSpec q = load_model("qwen3-235b-a22b");
  const double h = 4096, qd = 64 * 128, kv = 4 * 128;
  const double expect =
      2 * (h * qd + 2 * h * kv + qd * h + 8 * 3 * h * 1536 + h * 128) + 4 * (1024 / 2.0) * qd;
  EXPECT_DOUBLE_EQ(block_forward_flops_per_token(q, 0, 1024), expect);
  // All 128 experts hold parameters although only 8 run per token.
  EXPECT_EQ(block_params(q), 4096LL * 8192 + 2 * 4096LL * 512 + 8192LL * 4096 + 128LL * 3 * 4096 * 1536 +
                                 4096LL * 128 + 2 * 4096);
}

TEST(CostModel, ActivationMemoryUnderRecomputeAndTp) {
  ModelSpec m = load_model("llama2-7b");
  const std::int64_t s = 2048, b = 1, h = 4096, a = 32, t = 2;
  auto none = model_layer_costs(m, CostOptions{b, s, t, Recompute::kNone});
  auto sel = model_layer_costs(m, CostOptions{b, s, t, Recompute::kSelective});
  auto full = model_layer_costs(m, CostOptions{b, s, t, Recompute::kFull});
  // Korthikanti et al. with TP + sequence parallel: s b h (34/t + 5 a s / (h t)).
  EXPECT_EQ(none[1].stored_activation_bytes, 34 * s * b * h / t + 5 * a * s * s * b / t);
  EXPECT_EQ(sel[1].stored_activation_bytes, 34 * s * b * h / t);
  EXPECT_EQ(full[1].stored_activation_bytes, 2 * s * b * h / t);
  EXPECT_DOUBLE_EQ(full[1].recompute_flops, full[1].fwd_flops);
  EXPECT_DOUBLE_EQ(none[1].recompute_flops, 0);
  EXPECT_GT(sel[1].recompute_flops, 0);
  // Boundary activation for p2p and the TP all-reduce bus bytes: 2 collectives of 2sbh at 2(t-1)/t.
  EXPECT_EQ(none[1].output_bytes, 2 * s * b * h / t);
  EXPECT_EQ(none[1].tp_bus_bytes, 2 * (2 * (t - 1) * 2 * s * b * h / t));
  // 16 bytes of mixed-precision Adam state per parameter, split by t.
  EXPECT_EQ(none[1].param_bytes, block_params(m) / t * 16);
}

TEST(CostModel, HeadHeavyModels) {
  // Qwen3-1.7B's head (vocab 151936 x h 2048) is about 6 blocks of forward FLOPs, Llama-3-8B's about 2.4.
  for (auto [name, ratio] : {std::pair<const char*, double>{"qwen3-1.7b", 6.0}, {"llama3-8b", 2.4}}) {
    ModelSpec m = load_model(name);
    auto l = model_layer_costs(m, CostOptions{1, 2048, 1, Recompute::kNone});
    EXPECT_NEAR(l.back().fwd_flops / l[1].fwd_flops, ratio, 0.5) << name;
  }
}

TEST(CostModel, SlidingWindowLayersAttendToTheWindow) {
  ModelSpec m = load_model(std::string(PIPESIM_TEST_DATA_DIR) + "/hf/openai__gpt-oss-20b.json");
  ASSERT_EQ(m.sliding_window, 128);
  const double full = block_forward_flops_per_token(m, 1, 8192);
  const double slide = block_forward_flops_per_token(m, 0, 8192);
  EXPECT_LT(slide, full);
  const double q = 64 * 64;
  EXPECT_DOUBLE_EQ(full - slide, 4 * q * (8192 / 2.0 - 128 * (1 - 128 / (2.0 * 8192))));
}

TEST(Workload, ProfiledLayersWithRepeatAndSplitBackward) {
  const char* text = R"({"layers": [
      {"role": "embedding", "fwd_ms": 0.5, "bwd_ms": 0.5},
      {"role": "block", "fwd_ms": 2, "bwd_input_ms": 2.5, "bwd_weight_ms": 1.5, "activation_bytes": 100,
       "output_bytes": 10, "repeat": 3},
      {"role": "head", "fwd_ms": 4, "bwd_ms": 8}]})";
  Workload w = parse_workload(text, "w.json", Recompute::kFull);
  ASSERT_EQ(w.layers.size(), 5u);
  EXPECT_EQ(w.layers[1].fwd_ns, 2'000'000);
  EXPECT_EQ(w.layers[1].bwd_input_ns, 2'500'000);
  EXPECT_EQ(w.layers[1].bwd_weight_ns, 1'500'000);
  EXPECT_EQ(w.layers[1].recompute_ns, 2'000'000);  // full recompute re-runs the block forward
  EXPECT_EQ(w.layers[0].recompute_ns, 0);          // embedding and head are not recomputed
  EXPECT_EQ(w.layers[4].recompute_ns, 0);
  EXPECT_EQ(w.layers[4].bwd_input_ns, 4'000'000);  // no split given: half and half
  EXPECT_EQ(w.layers[1].stored_activation_bytes, 10);
  EXPECT_THROW(parse_workload(R"({"layers": [{"fwd_ms": 1}]})", "w.json", Recompute::kNone), InputError);
  EXPECT_THROW(parse_workload(R"({"layers": [{"fwd_ms": 1, "bwd_ms": 2, "bwd_input_ms": 5}]})", "w.json",
                              Recompute::kNone),
               InputError);
  EXPECT_THROW(parse_workload(R"({"layers": [{"fwd_ms": 1, "bwd_ms": 2, "fwd_msec": 1}]})", "w.json",
                              Recompute::kNone),
               InputError);
}

}  // namespace
}  // namespace pipesim::sim

namespace pipesim::sim {
namespace {

/// A small GPT-style model whose memory-bound traffic is easy to count by hand.
ModelSpec tiny_gpt() {
  ModelSpec m;
  m.name = "tiny-gpt";
  m.hidden = 64;
  m.layers = 2;
  m.heads = 4;
  m.kv_heads = 4;
  m.head_dim = 16;
  m.ffn_hidden = 256;
  m.vocab = 1000;
  m.mlp = MlpKind::kGelu;
  return m;
}

TEST(CostModel, MemoryBoundTrafficOfOneBlockByHand) {
  // s = 128, b = 1, t = 1: residual stream E = 8192 elements, MLP inner 32768, scores 4 x 128 x 128 = 65536,
  // heads' output 8192.
  CostOptions o{1, 128, 1, Recompute::kNone};
  o.dropout = true;
  o.sequence_parallel = false;
  const auto layers = model_layer_costs(tiny_gpt(), o);
  const std::int64_t E = 8192, inner = 32768, S = 65536, heads_out = 8192;
  // Two norms (read + write, 2 B), two bias-dropout-adds (two reads, one write, a 1 B mask), GELU (read +
  // write), softmax (read + write), attention dropout (read + write + mask), context transpose.
  const std::int64_t fwd = 2 * 4 * E + 2 * 7 * E + 4 * inner + 4 * S + 5 * S + 4 * heads_out;
  EXPECT_EQ(fwd, 933'888);
  EXPECT_EQ(layers[1].fwd_mem_bytes, fwd);
  // Three accesses per element in the backward (gradient in, saved input, gradient out), except over the
  // scores: dropout reads the gradient and its 1 B mask and writes (5 B), softmax reads the gradient and its
  // output and writes (6 B).
  const std::int64_t scores_bwd = 5 * S + 6 * S;
  EXPECT_EQ(layers[1].bwd_mem_bytes, (fwd - 4 * S - 5 * S) * 3 / 2 + scores_bwd);
  EXPECT_EQ(layers[1].bwd_mem_bytes, 1'236'992);
  // Of those, the score traffic is timed at the unfused-attention bandwidth.
  EXPECT_EQ(layers[1].fwd_score_mem_bytes, 4 * S + 5 * S);
  EXPECT_EQ(layers[1].bwd_score_mem_bytes, scores_bwd);
  EXPECT_EQ(layers[1].recompute_mem_bytes, 0);
  EXPECT_EQ(layers[1].recompute_score_mem_bytes, 0);
  // Head: the final norm, then 38 B per fp32 logit forward and 14 B backward.
  EXPECT_EQ(layers.back().fwd_mem_bytes, 4 * E + 38 * 128 * 1000);
  EXPECT_EQ(layers.back().bwd_mem_bytes, 6 * E + 14 * 128 * 1000);
  EXPECT_EQ(layers.front().fwd_mem_bytes, 4 * E);  // the embedding writes the residual stream

  // Full recompute re-runs all of it; selective only what touches the scores.
  o.recompute = Recompute::kFull;
  EXPECT_EQ(model_layer_costs(tiny_gpt(), o)[1].recompute_mem_bytes, fwd);
  o.recompute = Recompute::kSelective;
  EXPECT_EQ(model_layer_costs(tiny_gpt(), o)[1].recompute_mem_bytes, 4 * S + 5 * S + 4 * heads_out);
  EXPECT_EQ(model_layer_costs(tiny_gpt(), o)[1].recompute_score_mem_bytes, 4 * S + 5 * S);

  // Sequence parallelism over t = 2 splits the residual stream; TP splits heads and the MLP in any case.
  CostOptions sp{1, 128, 2, Recompute::kNone};
  sp.dropout = true;
  EXPECT_EQ(model_layer_costs(tiny_gpt(), sp)[1].fwd_mem_bytes, fwd / 2);
  sp.sequence_parallel = false;
  EXPECT_EQ(model_layer_costs(tiny_gpt(), sp)[1].fwd_mem_bytes,
            2 * 4 * E + 2 * 7 * E + (4 * inner + 4 * S + 5 * S + 4 * heads_out) / 2);
  // Flash attention keeps the scores on chip: no softmax, dropout or transpose traffic, no stored scores.
  CostOptions flash{1, 128, 1, Recompute::kNone};
  flash.attention = AttentionKernel::kFlash;
  const auto fl = model_layer_costs(tiny_gpt(), flash)[1];
  EXPECT_EQ(fl.fwd_mem_bytes, 2 * 4 * E + 2 * 6 * E + 4 * inner);
  EXPECT_EQ(fl.attention_score_bytes, 0);
  // SwiGLU reads gate and up and writes their product: 6 B per inner element.
  ModelSpec llama = tiny_gpt();
  llama.mlp = MlpKind::kSwiGlu;
  EXPECT_EQ(model_layer_costs(llama, flash)[1].fwd_mem_bytes, 2 * 4 * E + 2 * 6 * E + 6 * inner);
}

TEST(CostModel, SeparateBiasKernelsAndTwoPassNormsByHand) {
  // tiny_gpt with every bias, s = 128, b = 1: residual stream E = 8192 elements, q/k/v output 3 x 8192, MLP
  // inner 32768. Defaults (fused bias epilogues, one-pass norms): the biases cost nothing.
  ModelSpec m = tiny_gpt();
  m.qkv_bias = m.out_bias = m.mlp_bias = true;
  CostOptions o{1, 128, 1, Recompute::kFull};
  o.sequence_parallel = false;
  o.attention = AttentionKernel::kFlash;
  const LayerCost base = model_layer_costs(m, o)[1];
  EXPECT_EQ(base.fwd_mem_bytes, model_layer_costs(tiny_gpt(), o)[1].fwd_mem_bytes);
  EXPECT_EQ(base.bwd_mem_bytes, model_layer_costs(tiny_gpt(), o)[1].bwd_mem_bytes);
  const std::int64_t E = 8192, qkv = 3 * 8192, inner = 32768;
  // Separate bias kernels: the q/k/v bias add reads and writes the projection's output (4 B) in the forward
  // and again in the recomputed forward; the backward's four bias gradients read the q/k/v, attention
  // output, MLP up and MLP down gradients (2 B each).
  o.bias_kernels = BiasKernels::kSeparate;
  const LayerCost sep = model_layer_costs(m, o)[1];
  EXPECT_EQ(sep.fwd_mem_bytes - base.fwd_mem_bytes, 4 * qkv);
  EXPECT_EQ(sep.fwd_mem_bytes - base.fwd_mem_bytes, 98'304);
  EXPECT_EQ(sep.recompute_mem_bytes - base.recompute_mem_bytes, 98'304);
  EXPECT_EQ(sep.bwd_mem_bytes - base.bwd_mem_bytes, 2 * (qkv + E + inner + E));
  EXPECT_EQ(sep.bwd_mem_bytes - base.bwd_mem_bytes, 147'456);
  // A model without biases is unaffected; q/k/v biases alone cost the add and their gradient.
  EXPECT_EQ(model_layer_costs(tiny_gpt(), o)[1].bwd_mem_bytes, base.bwd_mem_bytes);
  ModelSpec qwen2 = tiny_gpt();
  qwen2.qkv_bias = true;
  EXPECT_EQ(model_layer_costs(qwen2, o)[1].bwd_mem_bytes - base.bwd_mem_bytes, 2 * qkv);
  // SwiGLU's fused gate and up projection has a bias gradient over both halves; TP splits the q/k/v and
  // MLP outputs, sequence parallelism the residual stream.
  ModelSpec gated = m;
  gated.mlp = MlpKind::kSwiGlu;
  CostOptions fused_o = o;
  fused_o.bias_kernels = BiasKernels::kFused;
  EXPECT_EQ(model_layer_costs(gated, o)[1].bwd_mem_bytes - model_layer_costs(gated, fused_o)[1].bwd_mem_bytes,
            2 * (qkv + E + 2 * inner + E));
  CostOptions tp2 = o;
  tp2.tp = 2;
  tp2.sequence_parallel = true;
  CostOptions tp2_fused = tp2;
  tp2_fused.bias_kernels = BiasKernels::kFused;
  EXPECT_EQ(model_layer_costs(m, tp2)[1].bwd_mem_bytes - model_layer_costs(m, tp2_fused)[1].bwd_mem_bytes,
            2 * (qkv + E + inner + E) / 2);
  // Without sequence parallelism every TP rank reduces the whole residual stream's gradients.
  tp2.sequence_parallel = tp2_fused.sequence_parallel = false;
  EXPECT_EQ(model_layer_costs(m, tp2)[1].bwd_mem_bytes - model_layer_costs(m, tp2_fused)[1].bwd_mem_bytes,
            2 * (qkv / 2 + E + inner / 2 + E));
  // Grouped-query attention: q, k and v outputs of 4 + 2 x 1 heads of 16.
  ModelSpec gqa = m;
  gqa.kv_heads = 1;
  EXPECT_EQ(model_layer_costs(gqa, o)[1].fwd_mem_bytes - model_layer_costs(gqa, fused_o)[1].fwd_mem_bytes,
            4 * 128 * 6 * 16);
  // Selective recompute re-runs the attention core only, not the q/k/v bias add.
  CostOptions selective = o, selective_fused = fused_o;
  selective.recompute = selective_fused.recompute = Recompute::kSelective;
  EXPECT_EQ(model_layer_costs(m, selective)[1].recompute_mem_bytes,
            model_layer_costs(m, selective_fused)[1].recompute_mem_bytes);
  // LoRA freezes the biases: the forward's add stays, no bias gradient is computed.
  CostOptions lora = o, lora_fused = fused_o;
  lora.lora_rank = lora_fused.lora_rank = 8;
  EXPECT_EQ(model_layer_costs(m, lora)[1].fwd_mem_bytes - model_layer_costs(m, lora_fused)[1].fwd_mem_bytes,
            4 * qkv);
  EXPECT_EQ(model_layer_costs(m, lora)[1].bwd_mem_bytes, model_layer_costs(m, lora_fused)[1].bwd_mem_bytes);

  // Two-pass norms: each of the block's two norms reads its input and output gradient again (4 B per
  // residual element), the head's final norm once more; the forward is unchanged.
  o.bias_kernels = BiasKernels::kFused;
  o.norm_backward = NormBackward::kTwoPass;
  const auto two = model_layer_costs(m, o);
  EXPECT_EQ(two[1].fwd_mem_bytes, base.fwd_mem_bytes);
  EXPECT_EQ(two[1].bwd_mem_bytes - base.bwd_mem_bytes, 2 * 4 * E);
  EXPECT_EQ(two[1].bwd_mem_bytes - base.bwd_mem_bytes, 65'536);
  CostOptions one_pass = o;
  one_pass.norm_backward = NormBackward::kOnePass;
  EXPECT_EQ(two.back().bwd_mem_bytes - model_layer_costs(m, one_pass).back().bwd_mem_bytes, 4 * E);
  // Under sequence parallelism (t = 2) each rank's norms see half the residual stream.
  CostOptions sp_two = o, sp_one = one_pass;
  sp_two.tp = sp_one.tp = 2;
  sp_two.sequence_parallel = sp_one.sequence_parallel = true;
  EXPECT_EQ(model_layer_costs(m, sp_two)[1].bwd_mem_bytes - model_layer_costs(m, sp_one)[1].bwd_mem_bytes,
            2 * 4 * E / 2);
  EXPECT_EQ(
      model_layer_costs(m, sp_two).back().bwd_mem_bytes - model_layer_costs(m, sp_one).back().bwd_mem_bytes,
      4 * E / 2);

  // Time on an A100 (2039 GB/s at 79 %): both together add 147,456 + 65,536 bytes to the block's backward,
  // ceil(212,992 / 1610.81 GB/s) = 133 ns.
  const HardwareProfile hw = load_hardware_profile("a100-80g-sxm-8x");
  o.bias_kernels = BiasKernels::kSeparate;
  const LayerCost both = model_layer_costs(m, o)[1];
  EXPECT_EQ(both.bwd_mem_bytes - base.bwd_mem_bytes, 212'992);
  EXPECT_EQ(hw.memory_ns(both.bwd_mem_bytes - base.bwd_mem_bytes), 133);
  EXPECT_EQ(parse_bias_kernels("separate"), BiasKernels::kSeparate);
  EXPECT_EQ(parse_norm_backward("two-pass"), NormBackward::kTwoPass);
  EXPECT_THROW(parse_bias_kernels("epilogue"), InputError);
  EXPECT_THROW(parse_norm_backward("twopass"), InputError);
}

TEST(CostModel, AttentionKernelNamesAreStrict) {
  EXPECT_EQ(parse_attention("flash"), AttentionKernel::kFlash);
  EXPECT_EQ(parse_attention("unfused"), AttentionKernel::kUnfused);
  EXPECT_THROW(parse_attention("fused"), InputError);
}

}  // namespace
}  // namespace pipesim::sim

namespace pipesim::sim {
namespace {

TEST(CostModel, MoeExpertsAreGroupedGemmsThatStreamTheirWeights) {
  // Qwen3-235B-A22B, 2048 tokens, tp 4: 8 of 128 experts per token, expert width 1536, hidden 4096.
  const ModelSpec q = load_model("qwen3-235b-a22b");
  const auto layers = model_layer_costs(q, CostOptions{1, 2048, 4, Recompute::kFull});
  const LayerCost& blk = layers[1];
  const double expert = 2.0 * 2048 * 8 * 3 * 4096 * 1536;  // gate, up and down of the 8 routed experts
  EXPECT_DOUBLE_EQ(blk.expert_fwd_flops, expert);
  EXPECT_DOUBLE_EQ(blk.expert_bwd_input_flops, expert);
  EXPECT_DOUBLE_EQ(blk.expert_bwd_weight_flops, expert);
  EXPECT_DOUBLE_EQ(blk.expert_recompute_flops, expert);
  EXPECT_DOUBLE_EQ(blk.expert_gemm_gflop, expert / 3 / 4 / 1e9);  // one of three grouped GEMMs per rank
  // All 128 experts receive tokens (2048 x 8 routings): each pass streams their bf16 weights, split by tp.
  EXPECT_EQ(blk.expert_weight_bytes, std::int64_t{128} * 3 * 4096 * 1536 * 2 / 4);
  // With 4 tokens only 32 experts can be active.
  EXPECT_EQ(model_layer_costs(q, CostOptions{1, 4, 4, Recompute::kNone})[1].expert_weight_bytes,
            std::int64_t{32} * 3 * 4096 * 1536 * 2 / 4);
  // A dense model has no expert share.
  EXPECT_EQ(model_layer_costs(load_model("llama3-8b"), CostOptions{1, 2048, 1, Recompute::kNone})[1]
                .expert_fwd_flops,
            0);
}

TEST(CostModel, ExpertParallelismSplitsExpertsAndExchangesTokens) {
  // Qwen3-235B-A22B, 2048 tokens, tp 4, experts over ep = 8 ranks: 16 of the 128 experts per rank.
  const ModelSpec q = load_model("qwen3-235b-a22b");
  CostOptions o{1, 2048, 4, Recompute::kFull};
  const LayerCost whole = model_layer_costs(q, o)[1];
  o.ep = 8;
  const LayerCost blk = model_layer_costs(q, o)[1];
  const std::int64_t experts = std::int64_t{128} * 3 * 4096 * 1536;
  EXPECT_EQ(blk.params, whole.params - experts + experts / 8);
  EXPECT_EQ(blk.param_bytes, (blk.params + 3) / 4 * 16);
  // The rank's 16 experts all receive tokens: their weights are what a pass streams.
  EXPECT_EQ(blk.expert_weight_bytes, std::int64_t{16} * 3 * 4096 * 1536 * 2 / 4);
  // Dispatch and combine: 2048 tokens x 8 routed copies x 4096 x 2 B, split over the 4 TP ranks, each way.
  EXPECT_EQ(blk.ep_alltoall_bytes, 2 * (std::int64_t{2048} * 8 * 4096 * 2 / 4));
  EXPECT_EQ(blk.ep_alltoalls, 2);
  // Routing: the same expert FLOPs per rank on average (as many tokens arrive as leave).
  EXPECT_DOUBLE_EQ(blk.expert_fwd_flops, whole.expert_fwd_flops);
  // The busiest rank with 1.5x the average: recorded for the timing, FLOPs (for MFU) unchanged.
  o.moe_imbalance = 1.5;
  const LayerCost skewed = model_layer_costs(q, o)[1];
  EXPECT_DOUBLE_EQ(skewed.expert_imbalance, 1.5);
  EXPECT_DOUBLE_EQ(skewed.fwd_flops, blk.fwd_flops);
  EXPECT_DOUBLE_EQ(skewed.expert_gemm_gflop, 1.5 * blk.expert_gemm_gflop);
}

TEST(CostModel, UnfusedAttentionComputesEveryScoreAndMovesThemThroughHbm) {
  // Llama-3-8B block, b 2, s 2048, tp 2: 32 heads of 128. The score GEMMs compute all s^2 scores (the model
  // FLOPs count the causal half), and QK^T writes / AV reads 2 B per score; the backward moves twice that.
  const ModelSpec m = load_model("llama3-8b");
  CostOptions o{2, 2048, 2, Recompute::kSelective};
  o.attention = AttentionKernel::kUnfused;
  const LayerCost blk = model_layer_costs(m, o)[1];
  const double all = 2.0 * 2048 * 4 * 2048 * 32 * 128;  // tokens x 4 x keys x q
  EXPECT_DOUBLE_EQ(blk.attention_fwd_flops, all);
  EXPECT_DOUBLE_EQ(blk.attention_masked_flops, all / 2);
  EXPECT_DOUBLE_EQ(blk.attention_bwd_flops, 2 * all);
  EXPECT_DOUBLE_EQ(blk.attention_recompute_flops, all);  // selective recompute re-runs the attention core
  const std::int64_t scores = std::int64_t{32} * 2048 * 2048 * 2 / 2;
  EXPECT_EQ(blk.attention_fwd_bytes, 4 * scores);
  EXPECT_EQ(blk.attention_bwd_bytes, 8 * scores);
  // Flash attention skips the masked blocks and keeps the scores on chip.
  o.attention = AttentionKernel::kFlash;
  const LayerCost flash = model_layer_costs(m, o)[1];
  EXPECT_EQ(flash.attention_fwd_flops, 0);
  EXPECT_EQ(flash.attention_fwd_bytes, 0);
}

TEST(CostModel, ScoreGemmsTakeTheLongerOfTheirFlopsAndTheirScoreBytes) {
  const HardwareProfile hw = load_hardware_profile("a100-80g-sxm-8x");
  const double flops = 1e12, attention = 3e11;
  const std::int64_t rest = hw.compute_ns(flops - attention, 500, 10, "fp16") + hw.memory_ns(1'000'000);
  // Head dim 128: 2 x 128 FLOPs per 2-byte score; at A100's bandwidth the bytes decide.
  const auto bytes = static_cast<std::int64_t>(attention / 128);
  ASSERT_GT(hw.memory_ns(bytes), hw.compute_ns(attention, 500, 0, "fp16"));
  EXPECT_EQ(hw.op_ns(flops, 500, 10, "fp16", 1'000'000, 0, 0, 0, attention, bytes),
            rest + hw.score_memory_ns(bytes));
  // Few bytes: the FLOPs decide; no bytes: the attention FLOPs are ordinary GEMM FLOPs.
  EXPECT_EQ(hw.op_ns(flops, 500, 10, "fp16", 1'000'000, 0, 0, 0, attention, 1000),
            rest + hw.compute_ns(attention, 500, 0, "fp16"));
  EXPECT_EQ(hw.op_ns(flops, 500, 10, "fp16", 1'000'000, 0, 0, 0, attention, 0),
            hw.compute_ns(flops, 500, 10, "fp16") + hw.memory_ns(1'000'000));
}

TEST(CostModel, ScoreKernelsRunAtTheUnfusedAttentionBandwidth) {
  // A100: 2039 GB/s; streaming kernels at 79 % of it, unfused attention's score kernels at 62 %
  // (FlashAttention's measurement of standard attention): 1 GB takes ceil(1e9 / 1264.18 GB/s) = 791,027 ns,
  // not ceil(1e9 / 1610.81 GB/s) = 620,806.
  HardwareProfile hw = load_hardware_profile("a100-80g-sxm-8x");
  ASSERT_DOUBLE_EQ(hw.gpu.unfused_attention_efficiency, 0.62);
  EXPECT_EQ(hw.memory_ns(1'000'000'000), 620'806);
  EXPECT_EQ(hw.score_memory_ns(1'000'000'000), 791'027);
  // Of an op's memory-bound bytes, the score share takes the slower rate; the rest the streaming one.
  const std::int64_t mem = 3'000'000'000, scores = 1'000'000'000;
  EXPECT_EQ(hw.op_ns(0, 1, 0, "fp16", mem, 0, 0, 0, 0, 0, 0, scores), hw.memory_ns(mem - scores) + 791'027);
  // Score GEMMs bound by their bytes move them at the same rate.
  EXPECT_EQ(hw.op_ns(1e6, 1, 0, "fp16", 0, 0, 0, 0, 1e6, scores), hw.compute_ns(0, 1, 0, "fp16") + 791'027);
  // A profile without the figure times the scores like any streaming kernel.
  hw.gpu.unfused_attention_efficiency = 0;
  EXPECT_EQ(hw.op_ns(0, 1, 0, "fp16", mem, 0, 0, 0, 0, 0, 0, scores), hw.memory_ns(mem));
}

TEST(CostModel, ExpertGemmsTakeTheLongerOfTheirFlopsAndTheirWeightBytes) {
  const HardwareProfile hw = load_hardware_profile("h100-sxm-8x");
  const double flops = 1e12, expert = 4e11;
  const std::int64_t dense = hw.compute_ns(flops - expert, 100, 10, "bf16") + hw.memory_ns(1'000'000);
  // Few bytes: the grouped GEMM's FLOPs decide.
  EXPECT_EQ(hw.op_ns(flops, 100, 10, "bf16", 1'000'000, expert, 50, 1'000),
            dense + hw.compute_ns(expert, 50, 0, "bf16"));
  // Many bytes (few tokens per expert): streaming the weights decides.
  const std::int64_t weights = 20'000'000'000;
  ASSERT_GT(hw.memory_ns(weights), hw.compute_ns(expert, 50, 0, "bf16"));
  EXPECT_EQ(hw.op_ns(flops, 100, 10, "bf16", 1'000'000, expert, 50, weights), dense + hw.memory_ns(weights));
}

}  // namespace
}  // namespace pipesim::sim
