// The shared lowering of order-based schedules: exact op counts of a hybrid pp x tp x dp job, dependencies
// of the DP buckets and the optimizer, resident memory, and when replicas must be simulated explicitly.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <set>

#include "pipesim/sim/job/job.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

Plan hybrid_plan(const std::string& recompute, bool explicit_replicas = false) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 2, 2, 4);
  j.seq = 1024;
  j.recompute = recompute;
  j.explicit_replicas = explicit_replicas;
  return testing::plan_of("1f1b", j);
}

std::map<OpKind, std::int64_t> count_on(const Plan& plan, StreamKind stream) {
  std::map<OpKind, std::int64_t> n;
  for (const Op& op : plan.ops)
    if (plan.streams[static_cast<std::size_t>(op.stream)].kind == stream) ++n[op.kind];
  return n;
}

TEST(OrderLowering, HybridJobOpCounts) {
  const std::int64_t pp = 2, m = 4;
  Plan plan = hybrid_plan("none");
  EXPECT_EQ(plan.meta.simulated_gpus, 2);  // symmetric: one tp x dp replica stands for the others
  auto compute = count_on(plan, StreamKind::kCompute);
  EXPECT_EQ(compute[OpKind::kForward], pp * m);
  EXPECT_EQ(compute[OpKind::kAllReduce], 2 * pp * m);  // one TP collective per forward and per backward
  EXPECT_EQ(compute[OpKind::kOptimizer], pp);
  EXPECT_EQ(compute[OpKind::kRecompute], 0);
  EXPECT_EQ(count_on(plan, StreamKind::kP2PSend)[OpKind::kP2P], 2 * (pp - 1) * m);
  // Full recompute re-runs the forward's TP collective as well.
  auto full = count_on(hybrid_plan("full"), StreamKind::kCompute);
  EXPECT_EQ(full[OpKind::kRecompute], pp * m);
  EXPECT_EQ(full[OpKind::kAllReduce], 3 * pp * m);
  // Explicit replicas instantiate every GPU: pp x tp x dp compute streams, the same ops each.
  Plan all = hybrid_plan("none", true);
  EXPECT_EQ(all.meta.simulated_gpus, 8);
  EXPECT_EQ(count_on(all, StreamKind::kCompute)[OpKind::kForward], 4 * pp * m);
}

TEST(OrderLowering, ComputeOpsAddUpToTheStepsHardwareFlopsAndShareWorkByValue) {
  // The builder remembers each pass's work by where its costs live: over every GPU, the compute ops' FLOPs
  // must still add up to the step's hardware FLOPs (forward, recompute and backward of every microbatch), and
  // two ops share a work exactly when their works are equal. Split backward passes, full recompute, gradient
  // buckets and ZeRO-3's per-layer ops each take another path through it.
  struct Case {
    const char* schedule;
    const char* recompute;
    int zero;
  };
  for (const Case c : {Case{"zb-v", "full", 0}, Case{"1f1b", "full", 0}, Case{"1f1b", "none", 0},
                       Case{"interleaved-1f1b", "selective", 0}, Case{"1f1b", "full", 3}}) {
    JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 2, 2, 4);
    j.seq = 1024;
    j.recompute = c.recompute;
    j.zero = c.zero;
    j.explicit_replicas = true;
    if (std::string(c.schedule) == "interleaved-1f1b") j.virtual_stages = 2;
    const Plan plan = testing::plan_of(c.schedule, j);
    const std::string name = std::string(c.schedule) + " " + c.recompute + " zero " + std::to_string(c.zero);
    ASSERT_EQ(plan.meta.simulated_gpus, 8) << name;
    double flops = 0;
    std::map<const ComputeWork*, const ComputeWork*> works;
    for (const Op& op : plan.ops) {
      if (plan.streams[static_cast<std::size_t>(op.stream)].kind != StreamKind::kCompute) continue;
      const ComputeWork* w = compute_of(op.payload);
      if (w == nullptr || op.kind == OpKind::kOptimizer) continue;
      flops += w->flops;
      works.emplace(w, w);
    }
    EXPECT_NEAR(flops, plan.meta.hardware_flops_per_step, 1e-9 * plan.meta.hardware_flops_per_step) << name;
    for (auto a = works.begin(); a != works.end(); ++a)
      for (auto b = std::next(a); b != works.end(); ++b) EXPECT_FALSE(*a->second == *b->second) << name;
  }
}

/// Each op of a stream as (kind, stage, chunk, microbatch, first layer, end layer, iteration, dependencies).
using OpShape = std::array<std::int64_t, 8>;
std::map<StreamId, std::vector<OpShape>> shapes_by_stream(const Plan& plan) {
  std::map<StreamId, std::vector<OpShape>> out;
  for (const Op& op : plan.ops)
    out[op.stream].push_back({static_cast<std::int64_t>(op.kind), op.tags.stage, op.tags.virtual_stage,
                              op.tags.microbatch, op.tags.layer_begin, op.tags.layer_end, op.tags.iteration,
                              static_cast<std::int64_t>(op.deps.size())});
  return out;
}

TEST(OrderLowering, ExplicitReplicasInterleaveTaskByTaskAndKeepEachGpusOrder) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 2, 2, 4);
  j.iterations = 2;
  const Plan one = testing::plan_of("1f1b", j);
  j.explicit_replicas = true;
  const Plan all = testing::plan_of("1f1b", j);
  ASSERT_EQ(all.meta.simulated_gpus, 8);
  // Every GPU runs the op sequence of the symmetric plan's GPU of its stage, dependencies included: the
  // interleaving moves no op of a GPU past another of the same GPU.
  const auto reference = shapes_by_stream(one);
  const auto shapes = shapes_by_stream(all);
  auto stage_of = [](const Plan& p, StreamId s) {
    for (const Op& op : p.ops)
      if (op.stream == s) return op.tags.stage;
    return -1;
  };
  std::map<std::pair<std::string, std::int32_t>, StreamId> symmetric;  // (stream name, stage) -> stream
  for (const auto& [s, ops] : reference)
    symmetric[{one.streams[static_cast<std::size_t>(s)].name, stage_of(one, s)}] = s;
  ASSERT_EQ(shapes.size(), 4 * reference.size());  // tp x dp GPUs per stage, each with the same streams
  for (const auto& [s, ops] : shapes) {
    const auto it = symmetric.find({all.streams[static_cast<std::size_t>(s)].name, stage_of(all, s)});
    ASSERT_NE(it, symmetric.end());
    EXPECT_EQ(ops, reference.at(it->second)) << all.streams[static_cast<std::size_t>(s)].name;
  }
  // Side by side: the first forward of stage 0 runs on each of its four GPUs before any GPU's second task.
  std::set<DeviceId> first_devices;
  for (const Op& op : all.ops) {
    if (op.tags.microbatch != 0) break;
    EXPECT_EQ(op.tags.stage, 0);
    if (op.kind == OpKind::kForward)
      first_devices.insert(all.streams[static_cast<std::size_t>(op.stream)].device);
  }
  EXPECT_EQ(first_devices.size(), 4u);
  // And so are the pipeline sends: each GPU's first send comes before any GPU's second.
  std::set<DeviceId> first_senders;
  for (const Op& op : all.ops) {
    if (op.kind != OpKind::kP2P) continue;
    if (op.tags.microbatch != 0) break;
    first_senders.insert(all.streams[static_cast<std::size_t>(op.stream)].device);
  }
  EXPECT_EQ(first_senders.size(), 4u);
  // Each GPU's second iteration starts after its own optimizer step.
  std::set<StreamId> seen;
  for (const Op& op : all.ops) {
    if (op.tags.iteration != 1 ||
        all.streams[static_cast<std::size_t>(op.stream)].kind != StreamKind::kCompute ||
        !seen.insert(op.stream).second)
      continue;
    EXPECT_TRUE(std::any_of(op.deps.begin(), op.deps.end(), [&](OpId d) {
      const Op& dep = all.ops[static_cast<std::size_t>(d)];
      return dep.kind == OpKind::kOptimizer && dep.stream == op.stream && dep.tags.iteration == 0;
    }));
  }
  EXPECT_EQ(seen.size(), 8u);
}

TEST(OrderLowering, InterleavingTheReplicasChangesNoResult) {
  // The explicit plan, and the same ops with each GPU's in one block (stably sorted by device: the order
  // before the replicas were interleaved): each op starts and ends at the same instant in both, and every
  // device peaks at the same memory.
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 2, 2, 4);
  j.iterations = 2;
  j.explicit_replicas = true;
  const Plan plan = testing::plan_of("1f1b", j);
  const std::size_t n = plan.ops.size();
  std::vector<OpId> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto device = [&](OpId i) {
    return plan.streams[static_cast<std::size_t>(plan.ops[static_cast<std::size_t>(i)].stream)].device;
  };
  std::stable_sort(order.begin(), order.end(), [&](OpId a, OpId b) { return device(a) < device(b); });
  ASSERT_NE(order, [&] {
    std::vector<OpId> same(n);
    std::iota(same.begin(), same.end(), 0);
    return same;
  }());
  std::vector<OpId> moved_to(n);
  for (std::size_t k = 0; k < n; ++k) moved_to[static_cast<std::size_t>(order[k])] = static_cast<OpId>(k);
  Plan blocked = plan;
  for (std::size_t k = 0; k < n; ++k) {
    blocked.ops[k] = plan.ops[static_cast<std::size_t>(order[k])];
    for (OpId& d : blocked.ops[k].deps) d = moved_to[static_cast<std::size_t>(d)];
  }
  const Timeline a = Engine{}.run(plan), b = Engine{}.run(blocked);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(a.start[i], b.start[static_cast<std::size_t>(moved_to[i])]) << "op " << i;
    ASSERT_EQ(a.end[i], b.end[static_cast<std::size_t>(moved_to[i])]) << "op " << i;
  }
  EXPECT_EQ(a.peak_bytes, b.peak_bytes);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(compute_metrics(plan, a).step_time_s, compute_metrics(blocked, b).step_time_s);
}

TEST(OrderLowering, ScatteredBoundariesAreRegatheredWithoutSequenceParallelism) {
  const std::int64_t pp = 2, tp = 2, m = 4, seq = 1024, hidden = 4096;  // llama2-7b, microbatch size 1
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", pp, tp, 2, m);
  j.seq = seq;
  EXPECT_EQ(count_on(testing::plan_of("1f1b", j), StreamKind::kCompute)[OpKind::kAllGather], 0)
      << "sequence parallelism keeps the boundary split: nothing to re-gather";
  j.sequence_parallel = false;
  Plan plan = testing::plan_of("1f1b", j);
  // Stage 1 re-gathers every forward input, stage 0 every output gradient: (pp-1) x m of each.
  std::int64_t gathers = 0;
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kAllGather) continue;
    ASSERT_EQ(plan.streams[static_cast<std::size_t>(op.stream)].kind, StreamKind::kCompute);
    ++gathers;
    // The p2p carried 1/tp of the fp16 boundary; the all-gather brings the other (tp-1)/tp.
    const auto& w = std::get<TransferWork>(op.payload);
    EXPECT_EQ(w.bytes, (tp - 1) * 2 * seq * hidden / tp);
    EXPECT_EQ(w.message_bytes, 2 * seq * hidden);
    ASSERT_EQ(op.deps.size(), 1u);
    EXPECT_EQ(plan.ops[static_cast<std::size_t>(op.deps[0])].kind, OpKind::kP2P);
  }
  EXPECT_EQ(gathers, 2 * (pp - 1) * m);
}

TEST(OrderLowering, DpBucketsFollowTheLastBackwardAndGateTheOptimizer) {
  Plan plan = hybrid_plan("none");
  std::map<StreamId, std::vector<OpId>> buckets;  // per collective stream
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    if (plan.streams[static_cast<std::size_t>(op.stream)].name != "collective") continue;
    ASSERT_EQ(op.kind, OpKind::kAllReduce);
    ASSERT_EQ(op.deps.size(), 1u);
    EXPECT_EQ(plan.ops[static_cast<std::size_t>(op.deps[0])].kind, OpKind::kBackward);
    EXPECT_EQ(plan.ops[static_cast<std::size_t>(op.deps[0])].tags.microbatch, 3);  // the last microbatch
    buckets[op.stream].push_back(static_cast<OpId>(i));
  }
  EXPECT_EQ(buckets.size(), 2u);  // one per pipeline stage
  for (const Op& op : plan.ops)
    if (op.kind == OpKind::kOptimizer) {
      const StreamId coll = [&] {
        for (const auto& [s, ids] : buckets)
          if (plan.streams[static_cast<std::size_t>(s)].device ==
              plan.streams[static_cast<std::size_t>(op.stream)].device)
            return s;
        return StreamId{-1};
      }();
      ASSERT_NE(coll, -1);
      EXPECT_EQ(op.deps, buckets[coll]);  // the optimizer waits for every bucket of its GPU
    }
}

TEST(OrderLowering, NodeLeavingDataParallelRingsSpreadOverTheNodesNics) {
  // NCCL runs a ring that leaves the node as one ring per member there, each leaving through another NIC:
  // a member's NIC carries 1/k of its 2(n-1)/n share, k = the ring's members in a node. (The rings as laid
  // out, each step at the path's latency: NCCL's choice, NVLS-tree among them, is test_nccl_tuning's.)
  auto bucket_bytes = [](int tp, int dp) {
    JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 1, tp, dp, 1);
    j.collective_latency = "steps";
    const Plan plan = testing::plan_of("1f1b", j);
    std::vector<std::pair<std::int64_t, std::int64_t>> out;  // (bytes, buffer)
    for (const Op& op : plan.ops)
      if (plan.streams[static_cast<std::size_t>(op.stream)].name == "collective") {
        const auto& t = std::get<TransferWork>(op.payload);
        out.emplace_back(t.bytes, t.message_bytes);
      }
    return out;
  };
  const auto across = bucket_bytes(1, 16);  // 2 nodes, 8 members in each
  ASSERT_FALSE(across.empty());
  for (auto [bytes, buffer] : across) EXPECT_EQ(bytes, 2 * 15 * buffer / 16 / 8);
  for (auto [bytes, buffer] : bucket_bytes(2, 8))  // 2 nodes, 4 members in each
    EXPECT_EQ(bytes, 2 * 7 * buffer / 8 / 4);
  for (auto [bytes, buffer] : bucket_bytes(8, 2))  // one member per node: its own NIC carries it all
    EXPECT_EQ(bytes, 2 * 1 * buffer / 2);
  for (auto [bytes, buffer] : bucket_bytes(1, 8))  // inside one node: NVLink's ring, undivided
    EXPECT_EQ(bytes, 2 * 7 * buffer / 8);
}

TEST(OrderLowering, GradSyncAfterTheBackwardWaitsForTheLastComputeOp) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 2, 2, 4);
  j.grad_sync = "after-backward";
  Plan late = testing::plan_of("1f1b", j);
  std::int64_t buckets = 0;
  for (std::size_t i = 0; i < late.ops.size(); ++i) {
    const Op& op = late.ops[i];
    if (late.streams[static_cast<std::size_t>(op.stream)].name != "collective") continue;
    ++buckets;
    ASSERT_EQ(op.deps.size(), 1u);
    // Its dependency is the last op on the same GPU's compute stream before the optimizer.
    const Op& dep = late.ops[static_cast<std::size_t>(op.deps[0])];
    const StreamId compute = dep.stream;
    EXPECT_EQ(late.streams[static_cast<std::size_t>(compute)].kind, StreamKind::kCompute);
    for (std::size_t k = static_cast<std::size_t>(op.deps[0]) + 1; k < late.ops.size(); ++k)
      if (late.ops[k].stream == compute) {
        EXPECT_EQ(late.ops[k].kind, OpKind::kOptimizer);
      }
  }
  EXPECT_GT(buckets, 0);
  // Overlapped buckets can only be faster.
  j.grad_sync = "overlap";
  auto overlap = testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b")));
  j.grad_sync = "after-backward";
  auto after = testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b")));
  EXPECT_LT(overlap.metrics.step_time_s, after.metrics.step_time_s);
}

TEST(OrderLowering, EveryMicrobatchAccumulatesItsWeightGradients) {
  // The pass that computes the weight gradients adds them into the step's: the whole backward under 1F1B,
  // W under zb-h1 (B keeps only its memory-bound kernels).
  for (const char* name : {"1f1b", "zb-h1"}) {
    JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 2, 1, 4);
    j.seq = 1024;
    const auto& s = find_schedule(name);
    Plan fused = build_plan(s, make_schedule_input(j, s));
    j.grad_accumulation = "main-grad";
    ScheduleInput in = make_schedule_input(j, s);
    Plan main_grad = build_plan(s, in);
    ASSERT_EQ(fused.ops.size(), main_grad.ops.size());
    // Stage 0 holds the embedding and blocks 0-15: 10 B per parameter per TP rank.
    std::int64_t stage0 = 0;
    for (std::size_t l = 0; l <= 16; ++l) stage0 += in.costs.front()[l].grad_accum_bytes;
    EXPECT_EQ(stage0, std::int64_t{10} * (65'536'000 + 16 * std::int64_t{101'191'680}));
    std::int64_t passes = 0;
    for (std::size_t i = 0; i < fused.ops.size(); ++i) {
      const Op& op = main_grad.ops[i];
      if (op.tags.stage != 0 || (op.kind != OpKind::kBackward && op.kind != OpKind::kBackwardWeight &&
                                 op.kind != OpKind::kBackwardInput))
        continue;
      const auto extra = compute_of(op.payload)->mem_bytes - compute_of(fused.ops[i].payload)->mem_bytes;
      EXPECT_EQ(extra, op.kind == OpKind::kBackwardInput ? 0 : stage0) << name;
      if (extra > 0) ++passes;
    }
    EXPECT_EQ(passes, 4) << name << ": once per microbatch";
  }
}

TEST(OrderLowering, RecomputeHoldsOneLayersActivationsAtATime) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 1, 1, 4);
  j.recompute = "full";
  const auto& s = find_schedule("1f1b");
  ScheduleInput in = make_schedule_input(j, s);
  Plan plan = build_plan(s, in);
  std::int64_t largest = 0, sum = 0;
  for (std::size_t l = 0; l <= 16; ++l) {  // stage 0: the embedding and blocks 0-15
    largest = std::max(largest, in.costs.front()[l].recompute_extra_bytes);
    sum += in.costs.front()[l].recompute_extra_bytes;
  }
  ASSERT_GT(sum, largest);
  for (const Op& op : plan.ops)
    if (op.kind == OpKind::kRecompute && op.tags.stage == 0) {
      EXPECT_EQ(plan.extras_of(op).alloc_bytes, largest);
    }
}

TEST(OrderLowering, GeforceCollectivesAreStagedThroughHostMemory) {
  // rtx4090-8x has no peer-to-peer: a TP pair under one switch goes up and down the root complex.
  JobOptions j = testing::job("llama3-8b", "rtx4090-8x", 4, 2, 1, 8);
  const auto& s = find_schedule("1f1b");
  ScheduleInput staged = make_schedule_input(j, s);
  ASSERT_FALSE(staged.hw.node.pcie.peer_to_peer);
  ScheduleInput direct = staged;
  direct.hw.node.pcie.peer_to_peer = true;
  auto a = testing::simulate("1f1b", staged), b = testing::simulate("1f1b", direct);
  EXPECT_GT(a.metrics.step_time_s, b.metrics.step_time_s);
  std::int64_t root_bytes = 0;
  for (const auto& l : a.timeline.links)
    if (l.kind == LinkKind::kRootUp || l.kind == LinkKind::kRootDown)
      root_bytes += static_cast<std::int64_t>(l.carried_bytes);
  EXPECT_GT(root_bytes, 0);
}

TEST(OrderLowering, CpuOptimizerThreadsAreAJobSetting) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 4, 1, 1, 8);
  j.optimizer_offload = true;
  auto threads_of = [&](const Plan& p) {
    std::set<std::int32_t> t;
    for (const Op& op : p.ops)
      if (const auto* w = std::get_if<CpuWork>(&op.payload)) t.insert(w->threads);
    return t;
  };
  // Default: the job's 4 GPUs on the node share its cores equally.
  const Plan share = testing::plan_of("1f1b", j);
  const auto cores = load_hardware_profile("h100-sxm-8x").host.cores;
  EXPECT_EQ(threads_of(share), (std::set<std::int32_t>{cores / 4}));
  j.cpu_optimizer_threads = 3;
  EXPECT_EQ(threads_of(testing::plan_of("1f1b", j)), (std::set<std::int32_t>{3}));
  j.cpu_optimizer_threads = cores + 1;
  EXPECT_EQ(testing::error_of([&] { testing::plan_of("1f1b", j); }).rfind("cpu_optimizer_threads:", 0), 0u);
}

TEST(OrderLowering, ResidentMemoryIsTheStagesParameterBytes) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 1, 1, 4);
  const auto& s = find_schedule("1f1b");
  ScheduleInput in = make_schedule_input(j, s);
  Plan plan = build_plan(s, in);
  // Balanced split of 32 blocks: stage 0 holds the embedding and blocks 0-15, stage 1 blocks 16-31 and the
  // head.
  const auto& layers = in.costs.front();
  std::int64_t stage0 = 0, stage1 = 0;
  for (std::size_t l = 0; l < layers.size(); ++l) (l <= 16 ? stage0 : stage1) += layers[l].param_bytes;
  EXPECT_EQ(plan.devices[0].resident_bytes, stage0);
  EXPECT_EQ(plan.devices[1].resident_bytes, stage1);
  // Offloaded optimizer: 2 + 2 bytes per parameter stay on the GPU, 16 go to the host.
  j.optimizer_offload = true;
  Plan off = build_plan(s, make_schedule_input(j, s));
  std::int64_t params0 = 0;
  for (std::size_t l = 0; l <= 16; ++l) params0 += layers[l].params;
  EXPECT_EQ(off.devices[0].resident_bytes, 4 * params0);
  std::int64_t host = 0;
  for (const auto& d : off.devices)
    if (d.kind == DeviceKind::kHost) host += d.resident_bytes;
  std::int64_t all = 0;
  for (const auto& l : layers) all += l.params;
  EXPECT_EQ(host, 16 * all);
}

TEST(OrderLowering, ReplicasSharingPcieUplinksAreSimulatedExplicitly) {
  // rtx4090-8x: no NVLink, two GPUs per PCIe switch.
  Plan plan = testing::plan_of("1f1b", testing::job("llama3-8b", "rtx4090-8x", 4, 2, 1, 8));
  EXPECT_EQ(plan.meta.replicas, "explicit");
  EXPECT_NE(plan.meta.note.find("share PCIe switch uplinks"), std::string::npos) << plan.meta.note;
  EXPECT_EQ(plan.meta.simulated_gpus, 8);
}

}  // namespace
}  // namespace pipesim::sim

namespace pipesim::sim {
namespace {

TEST(OrderLowering, BlockingSendsHoldTheSendersCompute) {
  // GPipe, p stages, m microbatches, forward f, backward b, every hop x <= f. Overlapped sends cost only the
  // fill and drain hops: (m+p-1)(f+b) + 2(p-1)x. Blocking sends (Megatron-LM 2021) cost every stage its own
  // sends too, so the microbatches follow each other every f+x (and b+x): (m+p-1)(f+b) + 2(m+p-2)x.
  for (int p : {2, 4}) {
    for (int m : {1, 3, 8}) {
      const Duration f = 1000, b = 2000, x = 300;
      ScheduleInput in = testing::uniform_input(p, m, f, b / 2, b / 2);
      in.p2p_fixed_ns = x;
      EXPECT_EQ(testing::step_ns(testing::simulate("gpipe", in)), (m + p - 1) * (f + b) + 2 * (p - 1) * x);
      in.blocking_p2p = true;
      EXPECT_EQ(testing::step_ns(testing::simulate("gpipe", in)), (m + p - 1) * (f + b) + 2 * (m + p - 2) * x)
          << "p " << p << " m " << m;
    }
  }
}

}  // namespace
}  // namespace pipesim::sim
