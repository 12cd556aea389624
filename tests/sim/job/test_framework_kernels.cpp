// A framework's own kernels (frameworks/hf-transformers.json): a block's element-wise bytes, launches and
// saved tensors, and the loss's, are exactly the sums of the entries that apply to the model, checked by
// hand against the entries' formulas; launches counted in a trace replace the entries' count; a stage with a
// tied embedding and head holds the matrix once; bad entries are refused naming their JSON path.
#include <gtest/gtest.h>

#include <string>

#include "core/json_reader.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/job/framework.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

std::vector<LayerCost> hf_costs(const std::string& model, std::int64_t b, std::int64_t s, Recompute r) {
  CostOptions o{b, s, 1, r};
  o.attention = AttentionKernel::kFlash;
  o.sequence_parallel = false;
  o.composition = load_framework("hf-transformers").kernels;
  return model_layer_costs(load_model(model), o);
}

TEST(FrameworkKernels, Qwen3BlockBytesAndLaunchesByHand) {
  // Qwen3-1.7B (RMSNorm, q/k norms, rotary, SwiGLU, tied) at 2048 tokens: T x h = 2048 x 2048, q = 16 x 128,
  // k = v = 8 x 128, ffn 6144; block parameters 2048 x (2048 + 2 x 1024) + 2048 x 2048 + 3 x 2048 x 6144 +
  // 2 x 2048.
  const std::int64_t T = 2048, h = 2048, q = 2048, kv = 1024, f = 6144;
  const std::int64_t params = h * (q + 2 * kv) + q * h + 3 * h * f + 2 * h;
  const LayerCost block = hf_costs("qwen3-1.7b", 1, 2048, Recompute::kNone)[1];
  // Forward: norms 56, activation casts 30, residual adds 20 per T x h; q_norm 38 + rotary 40 + cast 6 per
  // query and key element; SiLU and product 10 per inner; weight casts 6 per parameter.
  EXPECT_EQ(block.fwd_mem_bytes, (56 + 30 + 20) * T * h + 84 * T * q + 84 * T * kv + 10 * T * f + 6 * params);
  // Backward: 152 + 66 + 12 per T x h; 88 + 44 + 6 per query and key element; 18 per inner; 8 per parameter.
  EXPECT_EQ(block.bwd_mem_bytes, 230 * T * h + 138 * T * q + 138 * T * kv + 18 * T * f + 8 * params);
  // 67 launches in the forward, as measured in the layer's trace (12 norm, 7 + 5 casts, 7 GEMMs and 2
  // memsets, 16 q/k norm, 10 rotary, 2 SDPA casts, the attention kernel and its memset, 2 adds, SiLU and
  // product).
  EXPECT_EQ(block.kernels, 67);
  // Saved: 26 per T x h, 6 + 6 per query element, 6 + 4 per key/value element, 8 per inner, 2 per parameter.
  EXPECT_EQ(block.stored_activation_bytes, 26 * T * h + 12 * T * q + 10 * T * kv + 8 * T * f + 2 * params);
}

TEST(FrameworkKernels, Gpt2UsesItsOwnEntries) {
  // GPT-2 (LayerNorm, learned positions, GELU, no q/k norms) at 1024 tokens: 32 launches a block.
  const std::int64_t T = 1024, h = 768, f = 3072;
  const std::int64_t params = 3 * h * h + h * h + 2 * h * f + 2 * h;
  const LayerCost block =
      hf_costs(std::string(PIPESIM_TEST_DATA_DIR) + "/hf/gpt2.json", 1, 1024, Recompute::kNone)[1];
  EXPECT_EQ(block.kernels, 2 + 8 + 2 + 4 + 2 + 2 + 9 + 1 + 2);
  EXPECT_EQ(block.fwd_mem_bytes, (16 + 12 + 20 + 8) * T * h + (70 + 6) * T * f + 6 * params);
  EXPECT_EQ(block.stored_activation_bytes, 22 * T * h + 18 * T * f + 2 * params);
}

TEST(FrameworkKernels, LossAndTiedMatrixByHand) {
  const std::int64_t T = 2048, h = 2048, V = 151936;
  const std::vector<LayerCost> c = hf_costs("qwen3-1.7b", 1, 2048, Recompute::kNone);
  const LayerCost& head = c.back();
  // The loss at its peak keeps 12 B a logit, the bf16 matrix copy 2 B an element, the final norm 10 B a T x h
  // element, plus the head's fp32 input (4 B a T x h element: the residual stream).
  EXPECT_EQ(head.stored_activation_bytes, 12 * T * V + 2 * V * h + 10 * T * h + 4 * T * h);
  EXPECT_EQ(head.fwd_mem_bytes, 34 * T * h + 6 * V * h + 18 * T * V);
  // Full recompute keeps each block's fp32 input only.
  EXPECT_EQ(hf_costs("qwen3-1.7b", 1, 2048, Recompute::kFull)[1].stored_activation_bytes, 4 * T * h);
  // One stage holding the tied embedding and the head holds the matrix once: 16 B a parameter.
  EXPECT_EQ(head.tied_copy_bytes, 16 * V * h);
}

TEST(FrameworkKernels, AStageWithBothEndsHoldsATiedMatrixOnce) {
  JobOptions j = testing::job("qwen3-1.7b", "h100-sxm-8x", 1, 1, 1, 1);
  j.framework = "hf-transformers";
  const Plan one = testing::plan_of("1f1b", j);
  j.pp = 2;
  j.nodes = 1;
  const Plan two = testing::plan_of("1f1b", j);
  const std::int64_t matrix = 16 * std::int64_t{151936} * 2048;
  // Two stages: the last keeps its own copy of the tied matrix, as Megatron does.
  EXPECT_EQ(two.devices[0].resident_bytes + two.devices[1].resident_bytes,
            one.devices[0].resident_bytes + matrix);
}

TEST(FrameworkKernels, ElementwiseKernelsStreamAtTheFrameworksShare) {
  JobOptions j = testing::job("qwen3-1.7b", "h100-sxm-8x", 1, 1, 1, 1);
  j.framework = "hf-transformers";
  j.host_dispatch_us = 0.0;  // the GPU's time alone
  Plan plan = testing::plan_of("1f1b", j);
  EXPECT_DOUBLE_EQ(plan.meta.elementwise_efficiency, 0.87);
  const Timeline slow = Engine{}.run(plan);
  plan.meta.elementwise_efficiency = 1;
  const Timeline fast = Engine{}.run(plan);
  const ComputeWork* forward = compute_of(plan.ops[0].payload);
  ASSERT_NE(forward, nullptr);
  // The forward's memory-bound bytes take 1 / 0.87 as long; nothing else changes.
  const auto extra =
      plan.hw.memory_ns(static_cast<std::int64_t>(static_cast<double>(forward->mem_bytes) / 0.87)) -
      plan.hw.memory_ns(forward->mem_bytes);
  EXPECT_NEAR(static_cast<double>((slow.end[0] - slow.start[0]) - (fast.end[0] - fast.start[0])),
              static_cast<double>(extra), 2.0);
}

TEST(FrameworkKernels, TracedLaunchesReplaceTheEntriesCount) {
  // A framework refit from a trace (calibrate --from-trace --framework-out) names each layer's launches a
  // pass: they replace the 67 the entries count for Qwen3's block and the backward's twice that; at TP 2 the
  // block's two all-reduces still add a launch each, which a one-GPU trace could not have held.
  const std::string text =
      refit_framework("hf-transformers", "traced",
                      FrameworkRefit{24, "a trace", LayerLaunches{20, 7, "a trace"},
                                     LayerLaunches{70, 150, "a trace"}, LayerLaunches{16, 24, "a trace"}});
  CostOptions o{1, 2048, 1, Recompute::kNone};
  o.attention = AttentionKernel::kFlash;
  o.sequence_parallel = false;
  o.composition = parse_framework(text, "traced.json").kernels;
  const std::vector<LayerCost> c = model_layer_costs(load_model("qwen3-1.7b"), o);
  EXPECT_EQ(c.front().kernels, 20);
  EXPECT_EQ(2 * c.front().kernels + c.front().input_grad_extra_kernels, 7);
  EXPECT_EQ(c[1].kernels, 70);
  EXPECT_EQ(2 * c[1].kernels + c[1].input_grad_extra_kernels, 150);
  EXPECT_EQ(c.back().kernels, 16);
  EXPECT_EQ(2 * c.back().kernels + c.back().input_grad_extra_kernels, 24);
  // The bytes stay the entries': the launches say how often the CPU launches, not what the kernels move.
  EXPECT_EQ(c[1].fwd_mem_bytes, hf_costs("qwen3-1.7b", 1, 2048, Recompute::kNone)[1].fwd_mem_bytes);
  o.tp = 2;
  EXPECT_EQ(model_layer_costs(load_model("qwen3-1.7b"), o)[1].kernels, 70 + 2);
}

TEST(FrameworkKernels, BadEntriesNameTheirPath) {
  nlohmann::json j = nlohmann::json::parse(
      detail::read_text_file(std::string(PIPESIM_SOURCE_DIR) + "/frameworks/hf-transformers.json"));
  auto err = [](const nlohmann::json& text) {
    return testing::error_of([&] { parse_framework(text.dump(), "f.json"); });
  };
  nlohmann::json bad = j;
  bad["kernels"]["block"]["forward"][0]["tensor"] = "hidden";
  EXPECT_EQ(
      err(bad).rfind("f.json: /kernels/block/forward/0/tensor: unknown tensor 'hidden'; valid: residual,", 0),
      0u);
  bad = j;
  bad["kernels"]["block"]["saved"][0]["when"] = "bert";
  EXPECT_EQ(
      err(bad).rfind("f.json: /kernels/block/saved/0/when: unknown model feature 'bert'; valid: always,", 0),
      0u);
  bad = j;
  bad["kernels"]["head"]["forward"][1]["bytes"] = -1;
  EXPECT_NE(err(bad).find("/kernels/head/forward/1/bytes"), std::string::npos);
  bad = j;
  bad["kernels"]["block"]["forward"][2]["source"] = "";
  EXPECT_EQ(err(bad).rfind("f.json: /kernels/block/forward/2/source: empty", 0), 0u);
  bad = j;
  bad["kernels"]["block"]["saved"][0]["kernels"] = 3;  // saved tensors launch nothing
  EXPECT_NE(err(bad).find("/kernels/block/saved/0/kernels: unknown key"), std::string::npos);
  bad = j;
  bad["kernels"]["residual_bytes"]["value"] = 3.5;
  EXPECT_NE(err(bad).find("/kernels/residual_bytes/value"), std::string::npos);
  bad = j;
  bad["kernels"]["elementwise_efficiency"]["value"] = 0.01;
  EXPECT_NE(err(bad).find("/kernels/elementwise_efficiency/value"), std::string::npos);
  bad = j;
  bad["kernels"]["block"]["launches"] = {{"forward", 67}, {"backward", -1}, {"source", "a trace"}};
  EXPECT_EQ(err(bad).rfind("f.json: /kernels/block/launches/backward:", 0), 0u);
  bad["kernels"]["block"]["launches"] = {{"forward", 67}, {"backward", 134}, {"source", ""}};
  EXPECT_EQ(err(bad).rfind("f.json: /kernels/block/launches/source: empty", 0), 0u);
  bad["kernels"]["block"]["launches"] = {{"forward", 67}, {"source", "a trace"}};
  EXPECT_EQ(err(bad).rfind("f.json: /kernels/block/launches/backward:", 0), 0u);
  bad = j;
  bad["kernels"]["block"]["forward"] = nlohmann::json::array();
  EXPECT_NE(err(bad).find("/kernels/block/forward: expected a list of 1 to 256 entries"), std::string::npos);
}

}  // namespace
}  // namespace pipesim::sim
