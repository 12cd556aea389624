#include <fmt/format.h>
#include <gtest/gtest.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/job/job.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

ScheduleInput resolve(JobOptions j, const std::string& schedule = "1f1b") {
  return make_schedule_input(j, find_schedule(schedule));
}

std::vector<std::int64_t> sizes(const ScheduleInput& in, std::int64_t seq) {
  // Each cost table belongs to one microbatch size; recover it from the head's stored logits (4 b s V + 2 b s
  // h).
  std::vector<std::int64_t> out;
  for (auto idx : in.cost_of_microbatch) {
    const auto& head = in.costs[static_cast<std::size_t>(idx)].back();
    out.push_back(head.stored_activation_bytes / (seq * (4 * 128256 + 2 * 4096)));
  }
  return out;
}

TEST(Job, BatchArithmetic) {
  JobOptions j;
  j.dp = 2;
  j.accum_steps = 2;
  j.global_batch = 64;
  j.microbatches = 8;  // b = 64 / (2*2*8) = 2
  auto in = resolve(j);
  EXPECT_EQ(in.microbatches, 8);
  EXPECT_EQ(in.global_batch, 64);
  EXPECT_EQ(sizes(in, 2048), std::vector<std::int64_t>(8, 2));
  j.microbatches = 0;
  j.microbatch_size = 4;  // M = 16 / 4
  EXPECT_EQ(resolve(j).microbatches, 4);
  j.global_batch = 0;
  j.microbatches = 3;  // G = 2*2*3*4
  EXPECT_EQ(resolve(j).global_batch, 48);
}

TEST(Job, FractionalMicrobatchSplitsFloorCeil) {
  JobOptions j;
  j.global_batch = 10;
  j.microbatches = 4;  // 2.5 per microbatch: two of 3, two of 2
  auto in = resolve(j);
  EXPECT_EQ(sizes(in, 2048), (std::vector<std::int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(in.costs.size(), 2u);
}

TEST(Job, DefaultsFillTheNode) {
  JobOptions j;  // llama3-8b on rtx4090-8x
  auto in = resolve(j);
  EXPECT_EQ(in.pp, 8);
  EXPECT_EQ(in.microbatches, 32);
  EXPECT_EQ(in.seq, 2048);
  EXPECT_EQ(resolve(j, "interleaved-1f1b").virtual_stages, 2);
}

TEST(Job, ImpossibleConfigsNameTheFlag) {
  auto err = [](JobOptions j, const std::string& s = "1f1b") {
    return testing::error_of([&] { build_plan(find_schedule(s), resolve(j, s)); });
  };
  JobOptions j;
  j.global_batch = 10;
  j.dp = 4;
  EXPECT_EQ(err(j).rfind("global_batch: 10 is not divisible by dp x accum-steps = 4", 0), 0u) << err(j);
  j = {};
  j.global_batch = 8;
  j.microbatches = 16;
  EXPECT_EQ(err(j).rfind("microbatches: 16 microbatches exceed", 0), 0u) << err(j);
  j = {};
  j.tp = 3;
  EXPECT_EQ(err(j).rfind("tp:", 0), 0u) << err(j);
  j = {};
  j.pp = 64;
  EXPECT_EQ(err(j).rfind("pp: pp x virtual stages = 64 chunks exceeds the model's 32", 0), 0u) << err(j);
  j = {};
  j.partition = "4,4,4";
  EXPECT_EQ(err(j).rfind("partition: has 3 entries; expected pp x virtual stages = 8", 0), 0u) << err(j);
  j.partition = "4,4,4,4,4,4,4,5";
  EXPECT_EQ(err(j).rfind("partition: sums to 33", 0), 0u) << err(j);
  j.partition = "4,4,x";
  EXPECT_EQ(err(j).rfind("partition: 'x' is not a block count", 0), 0u) << err(j);
  j = {};
  j.recompute = "some";
  EXPECT_EQ(err(j).rfind("recompute: unknown policy 'some'; valid: none, selective, full", 0), 0u) << err(j);
  j = {};
  j.nodes = 1;
  j.dp = 2;
  j.pp = 8;
  EXPECT_EQ(err(j).rfind("nodes: pp*tp*cp*dp = 16 GPUs need 2 nodes", 0), 0u) << err(j);
  j = {};
  j.microbatches = 6;
  EXPECT_EQ(
      err(j, "interleaved-1f1b").rfind("schedule: interleaved-1f1b: needs microbatches divisible by pp", 0),
      0u);
}

TEST(Job, PartitionMovesEmbeddingAndHead) {
  JobOptions j;
  j.pp = 4;
  j.partition = "0,16,16,0";  // embedding alone on stage 0, head alone on stage 3
  auto in = resolve(j);
  Plan p = build_plan(find_schedule("1f1b"), in);
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kForward) continue;
    if (op.tags.stage == 0) {
      EXPECT_EQ(op.tags.layer_end - op.tags.layer_begin, 1);
    }
    if (op.tags.stage == 3) {
      EXPECT_EQ(op.tags.layer_begin, 33);
    }
  }
}

TEST(Job, SymmetricAndExplicitReplicasAgree) {
  for (const char* hw : {"h100-sxm-8x", "a100-80g-sxm-8x"}) {
    for (auto [pp, tp, dp] : {std::tuple{2, 2, 2}, std::tuple{2, 8, 2}, std::tuple{4, 1, 4}}) {
      JobOptions j;
      j.model = "llama2-7b";
      j.hw = hw;
      j.pp = pp;
      j.tp = tp;
      j.dp = dp;
      j.microbatches = 4;
      j.seq = 1024;
      j.sequence_parallel = tp != 8;  // without it, boundaries are re-gathered over the TP group
      for (const char* s : {"1f1b", "zb-h1"}) {
        auto sym = testing::simulate(s, resolve(j, s));
        j.explicit_replicas = true;
        auto exp = testing::simulate(s, resolve(j, s));
        j.explicit_replicas = false;
        EXPECT_EQ(sym.plan.meta.replicas, "symmetric");
        EXPECT_EQ(exp.plan.meta.simulated_gpus, pp * tp * dp);
        EXPECT_EQ(testing::step_ns(sym), testing::step_ns(exp))
            << hw << " " << s << " " << pp << "x" << tp << "x" << dp;
        EXPECT_EQ(sym.metrics.peak_gpu_mem_bytes, exp.metrics.peak_gpu_mem_bytes);
        EXPECT_NEAR(sym.metrics.bubble_fraction, exp.metrics.bubble_fraction, 1e-12);
      }
    }
  }
}

TEST(Job, SharedUplinksForceExplicitReplicas) {
  JobOptions j;  // rtx4090-8x has no NVLink: TP and DP traffic crosses shared PCIe switch uplinks
  j.model = "llama2-7b";
  j.pp = 2;
  j.tp = 2;
  j.dp = 2;
  j.microbatches = 4;
  auto r = testing::simulate("1f1b", resolve(j));
  EXPECT_EQ(r.plan.meta.replicas, "explicit");
  EXPECT_EQ(r.plan.meta.simulated_gpus, 8);
}

TEST(Job, OptimizerOffloadMovesStateToTheHostAndRunsCpuAdam) {
  JobOptions j;
  j.model = "llama2-7b";
  j.pp = 4;
  j.microbatches = 8;
  j.recompute = "full";
  auto gpu = testing::simulate("1f1b", resolve(j));
  j.optimizer_offload = true;
  auto off = testing::simulate("1f1b", resolve(j));
  const Plan& p = off.plan;
  std::int64_t params = 0, host_resident = 0, cpu_ops = 0;
  for (const auto& d : p.devices)
    if (d.kind == DeviceKind::kHost) host_resident += d.resident_bytes;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (const auto* w = std::get_if<CpuWork>(&op.payload)) {
      ++cpu_ops;
      params += w->params;
      EXPECT_EQ(w->threads, p.hw.host.cores / 4);  // four GPUs of the job share the node's cores
      // The CPU Adam step takes params / calibrated rate and starts after the gradients reached the host.
      Duration d = off.timeline.end[i] - off.timeline.start[i];
      EXPECT_EQ(d, duration_for_work(static_cast<double>(w->params), p.hw.adam_params_per_s(w->threads)));
      const Op& d2h = p.ops[static_cast<std::size_t>(op.deps.at(0))];
      EXPECT_EQ(d2h.kind, OpKind::kD2H);
      EXPECT_GE(off.timeline.start[i], off.timeline.end[static_cast<std::size_t>(op.deps[0])]);
    }
  }
  EXPECT_EQ(cpu_ops, 4);
  EXPECT_EQ(host_resident, params * 16);  // fp32 master + m + v + 16-bit staging, per parameter
  EXPECT_EQ(off.metrics.peak_host_mem_bytes, host_resident);
  EXPECT_EQ(gpu.metrics.peak_host_mem_bytes, 0);
  EXPECT_LT(off.metrics.peak_gpu_mem_bytes,
            gpu.metrics.peak_gpu_mem_bytes);  // 4 instead of 16 B/param on GPU
  for (std::size_t r = 0; r < 4; ++r)
    EXPECT_EQ(gpu.metrics.gpus[r].peak_mem_bytes - off.metrics.gpus[r].peak_mem_bytes,
              (gpu.plan.devices[r].resident_bytes / 16) * 12);
}

TEST(Job, IterationsRepeatTheStepAndReportItsSteadyState) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 4, 2, 1, 8);
  auto one = testing::simulate("1f1b", resolve(j));
  j.iterations = 3;
  auto three = testing::simulate("1f1b", resolve(j));
  EXPECT_EQ(three.metrics.iterations, 3);
  EXPECT_EQ(three.plan.ops.size(), 3 * one.plan.ops.size());
  // A synchronous schedule repeats itself exactly: the steady state is the single step.
  EXPECT_NEAR(three.metrics.steady_state_step_time_s, one.metrics.step_time_s, 1e-9);
  EXPECT_NEAR(three.metrics.run_time_s, 3 * one.metrics.step_time_s, 1e-9);
  EXPECT_NEAR(three.metrics.first_step_time_s, one.metrics.step_time_s, 1e-9);
}

TEST(Job, OffloadedReplicasSharingANodeAreTwinsOfTheSimulatedOnes) {
  // The GPUs of a node share its PCIe root complex, NVMe volume and host memory, two GPUs a switch uplink.
  // A symmetric plan stands for the identical GPUs beside each simulated one by dividing those links and
  // counting host memory as many times: it must report exactly what simulating every replica reports.
  struct Case {
    int pp, tp, dp;
    std::int32_t node_twins, switch_twins;  // GPUs of one stage on a node, and under one switch
  };
  // 8 GPUs per node, switches {0,1} {2,3} {4,5} {6,7}; job rank t + tp * (stage + pp * d).
  const Case cases[] = {
      {2, 2, 2, 4, 2},   // one node: stages 0 and 1, each on two TP pairs
      {1, 8, 4, 8, 2},   // a node per replica
      {2, 1, 8, 4, 1},   // four replicas per node; a switch holds stage 0 and stage 1
      {4, 4, 2, 4, 2},   // a replica spans two nodes, each with two of its stages
      {2, 8, 2, 8, 2},   // a replica spans two nodes, a stage on each
      {8, 2, 2, 2, 2},   // a replica spans two nodes, each with four of its stages
      {1, 2, 16, 8, 2},  // four replicas per node, four nodes
  };
  for (const char* hw : {"h100-sxm-8x", "a100-80g-sxm-8x"}) {
    for (const Case& c : cases) {
      for (const char* offload : {"optimizer", "params", "both", "both on nvme"}) {
        JobOptions j = testing::job("llama2-7b", hw, c.pp, c.tp, c.dp, 4);
        j.seq = 1024;
        // ZeRO-Offload shards gradients (ZeRO-2); ZeRO-Infinity's parameter offload needs ZeRO-3.
        const std::string mode = offload;
        j.zero = mode == "optimizer" ? 2 : 3;
        j.offload = mode.substr(0, mode.find(' '));
        if (mode == "both on nvme") j.offload_device = "nvme";
        const std::string what = fmt::format("{} pp{} tp{} dp{} offload {}", hw, c.pp, c.tp, c.dp, offload);
        auto sym = testing::simulate("1f1b", resolve(j, "1f1b"));
        j.explicit_replicas = true;
        auto exp = testing::simulate("1f1b", resolve(j, "1f1b"));
        ASSERT_EQ(sym.plan.meta.replicas, "symmetric") << what << ": " << sym.plan.meta.note;
        EXPECT_EQ(sym.plan.meta.node_twins, c.node_twins) << what;
        EXPECT_EQ(sym.plan.meta.switch_twins, c.switch_twins) << what;
        EXPECT_EQ(exp.plan.meta.simulated_gpus, c.pp * c.tp * c.dp) << what;
        EXPECT_EQ(testing::step_ns(sym), testing::step_ns(exp)) << what;
        EXPECT_EQ(sym.metrics.peak_gpu_mem_bytes, exp.metrics.peak_gpu_mem_bytes) << what;
        EXPECT_EQ(sym.metrics.peak_host_mem_bytes, exp.metrics.peak_host_mem_bytes) << what;
        EXPECT_EQ(sym.metrics.peak_nvme_bytes, exp.metrics.peak_nvme_bytes) << what;
        // The offloaded state lives in host memory or, on NVMe, there instead.
        EXPECT_EQ(sym.metrics.peak_nvme_bytes > 0, mode == "both on nvme") << what;
        EXPECT_EQ(sym.metrics.peak_host_mem_bytes > 0, mode != "both on nvme") << what;
        EXPECT_EQ(sym.metrics.oom, exp.metrics.oom) << what;
      }
    }
  }
}

TEST(Job, OffloadOnNodesThatMixReplicasDifferentlyIsSimulatedExplicitly) {
  // tp 4 x pp 3: a replica takes a node and a half, so the second node holds stage 2 of one replica and
  // stage 0 of the next; no simulated node repeats that pairing.
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 3, 4, 2, 4);
  j.seq = 1024;
  j.optimizer_offload = true;
  auto r = testing::simulate("1f1b", resolve(j));
  EXPECT_EQ(r.plan.meta.replicas, "explicit");
  EXPECT_EQ(r.plan.meta.simulated_gpus, 24);
}

}  // namespace
}  // namespace pipesim::sim

namespace pipesim::sim {
namespace {

TEST(Job, GeforceFp16AccumulateIsADtypeTheJobChooses) {
  JobOptions j = testing::job("qwen3-1.7b", "rtx4090-8x", 4, 1, 1, 8);
  j.dtype = "fp16";
  auto fp32_acc = testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b")));
  j.dtype = "fp16_acc16";
  auto fp16_acc = testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b")));
  EXPECT_LT(fp16_acc.metrics.step_time_s, fp32_acc.metrics.step_time_s);  // twice the tensor-core peak
  EXPECT_LE(fp16_acc.metrics.hfu, 1.0);
  // A data-centre profile names no such peak.
  j.hw = "h100-sxm-8x";
  const std::string err = testing::error_of(
      [&] { build_plan(find_schedule("1f1b"), make_schedule_input(j, find_schedule("1f1b"))); });
  EXPECT_EQ(err.rfind("dtype: h100-sxm-8x has no fp16_acc16 peak; valid: bf16, fp16, fp32", 0), 0u) << err;
}

}  // namespace
}  // namespace pipesim::sim
