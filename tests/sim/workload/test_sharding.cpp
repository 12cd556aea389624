// Sharded data parallelism: ZeRO memory formulas, the per-layer gathers and reduce-scatters of ZeRO-3, and
// the checks on --zero / --fsdp / --offload.
#include <cmath>

#include <gtest/gtest.h>

#include "pipesim/sim/workload/sharding.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

DataParallelSharding zero(int stage, int ranks) {
  DataParallelSharding s;
  s.stage = static_cast<ZeroStage>(stage);
  s.shard_group = ranks;
  return s;
}

// Rajbhandari et al. 2020, Figure 1: (2 + 2 + K) psi, 2 psi + 2 psi + K psi / Nd, 2 psi + (2 + K) psi / Nd,
// (2 + 2 + K) psi / Nd with K = 12.
TEST(Sharding, MatchesTheZeroPaperFormulas) {
  // Parameter counts of GPT-2 1.5B, Llama-3-8B, a 7.5B model (the paper's example) and Llama-3-70B, sharded
  // over data-parallel groups they divide evenly.
  for (std::int64_t psi : {std::int64_t{1'557'611'200}, std::int64_t{8'030'261'248},
                           std::int64_t{7'500'000'000}, std::int64_t{70'553'706'496}}) {
    for (int nd : {1, 2, 8, 64}) {
      ASSERT_EQ(psi % nd, 0);
      EXPECT_EQ(sharded_state_bytes(psi, psi, zero(0, nd)).gpu(), 16 * psi);
      EXPECT_EQ(sharded_state_bytes(psi, psi, zero(1, nd)).gpu(), 4 * psi + 12 * psi / nd);
      EXPECT_EQ(sharded_state_bytes(psi, psi, zero(2, nd)).gpu(), 2 * psi + 14 * psi / nd);
      EXPECT_EQ(sharded_state_bytes(psi, psi, zero(3, nd)).gpu(), 16 * psi / nd);
    }
  }
  // The paper's worked example: 7.5B parameters on 64 GPUs need 120 GB, 31.4 GB, 16.6 GB and 1.9 GB.
  const std::int64_t psi = 7'500'000'000;
  EXPECT_EQ(sharded_state_bytes(psi, psi, zero(0, 64)).gpu(), 120'000'000'000);
  EXPECT_EQ(sharded_state_bytes(psi, psi, zero(1, 64)).gpu(), 31'406'250'000);
  EXPECT_EQ(sharded_state_bytes(psi, psi, zero(2, 64)).gpu(), 16'640'625'000);
  EXPECT_EQ(sharded_state_bytes(psi, psi, zero(3, 64)).gpu(), 1'875'000'000);
  // An uneven split pads the last shard.
  EXPECT_EQ(sharded_state_bytes(10, 10, zero(3, 3)).weights, 7);  // ceil(20 / 3)
}

TEST(Sharding, OffloadMovesStateToTheHost) {
  const std::int64_t psi = 8'000'000'000;
  DataParallelSharding s = zero(2, 8);
  s.offload_optimizer =
      true;  // ZeRO-Offload: fp16 weights and gradient shard stay, the rest moves to the host
  auto b = sharded_state_bytes(psi, psi, s);
  EXPECT_EQ(b.gpu(), 2 * psi + 2 * psi / 8);
  EXPECT_EQ(b.host,
            16 * psi / 8);  // master weights and moments (12) plus gradient and weight staging (2 + 2)
  s = zero(3, 8);
  s.offload_params = true;  // ZeRO-Infinity, parameters only
  b = sharded_state_bytes(psi, psi, s);
  EXPECT_EQ(b.gpu(), 14 * psi / 8);
  EXPECT_EQ(b.host, 2 * psi / 8);
  s.offload_optimizer = true;  // both: only the reduced gradient shard waits on the GPU for its copy down
  b = sharded_state_bytes(psi, psi, s);
  EXPECT_EQ(b.gpu(), 2 * psi / 8);
  EXPECT_EQ(b.host, 16 * psi / 8);
  EXPECT_EQ(describe(s), "zero-3+offload-both");
}

TEST(Sharding, PlansHoldTheFormulaBytesPerGpu) {
  // Llama-3-8B in two pipeline stages, eight data-parallel replicas: each GPU holds its stage's share.
  JobOptions j = testing::job("llama3-8b", "h100-sxm-8x", 2, 1, 8, 4);
  const std::int64_t unsharded = testing::plan_of("1f1b", j).devices[0].resident_bytes;
  ASSERT_EQ(unsharded % 16, 0);
  const std::int64_t psi = unsharded / 16;  // stage 0's parameters
  const auto ceil8 = [](std::int64_t x) { return (x + 7) / 8; };
  const std::int64_t expected[] = {16 * psi, 4 * psi + ceil8(12 * psi),
                                   2 * psi + ceil8(2 * psi) + ceil8(12 * psi),
                                   ceil8(2 * psi) + ceil8(2 * psi) + ceil8(12 * psi)};
  for (int z = 0; z <= 3; ++z) {
    j.zero = z;
    const Plan plan = testing::plan_of("1f1b", j);
    EXPECT_EQ(plan.devices[0].resident_bytes, expected[z]) << "zero " << z;
    EXPECT_EQ(plan.meta.data_parallel, z == 0 ? "ddp" : "zero-" + std::to_string(z));
  }
  // HSDP on 16 GPUs (pp 1): shards over the 8 GPUs of a node, replicated across the two nodes.
  JobOptions h = testing::job("llama3-8b", "h100-sxm-8x", 1, 1, 16, 2);
  h.fsdp = "hybrid";
  JobOptions f = h;
  f.fsdp = "full";
  const std::int64_t psi16 = testing::plan_of("1f1b", testing::job("llama3-8b", "h100-sxm-8x", 1, 1, 16, 2))
                                 .devices[0]
                                 .resident_bytes /
                             16;
  const auto shard = [](std::int64_t bytes, std::int64_t n) { return (bytes + n - 1) / n; };
  EXPECT_EQ(testing::plan_of("1f1b", h).devices[0].resident_bytes,
            2 * shard(2 * psi16, 8) + shard(12 * psi16, 8));
  EXPECT_EQ(testing::plan_of("1f1b", f).devices[0].resident_bytes,
            2 * shard(2 * psi16, 16) + shard(12 * psi16, 16));
  EXPECT_EQ(testing::plan_of("1f1b", h).meta.data_parallel, "fsdp-hybrid");
}

/// Identical blocks whose parameters are known (profiled times, so per-layer and whole-chunk ops add up
/// exactly).
ScheduleInput sharded_input(int stage, int dp, int layers, std::int64_t params_per_layer, int microbatches) {
  ScheduleInput in = testing::uniform_input(1, microbatches, 2'000'000, 2'000'000, 2'000'000);
  in.costs.front() =
      testing::uniform_layers(layers, 2'000'000, 2'000'000, 2'000'000, 1 << 20, 16 * params_per_layer);
  for (auto& l : in.costs.front()) l.params = l.trainable_params = params_per_layer;
  in.dp = dp;
  in.sharding = zero(stage, dp);
  return in;
}

/// Every transfer takes no time: links infinitely fast.
testing::RunResult run_with_free_links(const ScheduleInput& in) {
  Plan plan = build_plan(find_schedule("1f1b"), in);
  for (Op& op : plan.ops)
    if (std::holds_alternative<TransferWork>(op.payload)) op.fixed_duration = 0;
  Timeline tl = Engine{}.run(plan);
  Metrics m = compute_metrics(plan, tl);
  return {std::move(plan), std::move(tl), std::move(m)};
}

TEST(Sharding, Zero3WithFreeLinksTakesTheUnshardedTime) {
  // With links that take no time, gathering weights per layer costs nothing: ZeRO-3's step equals ZeRO-1's
  // (the same sharded optimizer step) and plain data parallelism's less the optimizer work it no longer does.
  const auto z3 = run_with_free_links(sharded_input(3, 4, 6, 50'000'000, 3));
  const auto z1 = run_with_free_links(sharded_input(1, 4, 6, 50'000'000, 3));
  const auto z0 = run_with_free_links(sharded_input(0, 4, 6, 50'000'000, 3));
  EXPECT_EQ(testing::step_ns(z3), testing::step_ns(z1));
  const HardwareProfile hw = load_hardware_profile("h100-sxm-8x");
  const std::int64_t params = 6 * 50'000'000;
  EXPECT_EQ(testing::step_ns(z0) - testing::step_ns(z3),
            hw.memory_ns(params * 28) - hw.memory_ns(params / 4 * 28));
  // Six layers x three microbatches x (forward + backward) gathers, as many backward reduce-scatters.
  std::int64_t gathers = 0, scatters = 0;
  for (const Op& op : z3.plan.ops) {
    gathers += op.kind == OpKind::kAllGather;
    scatters += op.kind == OpKind::kReduceScatter;
    if (op.kind == OpKind::kAllGather) {
      EXPECT_EQ(op.tags.layer_end - op.tags.layer_begin, 1);
    }
  }
  EXPECT_EQ(gathers, 6 * 3 * 2);
  EXPECT_EQ(scatters, 6 * 3);
}

TEST(Sharding, Zero3ExposedCommunicationOfOneLayer) {
  // One layer, two ranks on NVLink capped at 100 GB/s: the forward's gather and the backward's reduce-scatter
  // are exposed; the backward's gather runs during the forward.
  ScheduleInput in = sharded_input(3, 2, 1, 50'000'000, 1);
  in.hw.node.nvlink.allreduce_busbw_by_size.clear();
  in.hw.node.nvlink.allreduce_busbw_GBps = 100;  // 100 bytes per ns
  const auto r = testing::simulate("1f1b", in);
  // NCCL runs each as a ring with its Simple protocol (the buffer is large): 8.4 us of base latency and one
  // step of 3.4 us over NVLink (src/graph/tuning.cc), then (n-1)/n of the 100 MB buffer (2 B per parameter).
  const Duration latency = 8'400 + 3'400;
  const Duration gather = latency + 50'000'000 / 100, scatter = gather;
  const Duration optimizer = in.hw.memory_ns(25'000'000 * 28);
  EXPECT_EQ(testing::step_ns(r), gather + 2'000'000 + 4'000'000 + scatter + optimizer);
}

TEST(Sharding, NextStepGathersTheUpdatedShards) {
  // Two optimizer steps: no gather of the second step starts before the first step's optimizer is done.
  ScheduleInput in = sharded_input(3, 4, 4, 10'000'000, 2);
  in.iterations = 2;
  const auto r = testing::simulate("1f1b", in);
  TimePoint updated = 0;
  for (std::size_t i = 0; i < r.plan.ops.size(); ++i)
    if (r.plan.ops[i].kind == OpKind::kOptimizer && r.plan.ops[i].tags.iteration == 0)
      updated = r.timeline.end[i];
  ASSERT_GT(updated, 0);
  int second_step_gathers = 0;
  for (std::size_t i = 0; i < r.plan.ops.size(); ++i)
    if (r.plan.ops[i].kind == OpKind::kAllGather && r.plan.ops[i].tags.iteration == 1) {
      ++second_step_gathers;
      EXPECT_GE(r.timeline.start[i], updated);
    }
  EXPECT_EQ(second_step_gathers, 4 * 2 * 2);
}

TEST(Sharding, Zero2ReduceScattersEveryMicrobatch) {
  ScheduleInput in = sharded_input(2, 4, 4, 10'000'000, 3);
  in.dp_bucket_params = 20'000'000;  // two layers per bucket
  const Plan plan = build_plan(find_schedule("1f1b"), in);
  std::int64_t scatters = 0, gathers = 0, reduces = 0;
  for (const Op& op : plan.ops) {
    scatters += op.kind == OpKind::kReduceScatter;
    gathers += op.kind == OpKind::kAllGather;
    reduces += op.kind == OpKind::kAllReduce;
  }
  EXPECT_EQ(scatters, 2 * 3);  // two buckets in each microbatch's backward
  EXPECT_EQ(gathers, 2);       // the updated weights, once per step
  EXPECT_EQ(reduces, 0);
  in.sharding = zero(1, 4);  // ZeRO-1 keeps whole gradients: one reduce-scatter per bucket per step
  std::int64_t z1 = 0;
  for (const Op& op : build_plan(find_schedule("1f1b"), in).ops) z1 += op.kind == OpKind::kReduceScatter;
  EXPECT_EQ(z1, 2);
}

TEST(Sharding, NvmeTierHoldsTheOffloadedStateAndMovesItAtItsBandwidth) {
  // ZeRO-Infinity on one GPU: optimizer state and parameters on the NVMe volume; each read or write of it is
  // a flow over the volume's own link, latency plus bytes over its bandwidth.
  ScheduleInput in = sharded_input(3, 1, 2, 10'000'000, 1);
  in.hw.host.nvme = {std::int64_t{1} << 40, 10.0, 5.0, 100'000, {}};  // 10 and 5 bytes per ns
  in.sharding.offload_optimizer = in.sharding.offload_params = in.sharding.offload_to_nvme = true;
  const auto r = testing::simulate("1f1b", in);
  std::int64_t reads = 0, writes = 0;
  for (std::size_t i = 0; i < r.plan.ops.size(); ++i) {
    const Op& op = r.plan.ops[i];
    if (op.kind != OpKind::kNvmeRead && op.kind != OpKind::kNvmeWrite) continue;
    const auto bytes = std::get<TransferWork>(op.payload).bytes;
    const double rate = op.kind == OpKind::kNvmeRead ? 10.0 : 5.0;
    EXPECT_EQ(r.timeline.end[i] - r.timeline.start[i],
              100'000 + static_cast<Duration>(std::ceil(static_cast<double>(bytes) / rate)));
    (op.kind == OpKind::kNvmeRead ? reads : writes) += bytes;
  }
  // Reads: each layer's 16-bit weights before its forward and its backward, and the Adam state for the step;
  // writes: the Adam state and the updated weights after it.
  const std::int64_t params = 2 * 10'000'000;
  EXPECT_EQ(reads, 2 * 2 * params + 12 * params);
  EXPECT_EQ(writes, (12 + 2) * params);
  // The volume holds all of it; host memory none.
  EXPECT_EQ(r.metrics.peak_nvme_bytes, 16 * params);
  EXPECT_EQ(r.metrics.peak_host_mem_bytes, 0);
  EXPECT_FALSE(r.metrics.oom);
  // A volume too small for it is out of memory, named.
  in.hw.host.nvme.bytes = 16 * params - 1;
  const auto small = testing::simulate("1f1b", in);
  EXPECT_TRUE(small.metrics.oom);
  EXPECT_EQ(small.metrics.oom_device, "nvme0");
}

TEST(Sharding, SymmetricAndExplicitReplicasAgree) {
  // One simulated replica stands for the others exactly, also with sharded collectives and HSDP's two rings.
  for (const char* mode : {"zero-1", "zero-2", "zero-3", "hybrid"}) {
    JobOptions j = testing::job("llama3-8b", "h100-sxm-8x", 2, 2, 8, 4);
    j.microbatch_size = 1;
    if (std::string(mode) == "hybrid")
      j.fsdp = "hybrid";
    else
      j.zero = mode[5] - '0';
    const auto symmetric =
        compute_metrics(testing::plan_of("1f1b", j), Engine{}.run(testing::plan_of("1f1b", j)));
    j.explicit_replicas = true;
    const Plan plan = testing::plan_of("1f1b", j);
    const auto explicit_run = compute_metrics(plan, Engine{}.run(plan));
    EXPECT_EQ(symmetric.step_span_ns, explicit_run.step_span_ns) << mode;
    EXPECT_EQ(symmetric.peak_gpu_mem_bytes, explicit_run.peak_gpu_mem_bytes) << mode;
  }
}

TEST(ExpertParallelism, AllToAllsPerPassAndTheBusiestRankSetsThePace) {
  // Qwen3-235B-A22B on 64 H100s (tp 4, pp 2, dp 8, ep 8): every chunk's forward and backward ends with its
  // dispatch + combine all-to-alls (and the recompute's under full recompute).
  JobOptions j = testing::job("qwen3-235b-a22b", "h100-sxm-8x", 2, 4, 8, 2);
  j.microbatch_size = 1;
  j.seq = 1024;
  j.recompute = "full";
  j.ep = 8;
  const Plan plan = testing::plan_of("1f1b", j);
  std::int64_t alltoalls = 0;
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kAllToAll) continue;
    ++alltoalls;
    // 47 blocks per stage, 2 all-to-alls each of 1024 x 8 x 4096 x 2 B / 4; a rank sends 7/8 of it.
    const auto& w = std::get<TransferWork>(op.payload);
    EXPECT_EQ(w.bytes, 7 * (47 * 2 * (std::int64_t{1024} * 8 * 4096 * 2 / 4)) / 8);
    EXPECT_EQ(w.latency_steps, 47 * 2);
  }
  EXPECT_EQ(alltoalls, 2 * 2 * 3);  // 2 stages x 2 microbatches x (forward, recompute, backward)
  const auto balanced = compute_metrics(plan, Engine{}.run(plan));
  j.moe_imbalance = 2;
  const Plan skewed_plan = testing::plan_of("1f1b", j);
  const auto skewed = compute_metrics(skewed_plan, Engine{}.run(skewed_plan));
  EXPECT_GT(skewed.step_span_ns, balanced.step_span_ns);
  EXPECT_LT(skewed.mfu, balanced.mfu);  // the same useful FLOPs in a longer step
  EXPECT_EQ(skewed_plan.meta.model_flops_per_step, plan.meta.model_flops_per_step);
  // Symmetric and explicit replicas agree with the expert-parallel rings too.
  j.explicit_replicas = true;
  const Plan explicit_plan = testing::plan_of("1f1b", j);
  EXPECT_EQ(compute_metrics(explicit_plan, Engine{}.run(explicit_plan)).step_span_ns, skewed.step_span_ns);
}

TEST(ExpertParallelism, RejectsWhatCannotRun) {
  JobOptions j = testing::job("llama3-8b", "h100-sxm-8x", 1, 1, 8, 2);
  j.ep = 2;
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("is a dense model"),
            std::string::npos);
  j.model = "qwen3-235b-a22b";
  j.ep = 3;
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("not divisible by ep = 3"),
            std::string::npos);
  j.ep = 16;
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("must divide dp = 8"),
            std::string::npos);
  j.ep = 2;
  j.moe_imbalance = 3;
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("moe_imbalance"), std::string::npos);
}

TEST(Sharding, RejectsWhatCannotRun) {
  JobOptions j = testing::job("llama3-8b", "h100-sxm-8x", 1, 1, 8, 2);
  j.offload = "params";
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("add zero 3 or fsdp"),
            std::string::npos);
  j.offload = "none";
  j.fsdp = "hybrid";  // one node: nothing to replicate across
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("valid: fsdp full"),
            std::string::npos);
  j.fsdp = "";
  j.zero = 3;
  EXPECT_NE(testing::error_of([&] { testing::plan_of("mobius", j); }).find("order-based schedules"),
            std::string::npos);
  j.zero = 2;
  j.grad_sync = "after-backward";
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("valid: overlap"),
            std::string::npos);
  j.grad_sync = "overlap";
  j.zero = 3;
  j.offload_device = "nvme";  // nothing offloaded
  EXPECT_NE(
      testing::error_of([&] { testing::plan_of("1f1b", j); }).find("give offload optimizer, params or both"),
      std::string::npos);
  j.offload = "both";
  j.hw = "l40s-8x";  // no NVMe volume in the profile
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("has no NVMe volume"),
            std::string::npos);
  j.hw = "h100-sxm-8x";
  j.offload = "none";
  j.offload_device = "cpu";
  j.zero = 4;
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("valid: 0, 1, 2, 3"),
            std::string::npos);
}

}  // namespace
}  // namespace pipesim::sim
