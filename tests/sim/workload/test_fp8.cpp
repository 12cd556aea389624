// FP8 training (--dtype fp8): the blocks' GEMMs at the profile's FP8 peak; the attention core and the output
// head at its 16-bit peak, as Transformer Engine recipes run them; everything else as in bf16.
#include <gtest/gtest.h>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "pipesim/sim/workload/model.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

TEST(Fp8, GemmsAtTheFp8PeakAndTheRestAtTheSixteenBitPeak) {
  HardwareProfile hw = load_hardware_profile("h100-sxm-8x");
  ASSERT_DOUBLE_EQ(hw.gpu.peak_tflops.at("fp8"), 1979);
  hw.gpu.gemm_efficiency = {{1, 0.5}};      // every GEMM at half of peak, for round numbers
  hw.gpu.gemm_efficiency_by_dtype.clear();  // FP8's own measured curve too (Hardware.FP8Gemms...)
  hw.gpu.launch_overhead = 0;
  // 2 TFLOP of which 0.5 stay 16-bit: 1.5e12 / (1979e12 x 0.5) s = 1,515,917.1 ns and
  // 0.5e12 / (989e12 x 0.5) s = 1,011,122.3 ns, each rounded up.
  EXPECT_EQ(hw.op_ns(2e12, 100, 0, "fp8", 0, 0, 0, 0, 0, 0, 0.5e12), 1515918 + 1011123);
  // In bf16 the same op runs at 989 TFLOP/s throughout: 4,044,489.4 ns; its 16-bit share changes nothing.
  EXPECT_EQ(hw.op_ns(2e12, 100, 0, "bf16", 0), 4044490);
  EXPECT_EQ(hw.op_ns(2e12, 100, 0, "bf16", 0, 0, 0, 0, 0, 0, 0.5e12), 4044490);
  // Unfused attention's score GEMMs stay 16-bit too: 0.5e12 of score FLOPs against 1 byte of scores.
  EXPECT_EQ(hw.op_ns(2e12, 100, 0, "fp8", 0, 0, 0, 0, 0.5e12, 1), 1515918 + 1011123);
}

TEST(Fp8, EachRecipeCastsTheGemmOperandsAsTransformerEngineDoes) {
  // Llama-3-8B, one sequence of 8192 tokens on one GPU: a cast reads 2 B and writes a rowwise and a
  // columnwise byte an element; current scaling (tensorwise) reads the tensor once more for its amax first;
  // delayed scaling casts the q/k/v and MLP-up inputs inside the norms, the others after them (4 B).
  const ModelSpec m = load_model("llama3-8b");
  const std::int64_t s = 8192, residual = s * 4096, heads = s * 4096, inner = s * 14336, qkv = s * 6144;
  CostOptions bf16{1, s, 1, Recompute::kNone};
  const LayerCost base = model_layer_costs(m, bf16)[1];
  struct Expected {
    Fp8Recipe recipe;
    std::int64_t forward, backward;
    std::int32_t forward_kernels, backward_kernels;
  };
  const std::int64_t gradients =
      residual + 2 * inner + residual + qkv;  // MLP down, up (gate and up), o, q/k/v
  for (const Expected& e :
       {Expected{Fp8Recipe::kDelayed, 4 * (heads + inner), 4 * gradients, 2, 4},
        Expected{Fp8Recipe::kTensorwise, 2 * 4 * residual + 6 * (heads + inner), 6 * gradients, 2 + 2 * 2,
                 4 * 2},
        Expected{Fp8Recipe::kMxfp8, 2 * 4 * residual + 4 * (heads + inner), 4 * gradients, 2 + 2, 4}}) {
    CostOptions o = bf16;
    o.fp8 = true;
    o.fp8_recipe = e.recipe;
    const LayerCost block = model_layer_costs(m, o)[1];
    EXPECT_EQ(block.fwd_mem_bytes - base.fwd_mem_bytes, e.forward) << static_cast<int>(e.recipe);
    EXPECT_EQ(block.bwd_mem_bytes - base.bwd_mem_bytes, e.backward) << static_cast<int>(e.recipe);
    EXPECT_EQ(block.kernels - base.kernels, e.forward_kernels);
    // The backward launches twice the forward's kernels and its own beyond them: the casts' own count.
    EXPECT_EQ(
        2 * (block.kernels - base.kernels) + block.input_grad_extra_kernels - base.input_grad_extra_kernels,
        e.backward_kernels);
  }
}

JobOptions llama8b(const std::string& dtype) {
  JobOptions j = testing::job("llama3-8b", "h100-sxm-8x", 2, 1, 1, 4);
  j.seq = 4096;
  j.dtype = dtype;
  return j;
}

TEST(Fp8, AttentionAndTheOutputHeadAreTheSixteenBitShare) {
  // At the GEMM rate (no published kernel's rate: --attention-kernel gemm) the attention core is the
  // blocks' 16-bit share.
  JobOptions at_gemm_rate = llama8b("fp8");
  at_gemm_rate.attention_kernel = "gemm";
  const ScheduleInput in = make_schedule_input(at_gemm_rate, find_schedule("1f1b"));
  const auto& layers = in.costs.front();
  const LayerCost& block = layers[1];
  const LayerCost& head = layers.back();
  // Causal flash attention: 4 x (s/2) x (heads x head_dim) FLOPs per token, forward; twice that backward.
  const double tokens = 4096, attn = tokens * 4.0 * 2048 * 4096;
  EXPECT_DOUBLE_EQ(block.wide_fwd_flops, attn);
  EXPECT_DOUBLE_EQ(block.wide_bwd_input_flops, 2 * attn);
  EXPECT_DOUBLE_EQ(block.wide_bwd_weight_flops, 0);
  EXPECT_DOUBLE_EQ(block.fused_attention_fwd_flops, 0);
  // megatron-core runs cuDNN's fused attention, at its own published (16-bit) rate: none of it is the
  // GEMMs' 16-bit share then.
  const ScheduleInput cudnn_in = make_schedule_input(llama8b("fp8"), find_schedule("1f1b"));
  const LayerCost& cudnn_block = cudnn_in.costs.front()[1];
  EXPECT_DOUBLE_EQ(cudnn_block.fused_attention_fwd_flops, attn);
  EXPECT_DOUBLE_EQ(cudnn_block.fused_attention_bwd_flops, 2 * attn);
  EXPECT_DOUBLE_EQ(cudnn_block.wide_fwd_flops + cudnn_block.wide_bwd_input_flops, 0);
  // The output head: 2 x tokens x hidden x vocab in each of its three GEMMs.
  const double logits = 2 * tokens * 4096 * 128256;
  EXPECT_DOUBLE_EQ(head.wide_fwd_flops, logits);
  EXPECT_DOUBLE_EQ(head.wide_bwd_input_flops, logits);
  EXPECT_DOUBLE_EQ(head.wide_bwd_weight_flops, logits);
  // bf16 records none, so its plans are as before.
  const ScheduleInput bf16 = make_schedule_input(llama8b("bf16"), find_schedule("1f1b"));
  for (const auto& l : bf16.costs.front()) EXPECT_EQ(l.wide_fwd_flops + l.wide_bwd_input_flops, 0);
}

TEST(Fp8, StepIsFasterButNotTwiceAndMfuStaysBelowPeak) {
  auto bf16 = testing::simulate("1f1b", make_schedule_input(llama8b("bf16"), find_schedule("1f1b")));
  auto fp8 = testing::simulate("1f1b", make_schedule_input(llama8b("fp8"), find_schedule("1f1b")));
  EXPECT_LT(testing::step_ns(fp8), testing::step_ns(bf16));
  EXPECT_GT(2 * testing::step_ns(fp8), testing::step_ns(bf16));  // attention, head and memory-bound work
  EXPECT_GT(fp8.metrics.mfu, 0);
  EXPECT_LE(fp8.metrics.mfu, 1);
  // Activations are kept 16-bit; the GPU holds the FP8 copies of its stage's linear weights on top: pp 2
  // puts 16 of the 32 blocks on the first, 16 x 2 B x 218,103,808.
  EXPECT_EQ(fp8.metrics.peak_gpu_mem_bytes - bf16.metrics.peak_gpu_mem_bytes, 16 * 2 * 218'103'808LL);
  // The plan carries each op's 16-bit share and replays to the same timeline.
  const std::string text = plan_to_json(fp8.plan);
  EXPECT_NE(text.find("\"wide_flops\""), std::string::npos);
  EXPECT_EQ(plan_to_json(bf16.plan).find("\"wide_flops\""), std::string::npos);
  Plan back = plan_from_json(text, "fp8.json");
  EXPECT_EQ(Engine{}.run(back).end, fp8.timeline.end);
}

TEST(Fp8, ProfilesWithoutAnFp8PeakRefuseIt) {
  JobOptions j = llama8b("fp8");
  j.hw = "a100-80g-sxm-8x";
  const std::string e = testing::error_of(
      [&] { build_plan(find_schedule("1f1b"), make_schedule_input(j, find_schedule("1f1b"))); });
  EXPECT_NE(e.find("dtype: a100-80g-sxm-8x has no fp8 peak; valid: bf16, fp16, fp32"), std::string::npos)
      << e;
}

TEST(Fp8, TheStepKeepsEachLinearsFp8WeightCopies) {
  // Llama-3-8B's block: q/k/v 4096 x (4096 + 2 x 1024), o 4096 x 4096, gate/up/down 3 x 4096 x 14336 =
  // 218,103,808 linear weights (its two norms' 8,192 are not quantized). Transformer Engine keeps their
  // rowwise and columnwise FP8 copies through the step: 2 B each, at tp 2 half of them a rank; MXFP8 adds an
  // E8M0 scale per 32 in each direction.
  const ModelSpec m = load_model("llama3-8b");
  const std::int64_t linear = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336;
  ASSERT_EQ(linear, 218'103'808);
  CostOptions bf16{1, 8192, 2, Recompute::kNone};
  const LayerCost base = model_layer_costs(m, bf16)[1];
  EXPECT_EQ(base.fp8_weight_bytes, 0);
  for (const auto& [recipe, bytes] : {std::pair{Fp8Recipe::kDelayed, 2 * linear / 2},
                                      std::pair{Fp8Recipe::kMxfp8, 2 * linear / 2 + 2 * (linear / 2 / 32)}}) {
    CostOptions o = bf16;
    o.fp8 = true;
    o.fp8_recipe = recipe;
    const auto costs = model_layer_costs(m, o);
    EXPECT_EQ(costs[1].fp8_weight_bytes, bytes) << static_cast<int>(recipe);
    EXPECT_EQ(costs[1].param_bytes - base.param_bytes, bytes);
    // The embedding and the output layer stay 16-bit: no FP8 copy.
    EXPECT_EQ(costs.front().fp8_weight_bytes, 0);
    EXPECT_EQ(costs.back().fp8_weight_bytes, 0);
  }
}

}  // namespace
}  // namespace pipesim::sim
