// An output layer whose vocabulary shard is not a multiple of 8 (GPT-2's 50,257 tokens) runs on cuBLAS's
// alignment-1 kernels, at the rate the profile measured for them; Megatron pads the vocabulary to 128 x tp,
// which keeps it aligned. The ops carry those FLOPs as `rated_flops` at the rate that gives exactly their
// summed time.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/json_reader.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/job/framework.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "schedules/range_cost.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

const std::string kGpt2 = std::string(PIPESIM_SOURCE_DIR) + "/tests/fixtures/hf/gpt2.json";

JobOptions gpt2_job(const std::string& framework, int tp) {
  JobOptions j = testing::job(kGpt2, "h100-sxm-8x", 1, tp, 1, 1);
  j.seq = 1024;
  j.framework = framework;
  return j;
}

/// The plan's ops of one kind on GPU 0, in order.
std::vector<const ComputeWork*> work_of(const Plan& plan, OpKind kind) {
  std::vector<const ComputeWork*> out;
  for (const Op& op : plan.ops)
    if (op.kind == kind && plan.streams[op.stream].device == 0) out.push_back(compute_of(op.payload));
  return out;
}

TEST(UnalignedGemm, Gpt2sOutputLayerRunsAtTheRateMeasuredForUnalignedGemms) {
  // 1,024 tokens x 768 x 50,257: 2 x 1024 x 768 x 50257 FLOPs a GEMM, the forward's one, the backward's two
  // (input and weight gradients), at the H100's 94.6 and 143.1 TFLOP/s. hf-transformers also runs SDPA as
  // cuDNN's kernel at its own rate: the op's rated FLOPs are both, at the rate that gives their summed time.
  const double logits = 2.0 * 1024 * 768 * 50257;
  const double attention = 12 * 4.0 * 1024 * 512 * 768;  // 12 causal layers, 4 s (s / 2) h each
  const HardwareProfile hw = load_hardware_profile("h100-sxm-8x");
  const KernelRate cudnn = attention_rate(hw.gpu.attention_kernels.at("cudnn"), 64, 1024);
  const Plan plan = testing::plan_of("1f1b", gpt2_job("hf-transformers", 1));
  const auto forward = work_of(plan, OpKind::kForward);
  const auto backward = work_of(plan, OpKind::kBackward);
  ASSERT_EQ(forward.size(), 1u);
  ASSERT_EQ(backward.size(), 1u);
  const double forward_s = attention / (cudnn.forward_tflops * 1e12) + logits / 94.6e12;
  const double backward_s = 2 * attention / (cudnn.backward_tflops * 1e12) + 2 * logits / 143.1e12;
  EXPECT_DOUBLE_EQ(forward[0]->rated_flops, attention + logits);
  EXPECT_NEAR(forward[0]->rated_tflops, (attention + logits) / forward_s / 1e12, 1e-9);
  EXPECT_DOUBLE_EQ(backward[0]->rated_flops, 2 * attention + 2 * logits);
  EXPECT_NEAR(backward[0]->rated_tflops, (2 * attention + 2 * logits) / backward_s / 1e12, 1e-9);
  // The forward lasts the rated kernels' summed time beside the rest at the GEMM curve's rate.
  const ComputeWork& f = *forward[0];
  const auto rated =
      hw.op_ns(f.flops, f.gemm_gflop, 0, "bf16", 0, 0, 0, 0, 0, 0, 0, 0, f.rated_flops, f.rated_tflops);
  const auto unrated = hw.compute_ns(f.flops - f.rated_flops, f.gemm_gflop, 0, "bf16");
  EXPECT_NEAR(static_cast<double>(rated - unrated), forward_s * 1e9, 2.0);
}

TEST(UnalignedGemm, MegatronPadsTheVocabularyTo128TimesTp) {
  // megatron-core: 50,257 -> 50,304 at tp 1 and 50,432 at tp 2 (multiples of 128 and 256); each shard a
  // multiple of 8, so nothing runs at the unaligned rate (only cuDNN's attention has a rate of its own), and
  // the output GEMM computes the padded logits.
  const HardwareProfile hw = load_hardware_profile("h100-sxm-8x");
  const KernelRate cudnn = attention_rate(hw.gpu.attention_kernels.at("cudnn"), 64, 1024);
  for (int tp : {1, 2}) {
    const Plan plan = testing::plan_of("1f1b", gpt2_job("megatron-core", tp));
    const ComputeWork* forward = work_of(plan, OpKind::kForward)[0];
    const double attention = 12 * 4.0 * 1024 * 512 * 768 / tp;  // 12 causal layers, 4 s (s / 2) h / tp each
    EXPECT_DOUBLE_EQ(forward->rated_flops, attention) << "tp " << tp;
    EXPECT_NEAR(forward->rated_tflops, cudnn.forward_tflops, 1e-9) << "tp " << tp;
    const std::int64_t shard = tp == 1 ? 50304 : 50432 / 2;
    bool head = false;
    for (const GemmShape& g : forward->gemms) head = head || (g.n == shard && g.k == 768);
    EXPECT_TRUE(head) << "no 1024 x " << shard << " x 768 output GEMM at tp " << tp;
  }
  // Without padding, a shard of 50,264 / 2 = 25,132 is unaligned although the whole vocabulary is not.
  ModelSpec m = load_model(kGpt2);
  m.vocab = 50264;
  CostOptions o{1, 1024, 1, Recompute::kNone};
  o.unaligned_gemm_rate = {94.6, 143.1};
  EXPECT_EQ(model_layer_costs(m, o).back().unaligned_fwd_flops, 0);
  o.tp = 2;
  EXPECT_DOUBLE_EQ(model_layer_costs(m, o).back().unaligned_fwd_flops, 2.0 * 1024 * 768 * 50264);
  // A profile that measured no unaligned rate keeps the GEMM curve.
  o.unaligned_gemm_rate = {};
  EXPECT_EQ(model_layer_costs(m, o).back().unaligned_fwd_flops, 0);
}

TEST(UnalignedGemm, KernelsAtDifferentRatesAddTheirTimesExactly) {
  RatedWork w;
  w.add(284e12, 284);    // one second of flash attention
  w.add(94.6e12, 94.6);  // one second of an unaligned GEMM
  w.add(1e12, 0);        // no rate: not rated
  EXPECT_DOUBLE_EQ(w.flops, 378.6e12);
  EXPECT_DOUBLE_EQ(w.seconds, 2.0);
  EXPECT_DOUBLE_EQ(w.tflops(), 189.3);
  const RatedWork sum = w + RatedWork{1e12, 1.0};
  EXPECT_DOUBLE_EQ(sum.seconds, 3.0);
  EXPECT_EQ(RatedWork{}.tflops(), 0);
}

TEST(UnalignedGemm, BadFiguresNameTheirPath) {
  const std::string path = std::string(PIPESIM_SOURCE_DIR) + "/hw_profiles/h200-sxm-8x.json";
  const nlohmann::json profile = nlohmann::json::parse(detail::read_text_file(path));
  auto profile_error = [](auto edit) { return testing::edited_profile_error("h200-sxm-8x", edit); };
  EXPECT_NE(profile_error([](nlohmann::json& p) {
              p["gpu"]["unaligned_gemm_tflops"]["forward"] = -1;
            }).find("/gpu/unaligned_gemm_tflops/forward"),
            std::string::npos);
  EXPECT_NE(profile_error([](nlohmann::json& p) {
              p["gpu"]["unaligned_gemm_tflops"].erase("backward");
            }).find("/gpu/unaligned_gemm_tflops/backward"),
            std::string::npos);
  EXPECT_NE(profile_error([](nlohmann::json& p) {
              p["gpu"]["sources"].erase("unaligned_gemm_tflops");
            }).find("/gpu/sources/unaligned_gemm_tflops"),
            std::string::npos);
  // The figure survives a write and a read.
  const HardwareProfile hw = parse_hardware_profile(profile.dump(), "mine.json");
  const HardwareProfile again = parse_hardware_profile(hardware_profile_to_json(hw), "again.json");
  EXPECT_DOUBLE_EQ(again.gpu.unaligned_gemm.backward_tflops, 147.0);

  const std::string fpath = std::string(PIPESIM_SOURCE_DIR) + "/frameworks/megatron-core.json";
  nlohmann::json f = nlohmann::json::parse(detail::read_text_file(fpath));
  f["settings"]["vocab_padding"]["value"] = 0;
  EXPECT_NE(
      testing::error_of([&] { parse_framework(f.dump(), "fw.json"); }).find("/settings/vocab_padding/value"),
      std::string::npos);
  f["settings"]["vocab_padding"]["value"] = 1.5;
  EXPECT_NE(
      testing::error_of([&] { parse_framework(f.dump(), "fw.json"); }).find("/settings/vocab_padding/value"),
      std::string::npos);
  EXPECT_EQ(load_framework("megatron-core").vocab_padding.value, 128);
  EXPECT_EQ(load_framework("hf-transformers").vocab_padding.value, 1);
}

}  // namespace
}  // namespace pipesim::sim
