// nanotron as its code runs (frameworks/nanotron.json): its own pipeline split (build_model's cumulative
// block costs), a Llama block's element-wise bytes, launches and saved tensors counted by hand, and flash
// attention at FlashAttention-2's published rate on an H100. The models are the Ultra-Scale Playbook's 1B
// and 3B (nanotron scripts/scaling_benchmarks.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>

#include "core/json_reader.hpp"
#include "job/framework_split.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/job/framework.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

ModelSpec ultrascale(std::int64_t layers, std::int64_t hidden) {
  nlohmann::json m = {{"format", "pipesim-model"}, {"version", 1},
                      {"name", "ultrascale"},      {"source", "nanotron scripts/scaling_benchmarks.py"},
                      {"hidden_size", hidden},     {"num_layers", layers},
                      {"num_heads", 32},           {"num_kv_heads", 32},
                      {"ffn_hidden_size", 8192},   {"vocab_size", 131072},
                      {"tie_embeddings", true},    {"mlp", "swiglu"}};
  return parse_model(m.dump(), "ultrascale.json");
}

/// A job of the 2-block 1B model at 256 tokens under nanotron, on one pipeline stage.
JobOptions two_block_job(int tp, int dp) {
  JobOptions j = testing::job("", "h100-sxm-8x", 1, tp, dp, 2);
  j.loaded_model = std::make_shared<const ModelSpec>(ultrascale(2, 2048));
  j.seq = 256;
  j.framework = "nanotron";
  return j;
}

TEST(Nanotron, SplitsByCumulativeBlockCostsAsBuildModelDoes) {
  // 1B: a block costs 4 x 2048^2 + 3 x 8192 x 2048 = 67,108,864, the output layer 131,072 x 2048 =
  // 268,435,456 (four blocks); 1,342,177,280 in all. At pp 2 the stage closes after the block that passes
  // half (block 11 of 16); at pp 4 after blocks 6, 11 and 16, which leaves the output layer a stage of its
  // own.
  const ModelSpec one_b = ultrascale(16, 2048);
  EXPECT_EQ(block_cost_partition(one_b, 2), (std::vector<std::int32_t>{11, 5}));
  EXPECT_EQ(block_cost_partition(one_b, 4), (std::vector<std::int32_t>{6, 5, 5, 0}));
  // pp 8: nanotron's thresholds give 3, 3, 2, 3, 2, 3 blocks and the output layer closes stage 6, leaving the
  // loss alone on stage 7; pipesim keeps the output layer with the loss, so stage 6 takes a block from
  // stage 5.
  EXPECT_EQ(block_cost_partition(one_b, 8), (std::vector<std::int32_t>{3, 3, 2, 3, 2, 2, 1, 0}));
  // 3B: a block 4 x 3072^2 + 3 x 8192 x 3072 = 113,246,208, the output layer 402,653,184.
  const ModelSpec three_b = ultrascale(28, 3072);
  EXPECT_EQ(block_cost_partition(three_b, 4), (std::vector<std::int32_t>{8, 8, 8, 4}));
  EXPECT_EQ(block_cost_partition(three_b, 8), (std::vector<std::int32_t>{4, 4, 4, 4, 4, 4, 4, 0}));
}

TEST(Nanotron, ASimulatedJobUsesTheFrameworksSplitUnlessOneIsGiven) {
  JobOptions j = testing::job("", "h100-sxm-8x", 4, 1, 1, 8);
  j.loaded_model = std::make_shared<const ModelSpec>(ultrascale(16, 2048));
  j.seq = 4096;
  j.framework = "nanotron";
  EXPECT_EQ(testing::plan_of("1f1b", j).meta.partition, (std::vector<std::int32_t>{6, 5, 5, 0}));
  j.partition = "4,4,4,4";
  EXPECT_EQ(testing::plan_of("1f1b", j).meta.partition, (std::vector<std::int32_t>{4, 4, 4, 4}));
  j.partition.clear();
  j.framework = "megatron-core";  // Megatron splits the blocks evenly
  EXPECT_EQ(testing::plan_of("1f1b", j).meta.partition, (std::vector<std::int32_t>{4, 4, 4, 4}));
}

/// Bytes of the gradient all-reduces device 0 issues for data parallelism (one buffer per bucket).
/// Device 0's data-parallel gradient all-reduces of the first step: the collectives they stand for (a ring of
/// two ranks pays two latency steps a collective) and those collectives' bytes together (each op's share of
/// its buffer rounded down, so within a byte a collective of the buffers).
std::pair<std::int64_t, std::int64_t> dp_all_reduce_messages(const Plan& plan) {
  std::int64_t messages = 0, bytes = 0;
  for (const Op& op : plan.ops) {
    const auto* t = std::get_if<TransferWork>(&op.payload);
    const Stream& s = plan.streams[static_cast<std::size_t>(op.stream)];
    if (op.kind != OpKind::kAllReduce || t == nullptr || s.device != 0 || s.name != "collective" ||
        op.tags.iteration != 0)
      continue;
    messages += t->latency_steps / 2;
    bytes += t->latency_steps / 2 * t->message_bytes;
  }
  return {messages, bytes};
}

TEST(Nanotron, DataParallelismReducesTheFp32AccumulationBuffers) {
  // nanotron's DDP hook all-reduces its fp32 gradient buffers (gradient_accumulator.py get_fp32_accum_hook):
  // 4 B a parameter, twice what a 16-bit gradient all-reduce moves.
  JobOptions j = two_block_job(1, 2);
  EXPECT_EQ(load_framework("nanotron").dp_grad_bytes.value, 4);
  const auto [messages, fp32] = dp_all_reduce_messages(testing::plan_of("1f1b", j));
  nlohmann::json bf16 = nlohmann::json::parse(
      detail::read_text_file(std::string(PIPESIM_SOURCE_DIR) + "/frameworks/nanotron.json"));
  bf16["settings"].erase("dp_grad_bytes");  // absent: 16-bit gradients
  j.loaded_framework = std::make_shared<const Framework>(parse_framework(bf16.dump(), "bf16.json"));
  const auto [same_messages, half] = dp_all_reduce_messages(testing::plan_of("1f1b", j));
  EXPECT_EQ(same_messages, messages);
  EXPECT_GT(half, 0);
  EXPECT_LE(std::abs(fp32 - 2 * half), 2 * messages);
}

TEST(Nanotron, ItsDdpBucketsCloseAtTheirCapNeverSplittingATensor) {
  // torch DDP with nanotron's bucket_cap_mb 25: 25 MiB of bf16 parameters, 13,107,200. Last tensor first,
  // the output layer's norm (2,048) opens a bucket that block 1's down projection (2,048 x 8,192 =
  // 16,777,216) closes; its gate_up (33,554,432) goes alone; o (4,194,304) and qkv (12,582,912) close the
  // third; the norms' 4,096 open the next, which block 0's down closes, then its gate_up, o with qkv, and
  // the embedding (268,435,456) with block 0's norms: 7 all-reduces. Megatron's rule (no cap: whole layers
  // to 40 M parameters a collective) gives one a group of layers: block 1 with the output layer, block 0,
  // the embedding.
  EXPECT_EQ(load_framework("nanotron").dp_bucket_params.value, 13'107'200);
  const JobOptions j = two_block_job(1, 2);
  const auto [messages, bytes] = dp_all_reduce_messages(testing::plan_of("1f1b", j));
  const std::int64_t params = 268'435'456 + 2 * (67'108'864 + 2 * 2048) + 2048;
  EXPECT_EQ(messages, 7);
  // Each op's collectives are equal shares of its bytes, rounded down: within a byte a collective.
  EXPECT_LE(bytes, 4 * params);
  EXPECT_GE(bytes, 4 * params - messages);
  nlohmann::json megatron = nlohmann::json::parse(
      detail::read_text_file(std::string(PIPESIM_SOURCE_DIR) + "/frameworks/nanotron.json"));
  megatron["settings"].erase("dp_bucket_params");
  JobOptions k = j;
  k.loaded_framework = std::make_shared<const Framework>(parse_framework(megatron.dump(), "megatron.json"));
  EXPECT_EQ(dp_all_reduce_messages(testing::plan_of("1f1b", k)), std::make_pair(std::int64_t{3}, 4 * params));
}

/// Memory device 0's parameter all-gathers allocate when they start and free when they end.
std::pair<std::int64_t, std::int64_t> all_gather_memory(const Plan& plan) {
  std::int64_t alloc = 0, freed = 0;
  for (const Op& op : plan.ops) {
    const Stream& s = plan.streams[static_cast<std::size_t>(op.stream)];
    if (op.kind != OpKind::kAllGather || s.device != 0) continue;
    alloc += plan.extras_of(op).alloc_bytes;
    freed += plan.extras_of(op).free_bytes;
  }
  return {alloc, freed};
}

TEST(Nanotron, ZeroOneGathersTheParametersThroughFlattenedCopies) {
  // optim/zero.py _all_gather_params -> distributed.py all_gather_coalesced: the rank's bf16 shard flattened
  // into a new buffer, every rank's part into new buffers, held while the gather runs. The 2-block 1B model
  // holds 131,072 x 2048 = 268,435,456 embedding parameters (tied), 2 x (67,108,864 + 2 x 2048 norm)
  // = 134,225,920 in its blocks and 2,048 in the final norm: 402,663,424. At dp 4: 2 x (402,663,424 +
  // 100,665,856) bytes.
  JobOptions j = two_block_job(1, 4);
  j.zero = 1;
  EXPECT_EQ(all_gather_memory(testing::plan_of("1f1b", j)),
            (std::pair<std::int64_t, std::int64_t>{1'006'658'560, 1'006'658'560}));
  // Megatron-Core's distributed optimizer gathers into the parameters' own buffer: nothing more.
  j.framework = "megatron-core";
  EXPECT_EQ(all_gather_memory(testing::plan_of("1f1b", j)), (std::pair<std::int64_t, std::int64_t>{0, 0}));
  // One data-parallel rank: nanotron gathers nothing.
  j = two_block_job(1, 1);
  j.zero = 1;
  EXPECT_EQ(all_gather_memory(testing::plan_of("1f1b", j)), (std::pair<std::int64_t, std::int64_t>{0, 0}));
}

/// nanotron's framework file less one setting, for a job to load.
std::shared_ptr<const Framework> nanotron_without(const std::string& setting) {
  nlohmann::json f = nlohmann::json::parse(
      detail::read_text_file(std::string(PIPESIM_SOURCE_DIR) + "/frameworks/nanotron.json"));
  f["settings"].erase(setting);
  return std::make_shared<const Framework>(parse_framework(f.dump(), "nanotron-less.json"));
}

TEST(Nanotron, WithoutDdpTheBf16GradientsLastOneBackward) {
  // trainer.py builds DDP (whose reducer keeps a bf16 buffer a bucket) only when dp > 1; without it
  // FP32GradientAccumulator.backward adds each bf16 gradient into the fp32 buffer and drops it. So at dp 1
  // the 2-block 1B model's 402,663,424 parameters hold 2 B each less for the whole run, and each backward
  // makes and frees them once.
  JobOptions j = two_block_job(1, 1);
  const Plan nanotron = testing::plan_of("1f1b", j);
  j.loaded_framework = nanotron_without("grad_16bit_memory");  // absent: from the backward to the step
  const Plan held = testing::plan_of("1f1b", j);
  EXPECT_EQ(held.devices[0].resident_bytes - nanotron.devices[0].resident_bytes, 805'326'848);
  std::int32_t spikes = 0;
  for (const Op& op : nanotron.ops) {
    const OpExtras& x = nanotron.extras_of(op);
    if (op.kind != OpKind::kSync || x.alloc_bytes == 0) continue;
    EXPECT_EQ(x.alloc_bytes, 805'326'848);
    EXPECT_EQ(x.free_bytes, 805'326'848);
    ++spikes;
  }
  EXPECT_EQ(spikes, 2);  // one a microbatch's backward
  // Two data-parallel ranks: DDP's buckets hold them throughout, as the default counts them.
  j = two_block_job(1, 2);
  const Plan ddp = testing::plan_of("1f1b", j);
  j.loaded_framework = nanotron_without("grad_16bit_memory");
  EXPECT_EQ(testing::plan_of("1f1b", j).devices[0].resident_bytes, ddp.devices[0].resident_bytes);
}

TEST(Nanotron, SequenceParallelTpKeepsTwoGatherBuffers) {
  // MemoryBuffer's "allgather" and "allgather2": each a microbatch's whole hidden states in bf16, kept for
  // the run. Microbatch 2, 256 tokens, hidden 2048: 2 x 2 x 2 x 256 x 2048 = 4,194,304 bytes.
  JobOptions j = two_block_job(2, 1);
  j.microbatch_size = 2;
  j.sequence_parallel = true;
  const std::int64_t kept = testing::plan_of("1f1b", j).devices[0].resident_bytes;
  j.loaded_framework = nanotron_without("tp_gather_buffers");
  EXPECT_EQ(kept - testing::plan_of("1f1b", j).devices[0].resident_bytes, 4'194'304);
  // Without sequence parallelism nanotron all-reduces and gathers nothing.
  j.loaded_framework = nullptr;
  j.sequence_parallel = false;
  const std::int64_t all_reduce = testing::plan_of("1f1b", j).devices[0].resident_bytes;
  j.loaded_framework = nanotron_without("tp_gather_buffers");
  EXPECT_EQ(testing::plan_of("1f1b", j).devices[0].resident_bytes, all_reduce);
}

TEST(Nanotron, ItsProcessGroupsNcclBuffersComeOffEachGpusCapacity) {
  // tp 4 x pp 2 on one node of h100-p5-8x (tp fastest, then dp, then the stages): rank 0's communicators
  // are the default group and world_pg (8 GPUs each: 24 x 12 MiB of ring, as much of tree, 24 x 6 MiB of
  // NVLS for each of 8 GPUs: 1,728 MiB), tp {0..3} (1,152 MiB), pp {0, 4} (288 MiB), mp (tp x pp: all 8
  // GPUs, a group of its own beside world_pg: 1,728 MiB) and the peer stage (a two-rank communicator, 288
  // MiB, and 32 channels of send and receive connections, 384 MiB); dp is rank 0 alone and the tied
  // embeddings' first and last stage are pp's ranks again.
  constexpr std::int64_t kMiB = 1 << 20;
  JobOptions j = testing::job("", "h100-p5-8x", 2, 4, 1, 4);
  j.loaded_model = std::make_shared<const ModelSpec>(ultrascale(2, 2048));
  j.seq = 256;
  j.framework = "nanotron";
  const Plan plan = testing::plan_of("1f1b", j);
  EXPECT_EQ(plan.meta.communicator_bytes, (3 * 1728 + 1152 + 288 + 288 + 384) * kMiB);
  EXPECT_EQ(plan.gpu_tensor_capacity(), plan.hw.gpu_tensor_capacity() - 7296 * kMiB);
  // The engine holds each GPU's tensors to it: with the capacity just under the peak it reports, the run
  // is out of memory.
  const testing::RunResult run = testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b")));
  EXPECT_FALSE(run.metrics.oom);
  EXPECT_EQ(nlohmann::json::parse(metrics_to_json(run.plan, run.metrics, 0))["gpu_mem_capacity_bytes"],
            plan.gpu_tensor_capacity());
  Plan tight = plan;
  tight.meta.communicator_bytes = plan.hw.gpu_tensor_capacity() - run.metrics.peak_gpu_mem_bytes + 1;
  EXPECT_TRUE(compute_metrics(tight, Engine{}.run(tight)).oom);
  // dp 8: the default group, world_pg and dp, each all 8 GPUs.
  j.pp = 1;
  j.tp = 1;
  j.dp = 8;
  EXPECT_EQ(testing::plan_of("1f1b", j).meta.communicator_bytes, 3 * 1728 * kMiB);
  // The plan carries it; a framework that lists no communicators, or a profile that does not state NCCL's
  // channels, counts none.
  EXPECT_EQ(plan_from_json(plan_to_json(plan), "plan.json").meta.communicator_bytes,
            plan.meta.communicator_bytes);
  j.loaded_framework = nanotron_without("nccl_communicators");
  EXPECT_EQ(testing::plan_of("1f1b", j).meta.communicator_bytes, 0);
  j.loaded_framework = nullptr;
  j.hw = "a100-80g-sxm-8x";
  EXPECT_EQ(testing::plan_of("1f1b", j).meta.communicator_bytes, 0);
}

std::vector<LayerCost> nanotron_costs(const ModelSpec& m, std::int64_t s, const KernelRate& rate = {}) {
  CostOptions o{1, s, 1, Recompute::kNone};
  o.attention = AttentionKernel::kFlash;
  o.sequence_parallel = false;
  o.attention_rate = rate;
  o.composition = load_framework("nanotron").kernels;
  return model_layer_costs(m, o);
}

TEST(Nanotron, BlockBytesLaunchesAndSavedTensorsByHand) {
  // 1B at 4096 tokens: T x h = 4096 x 2048, q = k = v = 32 x 64 = 2048 wide (multi-head), ffn 8192.
  const std::int64_t T = 4096, h = 2048, q = 2048, kv = 2048, f = 8192;
  const LayerCost block = nanotron_costs(ultrascale(16, 2048), T)[1];
  // Forward: norms 8 and residual adds 12 per T x h; the q/k/v copy (4 for q, 8 for k and v), cat (8),
  // the pair's permute (8) and rotary (4 each) per q and per k/v element; SiLU and product 10 per inner.
  EXPECT_EQ(block.fwd_mem_bytes, 20 * T * h + 8 * T * q + 28 * T * kv + 10 * T * f);
  // Backward: norms 12, forks 12; rotary 4, restacking 8 and 16, flash's dq and dO.O passes 14 per q
  // element, the pair's copy 8 per k/v element; SiLU-product and split 26 per inner.
  EXPECT_EQ(block.bwd_mem_bytes, 24 * T * h + 26 * T * q + 28 * T * kv + 26 * T * f);
  // 22 launches: 2 norms, 4 GEMMs, 3 copies, 2 rotary, 6 for cu_seqlens, the attention, 2 adds, SiLU and
  // product.
  EXPECT_EQ(block.kernels, 22);
  // Saved: the norms' inputs and outputs 8 per T x h, q and the output 4, the permuted copy's k and v and
  // the rotated pair 8, the fused gate-up output, SiLU's output and the product 8 per inner.
  EXPECT_EQ(block.stored_activation_bytes, 8 * T * h + 4 * T * q + 8 * T * kv + 8 * T * f);
}

TEST(Nanotron, TheAsynchronousLinearsSplitTheirGemmsAroundTheAllGather) {
  // _ColumnLinearAsyncCommunication.forward: the local rows' GEMM, then the rows before and after them; the
  // row linears' input gradient the same in the backward. On a middle rank (tp >= 3) each split adds two
  // GEMMs, on the end ranks of a tp 2 group one. A block has two column and two row linears.
  const ModelSpec one_b = ultrascale(16, 2048);
  for (std::int32_t tp : {1, 2, 4, 8}) {
    CostOptions o{1, 4096, tp, Recompute::kNone};
    o.attention = AttentionKernel::kFlash;
    o.composition = load_framework("nanotron").kernels;
    const LayerCost whole = model_layer_costs(one_b, o)[1];
    o.tp_shard_first_gemms = true;
    const LayerCost split = model_layer_costs(one_b, o)[1];
    const std::int32_t more = tp == 1 ? 0 : tp == 2 ? 1 : 2;
    EXPECT_EQ(split.kernels, whole.kernels + 2 * more) << tp;
    EXPECT_EQ(split.input_grad_extra_kernels, 2 * more) << tp;
    // The typical GEMM's size: the 21 GEMMs of the three passes (q, k, v, o, gate, up and down as the cost
    // model counts a block's) become 21 + 4 x more of the same FLOPs.
    EXPECT_DOUBLE_EQ(split.gemm_gflop, whole.gemm_gflop * 21 / (21 + 4 * more)) << tp;
    EXPECT_EQ(split.fwd_flops, whole.fwd_flops) << tp;
  }
  // In a job: only nanotron's asynchronous mode (--tp-overlap backward) under sequence parallelism splits
  // them; a whole backward launches the forward's kernels twice and the row linears' four more GEMMs.
  JobOptions j = testing::job("", "h100-sxm-8x", 1, 4, 1, 2);
  j.loaded_model = std::make_shared<const ModelSpec>(ultrascale(2, 2048));
  j.seq = 4096;
  j.framework = "nanotron";
  j.sequence_parallel = true;
  j.tp_overlap = "backward";
  const auto launches = [](const Plan& plan) {
    std::int32_t forward = 0, backward = 0;
    for (const Op& op : plan.ops) {
      const ComputeWork* c = compute_of(op.payload);
      if (c == nullptr || op.tags.microbatch != 0 ||
          plan.streams[static_cast<std::size_t>(op.stream)].device != 0)
        continue;
      if (op.kind == OpKind::kForward) forward += c->kernels;
      if (op.kind == OpKind::kBackward) backward += c->kernels;
    }
    return std::pair{forward, backward};
  };
  const auto [fwd, bwd] = launches(testing::plan_of("1f1b", j));
  j.tp_overlap = "none";
  const auto [fwd_whole, bwd_whole] = launches(testing::plan_of("1f1b", j));
  EXPECT_EQ(fwd, fwd_whole + 2 * 2 * 2);  // two blocks
  EXPECT_EQ(bwd, 2 * fwd + 2 * 2 * 2);
  EXPECT_EQ(bwd_whole, 2 * fwd_whole);
}

TEST(Nanotron, TheLossInFp32ByHand) {
  const std::int64_t T = 4096, h = 2048, V = 131072;
  const LayerCost head = nanotron_costs(ultrascale(16, 2048), T).back();
  // The final norm 4 per T x h; the fp32 cast 6 and the sharded cross entropy 32 per logit.
  EXPECT_EQ(head.fwd_mem_bytes, 4 * T * h + 38 * T * V);
  // Cross-entropy backward 8, the cast back 6 per logit; the final norm's backward 6 per T x h.
  EXPECT_EQ(head.bwd_mem_bytes, 14 * T * V + 6 * T * h);
  // Bf16 logits, their fp32 copy and the fp32 softmax at the loss's peak (10 a logit); the norm's output 2
  // and the head's input, the bf16 residual stream, 2 per T x h.
  EXPECT_EQ(head.stored_activation_bytes, 10 * T * V + 4 * T * h);
}

TEST(Nanotron, FlashAttentionRunsAtFlashAttention2sPublishedRate) {
  // On an H100 at head dimension 64 and 4096 tokens: 284 TFLOP/s forward and 279 backward as the
  // benchmark counts backward FLOPs (2.5 forwards), 279 / 1.25 in pipesim's (2 forwards).
  const HardwareProfile hw = load_hardware_profile("h100-sxm-8x");
  const KernelRate rate = attention_rate(hw.gpu.attention_kernels.at("flash-attn-2"), 64, 4096);
  EXPECT_DOUBLE_EQ(rate.forward_tflops, 284);
  EXPECT_DOUBLE_EQ(rate.backward_tflops, 279 / 1.25);
  const std::int64_t T = 4096;
  const LayerCost block = nanotron_costs(ultrascale(16, 2048), T, rate)[1];
  // Causal attention: a query attends to T / 2 keys on average; 4 x keys x 2048 FLOPs a token.
  const double attn = 4.0 * static_cast<double>(T) * (T / 2) * 2048;
  EXPECT_DOUBLE_EQ(block.fused_attention_fwd_flops, attn);
  EXPECT_DOUBLE_EQ(block.fused_attention_bwd_flops, 2 * attn);
  EXPECT_DOUBLE_EQ(block.fused_attention_rate.forward_tflops, 284);

  // The job takes the rate from the profile for the framework's kernel; a forward lasts longer by the
  // attention's time at that rate instead of the GEMMs'.
  JobOptions j = testing::job("", "h100-sxm-8x", 1, 1, 1, 1);
  j.loaded_model = std::make_shared<const ModelSpec>(ultrascale(16, 2048));
  j.seq = T;
  j.framework = "nanotron";
  j.host_dispatch_us = 0.0;
  const Plan plan = testing::plan_of("1f1b", j);
  const ComputeWork* forward = compute_of(plan.ops[0].payload);
  ASSERT_NE(forward, nullptr);
  EXPECT_DOUBLE_EQ(forward->rated_flops, 16 * attn);
  EXPECT_DOUBLE_EQ(forward->rated_tflops, 284);
  ComputeWork at_gemm_rate = *forward;
  at_gemm_rate.rated_flops = 0;
  const auto with_rate = hw.op_ns(forward->flops, forward->gemm_gflop, 0, "bf16", forward->mem_bytes, 0, 0, 0,
                                  0, 0, 0, 0, forward->rated_flops, forward->rated_tflops);
  const auto without = hw.op_ns(forward->flops, forward->gemm_gflop, 0, "bf16", forward->mem_bytes);
  EXPECT_GT(with_rate, without);
  EXPECT_NEAR(static_cast<double>(with_rate - without),
              16 * attn / 284e12 * 1e9 -
                  static_cast<double>(hw.compute_ns(16 * attn, forward->gemm_gflop, 0, "bf16")),
              2.0);
  // megatron-core names cuDNN's kernel (Transformer Engine prefers it on Hopper): cuDNN's rate.
  j.framework = "megatron-core";
  const Plan megatron_plan = testing::plan_of("1f1b", j);
  const ComputeWork* megatron = compute_of(megatron_plan.ops[0].payload);
  ASSERT_NE(megatron, nullptr);
  EXPECT_DOUBLE_EQ(megatron->rated_flops, 16 * attn);
  EXPECT_DOUBLE_EQ(megatron->rated_tflops,
                   attention_rate(hw.gpu.attention_kernels.at("cudnn"), 64, T).forward_tflops);
  // --attention-kernel replaces the framework's: gemm keeps the GEMM rate, another kernel takes its rate.
  j.attention_kernel = "gemm";
  const Plan gemm_plan = testing::plan_of("1f1b", j);
  const ComputeWork* gemm = compute_of(gemm_plan.ops[0].payload);
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->rated_flops, 0);
  j.attention_kernel = "flash-attn-2";
  const Plan flash_plan = testing::plan_of("1f1b", j);
  EXPECT_DOUBLE_EQ(compute_of(flash_plan.ops[0].payload)->rated_tflops, 284);
  EXPECT_EQ(flash_plan.meta.framework, "megatron-core");
}

TEST(Nanotron, AnAttentionKernelWithoutAPublishedRateOnTheGpuIsRefusedInOneLine) {
  JobOptions j = testing::job("", "h100-sxm-8x", 1, 1, 1, 1);
  j.loaded_model = std::make_shared<const ModelSpec>(ultrascale(16, 2048));
  j.seq = 4096;
  j.attention_kernel = "flash-attn-9";
  const std::string why = testing::error_of([&] { testing::plan_of("1f1b", j); });
  EXPECT_NE(why.find("'flash-attn-9' has no published rate on h100-sxm-8x; valid: gemm, cudnn, flash-attn-2"),
            std::string::npos)
      << why;
  j.hw = "b200-sxm-8x";
  j.attention_kernel = "cudnn";
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("valid: gemm"), std::string::npos);
}

TEST(Nanotron, BadSettingsNameTheirPath) {
  nlohmann::json j = nlohmann::json::parse(
      detail::read_text_file(std::string(PIPESIM_SOURCE_DIR) + "/frameworks/nanotron.json"));
  auto err = [](const nlohmann::json& text) {
    return testing::error_of([&] { parse_framework(text.dump(), "f.json"); });
  };
  nlohmann::json bad = j;
  bad["settings"]["pipeline_split"]["value"] = "greedy";
  EXPECT_EQ(err(bad),
            "f.json: /settings/pipeline_split/value: unknown value 'greedy'; valid: even, block-costs");
  bad = j;
  bad["settings"]["attention_kernel"]["value"] = "Flash Attn";
  EXPECT_EQ(err(bad).rfind("f.json: /settings/attention_kernel/value: expected a kernel name", 0), 0u);
  bad = j;
  bad["settings"]["tp_gather_buffers"]["value"] = 9;
  EXPECT_EQ(err(bad).rfind("f.json: /settings/tp_gather_buffers/value: ", 0), 0u);
  bad = j;
  bad["settings"]["grad_16bit_memory"]["value"] = "buckets";
  EXPECT_EQ(err(bad),
            "f.json: /settings/grad_16bit_memory/value: unknown value 'buckets'; valid: step, ddp-buckets");
  bad = j;
  bad["settings"]["nccl_communicators"]["value"] = {"world", "ranks"};
  EXPECT_EQ(err(bad).rfind(
                "f.json: /settings/nccl_communicators/value/1: unknown group 'ranks'; valid: world, ", 0),
            0u);
  bad = j;
  bad["settings"]["dp_bucket_params"]["value"] = 1000;  // a collective for every 1,000 parameters
  EXPECT_EQ(err(bad).rfind("f.json: /settings/dp_bucket_params/value: ", 0), 0u);
  bad = j;
  bad["settings"]["zero_param_gather"]["value"] = "copy";
  EXPECT_EQ(
      err(bad),
      "f.json: /settings/zero_param_gather/value: unknown value 'copy'; valid: in-place, flattened-copy");
}

}  // namespace
}  // namespace pipesim::sim
