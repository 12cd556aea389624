// The frameworks that shard data parallelism (frameworks/deepspeed.json, frameworks/fsdp.json): a block's
// element-wise bytes, launches and saved tensors counted by hand for one model each, and how their gradient
// reduction follows the ZeRO stage.
#include <gtest/gtest.h>

#include <string>

#include "pipesim/sim/job/framework.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/plan/plan.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

LayerCost block_of(const std::string& framework, const std::string& model, std::int64_t s) {
  CostOptions o{1, s, 1, Recompute::kNone};
  o.attention = AttentionKernel::kFlash;
  o.sequence_parallel = false;
  o.composition = load_framework(framework).kernels;
  return model_layer_costs(load_model(model), o)[1];
}

TEST(ZeroFrameworks, DeepSpeedRunsTheHfModelInBf16ByHand) {
  // Qwen3-1.7B at 2048 tokens: T x h = 2048 x 2048, q = 16 x 128, k = v = 8 x 128, ffn 6144.
  const std::int64_t T = 2048, h = 2048, q = 2048, kv = 1024, f = 6144;
  const std::int64_t params = h * (q + 2 * kv) + q * h + 3 * h * f + 2 * h;
  const LayerCost block = block_of("deepspeed", "qwen3-1.7b", T);
  // Forward: two RMSNorms on the bf16 stream with their fp32 upcast (36 each), residual adds 12; q/k norm 36,
  // rotary 20 per q and k element, the output's contiguous copy 4 per q element; SiLU and product 10.
  EXPECT_EQ(block.fwd_mem_bytes, 84 * T * h + 60 * T * q + 56 * T * kv + 10 * T * f);
  // 58 launches: 16 norm, 9 GEMMs and memsets, 16 q/k norm, 10 rotary, attention and memset, the copy, 2
  // adds, SiLU and product.
  EXPECT_EQ(block.kernels, 58);
  // Backward: norms 156 and forks 12 per T x h; q/k norms 78, rotary 22, attention's copy and passes 18 per q
  // element; SiLU-product 18; each weight gradient copied into ZeRO's bucket, 4 per parameter.
  EXPECT_EQ(block.bwd_mem_bytes, 168 * T * h + 118 * T * q + 100 * T * kv + 18 * T * f + 4 * params);
  // Saved: 16 per T x h, 14 per q, 12 per k/v, 8 per inner element; no weight copies (bf16 weights).
  EXPECT_EQ(block.stored_activation_bytes, 16 * T * h + 14 * T * q + 12 * T * kv + 8 * T * f);
}

TEST(ZeroFrameworks, FsdpRunsTorchtitansLlamaByHand) {
  // Llama-3-8B at 2048 tokens: T x h = 2048 x 4096, q = 32 x 128, k = v = 8 x 128, ffn 14336.
  const std::int64_t T = 2048, h = 4096, q = 4096, kv = 1024, f = 14336;
  const std::int64_t params = h * (q + 2 * kv) + q * h + 3 * h * f + 2 * h;
  const LayerCost block = block_of("fsdp", "llama3-8b", T);
  // Forward: fused norms 8 and adds 12; complex rotary 20 per q and k element, the output reshape 4; SiLU and
  // product 10.
  EXPECT_EQ(block.fwd_mem_bytes, 20 * T * h + 24 * T * q + 20 * T * kv + 10 * T * f);
  EXPECT_EQ(block.kernels, 2 + 7 + 3 + 3 + 1 + 1 + 2 + 2);
  // Backward: norms 12 and forks 12; rotary 20, the reshape 4; SiLU-product 18; the bf16 gradients cast to
  // fp32 for the reduce-scatter, 6 per parameter.
  EXPECT_EQ(block.bwd_mem_bytes, 24 * T * h + 24 * T * q + 20 * T * kv + 18 * T * f + 6 * params);
  EXPECT_EQ(block.stored_activation_bytes, 8 * T * h + 6 * T * q + 4 * T * kv + 8 * T * f);
}

TEST(ZeroFrameworks, TorchtitanOf2024RunsItsNormsInPyTorchOpsAndCopiesKAndVByHand) {
  // The same block as torchtitan ran it at the end of 2024: each RMSNorm eight kernels in fp32 (36 forward,
  // 92 backward per T x h element against the fused 4 and 6), and repeat_kv copying k and v to the 32 query
  // heads (read 2 + 2 per kv element, written 2 + 2 per q element; its backward sums them back).
  const std::int64_t T = 2048, h = 4096, q = 4096, kv = 1024, f = 14336;
  const std::int64_t params = h * (q + 2 * kv) + q * h + 3 * h * f + 2 * h;
  const LayerCost block = block_of("torchtitan-2024-12", "llama3-8b", T);
  EXPECT_EQ(block.fwd_mem_bytes, (72 + 12) * T * h + (24 + 4) * T * q + (20 + 4) * T * kv + 10 * T * f);
  EXPECT_EQ(block.kernels, 16 + 7 + 3 + 3 + 2 + 1 + 1 + 2 + 2);
  EXPECT_EQ(block.bwd_mem_bytes,
            (184 + 12) * T * h + (24 + 4) * T * q + (20 + 4) * T * kv + 18 * T * f + 6 * params);
  // Saved without recompute: the norms' fp32 inputs and bf16 outputs (12), SDPA's k and v as the copies.
  EXPECT_EQ(block.stored_activation_bytes, 12 * T * h + (6 + 4) * T * q + 8 * T * f);
  // A model with a key/value head for every query head copies nothing: Llama-2-7B (32 of each).
  const LayerCost mha = block_of("torchtitan-2024-12", "llama2-7b", T);
  const std::int64_t h2 = 4096, f2 = 11008;
  EXPECT_EQ(mha.fwd_mem_bytes, (72 + 12) * T * h2 + 24 * T * h2 + 20 * T * h2 + 10 * T * f2);
  EXPECT_EQ(mha.stored_activation_bytes, 12 * T * h2 + 6 * T * h2 + 4 * T * h2 + 8 * T * f2);
  EXPECT_EQ(load_framework("torchtitan-2024-12").kernels->optimizer_step_bytes_per_param, 92);
}

TEST(ZeroFrameworks, Fsdp2CopiesEachGatheredLayerIntoItsParametersBeforeTheFirstOpThatUsesThem) {
  // FSDP2 all-gathers a layer into one bf16 buffer and copies it into the parameters on the compute stream
  // (split_with_sizes_copy: read 2, write 2 a parameter, one launch), before the forward and again before the
  // backward's first op. DeepSpeed's and FSDP1's parameters are views of the gathered buffer.
  JobOptions j = testing::job("qwen3-1.7b", "h100-sxm-8x", 1, 1, 8, 2);
  j.framework = "fsdp";
  j.zero = 3;
  const ScheduleDescriptor& s = find_schedule("1f1b");
  const ScheduleInput with = make_schedule_input(j, s);
  ASSERT_EQ(with.gather_copy_bytes_per_param, 4);
  ScheduleInput without = with;
  without.gather_copy_bytes_per_param = 0;
  const Plan a = build_plan(s, with), b = build_plan(s, without);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  const auto& layers = with.costs.front();
  std::int64_t forwards = 0, copies = 0, copied_bytes = 0, gathered_bytes = 0;
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const ComputeWork* x = compute_of(a.ops[i].payload);
    const ComputeWork* y = compute_of(b.ops[i].payload);
    ASSERT_EQ(x == nullptr, y == nullptr);
    if (x == nullptr) continue;
    const OpTags& t = a.ops[i].tags;
    const std::int64_t params =
        t.layer_end == t.layer_begin + 1 ? layers[static_cast<std::size_t>(t.layer_begin)].params : 0;
    if (a.ops[i].kind == OpKind::kForward && params > 0) {
      ++forwards;
      gathered_bytes += 2 * 4 * params;  // each forward's layer is gathered again for its backward
    }
    if (x->mem_bytes == y->mem_bytes) {
      EXPECT_EQ(x->kernels, y->kernels);
      continue;
    }
    ++copies;
    copied_bytes += x->mem_bytes - y->mem_bytes;
    EXPECT_EQ(x->mem_bytes - y->mem_bytes, 4 * params) << "op " << i;
    EXPECT_EQ(x->kernels, y->kernels + 1) << "op " << i;
    EXPECT_EQ(x->flops, y->flops);
  }
  EXPECT_GT(forwards, 0);
  EXPECT_EQ(copies, 2 * forwards);
  EXPECT_EQ(copied_bytes, gathered_bytes);
  EXPECT_GT(testing::step_ns(testing::simulate("1f1b", with)),
            testing::step_ns(testing::simulate("1f1b", without)));
  EXPECT_EQ(load_framework("deepspeed").kernels->gather_copy_bytes_per_param, 0);
  EXPECT_EQ(load_framework("torchtitan-2024-12").kernels->gather_copy_bytes_per_param, 4);
}

TEST(ZeroFrameworks, AProfiledLayersMeasuredTimeTakesTheCopyOfItsGatheredWeightsAtTheStreamingRate) {
  // A profiled block of 10^6 parameters, sharded over two ranks: each forward's and each backward's measured
  // time grows by exactly the time of streaming 4 B a parameter.
  ScheduleInput in = testing::uniform_input(1, 2, 1'000'000, 600'000, 400'000);
  for (LayerCost& l : in.costs.front()) l.params = l.trainable_params = 1'000'000;
  in.dp = 2;
  in.sharding.stage = ZeroStage::k3;
  in.sharding.shard_group = 2;
  ScheduleInput with = in;
  with.gather_copy_bytes_per_param = 4;
  const ScheduleDescriptor& s = find_schedule("1f1b");
  const Plan a = build_plan(s, with), b = build_plan(s, in);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  const Duration copy = with.hw.memory_ns(4'000'000);
  ASSERT_GT(copy, 0);
  std::int32_t forwards = 0, backwards = 0;
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    if (a.ops[i].fixed_duration < 0) continue;
    const Duration extra = a.ops[i].fixed_duration - b.ops[i].fixed_duration;
    if (a.ops[i].kind != OpKind::kForward && a.ops[i].kind != OpKind::kBackward) continue;
    ++(a.ops[i].kind == OpKind::kForward ? forwards : backwards);
    EXPECT_EQ(extra, copy) << "op " << i;
  }
  EXPECT_EQ(forwards, 2);  // one block, two microbatches (one replica simulated)
  EXPECT_EQ(backwards, 2);
}

TEST(ZeroFrameworks, DeepSpeedReducesAfterTheBackwardUnlessGradientsAreSharded) {
  JobOptions j = testing::job("qwen3-1.7b", "h100-sxm-8x", 1, 1, 8, 4);
  j.framework = "deepspeed";
  const ScheduleDescriptor& s = find_schedule("1f1b");
  j.zero = 1;  // ZeRO-1 reduces once, after the last backward, on the compute stream
  EXPECT_FALSE(make_schedule_input(j, s).overlap_grad_sync);
  j.zero = 2;  // ZeRO-2 keeps a shard: each bucket is reduce-scattered as the backward produces it
  EXPECT_TRUE(make_schedule_input(j, s).overlap_grad_sync);
  j.grad_sync = "after-backward";  // given by the user, it is refused with ZeRO-2
  EXPECT_NE(testing::error_of([&] { make_schedule_input(j, s); }).find("valid: overlap"), std::string::npos);
}

}  // namespace
}  // namespace pipesim::sim
