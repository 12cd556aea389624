// torchtitan's per-op selective activation checkpointing (framework setting selective_recompute
// every-other-linear): what a block keeps and what it re-runs, counted by hand for Llama-3-8B.
#include <gtest/gtest.h>

#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "pipesim/sim/workload/model.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

TEST(SelectiveOps, EveryOtherLinearsOutputAndTheAttentionKernelsAreKept) {
  // One 8192-token sequence on one GPU. The block's linears run q (4096 wide), k (1024), v (1024), o (4096),
  // gate (14336), up (14336), down (4096): q, v, gate and down keep their bf16 outputs, and the attention
  // kernel its (4096), beside the block's input; k, o and up are recomputed: 2 x 4096 x (1024 + 4096 +
  // 14336) FLOPs a token.
  const ModelSpec m = load_model("llama3-8b");
  const std::int64_t s = 8192;
  CostOptions o{1, s, 1, Recompute::kSelective};
  o.attention = AttentionKernel::kFlash;
  o.selective_every_other_linear = true;
  const LayerCost block = model_layer_costs(m, o)[1];
  const std::int64_t input = 2 * s * 4096;
  EXPECT_EQ(block.stored_activation_bytes, input + 2 * s * (4096 + 1024 + 14336 + 4096 + 4096));
  EXPECT_DOUBLE_EQ(block.recompute_flops, static_cast<double>(s) * 2 * 4096 * (1024 + 4096 + 14336));
  // The re-run forward's element-wise kernels move what the forward's did.
  EXPECT_EQ(block.recompute_mem_bytes, block.fwd_mem_bytes);
  // Megatron's selective recompute on the same block: flash attention keeps everything, recomputes nothing.
  o.selective_every_other_linear = false;
  const LayerCost megatron = model_layer_costs(m, o)[1];
  EXPECT_EQ(megatron.recompute_flops, 0);
  EXPECT_GT(megatron.stored_activation_bytes, block.stored_activation_bytes);
}

TEST(SelectiveOps, FsdpsSelectiveRecomputeSitsBetweenNoneAndFull) {
  // torchtitan's Llama-3-8B on 8 H100s under FSDP at microbatch 2 of 8K tokens: its selective AC fits where
  // no recompute does not, and costs less time than full recompute.
  JobOptions j = testing::job("llama3-8b", "h100-sxm-8x", 1, 1, 8, 1);
  j.seq = 8192;
  j.microbatch_size = 2;
  j.global_batch = 16;
  j.zero = 3;
  j.framework = "fsdp";
  auto run = [&](const char* recompute) {
    j.recompute = recompute;
    return testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b")));
  };
  const auto none = run("none"), selective = run("selective"), full = run("full");
  EXPECT_LT(testing::step_ns(none), testing::step_ns(selective));
  EXPECT_LT(testing::step_ns(selective), testing::step_ns(full));
  EXPECT_GT(none.metrics.peak_gpu_mem_bytes, selective.metrics.peak_gpu_mem_bytes);
  EXPECT_GT(selective.metrics.peak_gpu_mem_bytes, full.metrics.peak_gpu_mem_bytes);
}

}  // namespace
}  // namespace pipesim::sim
