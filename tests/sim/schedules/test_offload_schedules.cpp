#include <gtest/gtest.h>

#include <map>
#include <set>

#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

const char* kOffloadSchedules[] = {"mobius", "spipe", "roundpipe"};

testing::RunResult run(const std::string& schedule, JobOptions j) {
  const auto& s = find_schedule(schedule);
  return testing::simulate(schedule, make_schedule_input(j, s));
}

JobOptions small_job() {
  JobOptions j;
  j.model = "llama2-7b";  // 32 blocks: P x F and P x B divide for P = 4 with F=2, B=... (balanced otherwise)
  j.hw = "rtx4090-8x";
  j.pp = 4;
  j.seq = 1024;
  return j;
}

TEST(OffloadSchedules, EveryLayerRunsForwardAndBackwardOncePerMicrobatchInOrder) {
  for (const char* name : kOffloadSchedules) {
    auto r = run(name, small_job());
    const Plan& p = r.plan;
    const std::int32_t layers = 34;  // embedding + 32 blocks + head
    // (iteration, microbatch, layer) -> how often each pass covers it; and when.
    std::map<std::tuple<int, int, int>, int> fwd, bwd;
    std::map<std::tuple<int, int, int>, std::pair<TimePoint, TimePoint>> fwd_t, bwd_t;
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const Op& op = p.ops[i];
      if (op.kind != OpKind::kForward && op.kind != OpKind::kBackward) continue;
      for (int l = op.tags.layer_begin; l < op.tags.layer_end; ++l) {
        auto key = std::tuple{op.tags.iteration, op.tags.microbatch, l};
        (op.kind == OpKind::kForward ? fwd : bwd)[key]++;
        (op.kind == OpKind::kForward ? fwd_t : bwd_t)[key] = {r.timeline.start[i], r.timeline.end[i]};
      }
    }
    const int M = p.meta.microbatches, N = p.meta.iterations;
    ASSERT_EQ(static_cast<int>(fwd.size()), N * M * layers) << name;
    ASSERT_EQ(static_cast<int>(bwd.size()), N * M * layers) << name;
    for (const auto& [k, c] : fwd) EXPECT_EQ(c, 1) << name;
    for (const auto& [k, c] : bwd) EXPECT_EQ(c, 1) << name;
    for (int it = 0; it < N; ++it)
      for (int m = it * M; m < (it + 1) * M; ++m)
        for (int l = 0; l + 1 < layers; ++l) {
          // Forward goes up the layers, backward comes down after the loss.
          const auto here = std::tuple{it, m, l}, above = std::tuple{it, m, l + 1},
                     top = std::tuple{it, m, layers - 1};
          EXPECT_LE(fwd_t[here].first, fwd_t[above].first) << name;
          EXPECT_GE(bwd_t[here].second, bwd_t[above].second) << name;
          EXPECT_GE(bwd_t[here].first, fwd_t[top].second) << name;
        }
  }
}

TEST(OffloadSchedules, AtMostTwoStagesOfWeightsPerGpu) {
  for (const char* name : kOffloadSchedules) {
    auto r = run(name, small_job());
    const Plan& p = r.plan;
    // A weight set is (GPU, iteration, stage, pass): resident from its first upload until its last use.
    std::map<std::tuple<int, int, int, int>, std::pair<TimePoint, TimePoint>> sets;
    for (std::size_t i = 0; i < p.ops.size(); ++i) {
      const Op& op = p.ops[i];
      const auto& st = p.streams[static_cast<std::size_t>(op.stream)];
      if (p.devices[static_cast<std::size_t>(st.device)].kind != DeviceKind::kGpu) continue;
      auto key = std::tuple{st.device, op.tags.iteration, op.tags.stage, op.tags.virtual_stage};
      const bool upload = st.name == "weight_upload";
      const bool use = st.kind == StreamKind::kCompute || (st.name == "download" && op.tags.microbatch < 0);
      if (!upload && !use) continue;
      auto it = sets.find(key);
      if (it == sets.end()) {
        if (!upload) continue;  // weights kept from the forward (the last stage's backward): same set
        sets[key] = {r.timeline.start[i], r.timeline.end[i]};
      } else {
        it->second.first = std::min(it->second.first, r.timeline.start[i]);
        it->second.second = std::max(it->second.second, r.timeline.end[i]);
      }
    }
    std::map<int, std::vector<std::pair<TimePoint, int>>> events;
    for (const auto& [k, iv] : sets) {
      events[std::get<0>(k)].push_back({iv.first, +1});
      events[std::get<0>(k)].push_back({iv.second, -1});
    }
    ASSERT_FALSE(events.empty()) << name;
    for (auto& [gpu, ev] : events) {
      std::sort(ev.begin(), ev.end(),
                [](auto a, auto b) { return a.first != b.first ? a.first < b.first : a.second < b.second; });
      int live = 0, peak = 0;
      for (auto [t, d] : ev) peak = std::max(peak, live += d);
      EXPECT_LE(peak, 2) << name << " gpu " << gpu;
      EXPECT_GE(peak, 2) << name << " gpu " << gpu << ": prefetch should overlap the next stage's upload";
    }
  }
}

TEST(OffloadSchedules, HostMemoryAddsUp) {
  JobOptions j = small_job();
  ModelSpec m = load_model("llama2-7b");
  std::int64_t params = 0;
  for (const auto& l : model_layer_costs(m, CostOptions{1, 1024, 1, Recompute::kFull})) params += l.params;
  for (const char* name : {"mobius", "spipe"}) {
    auto r = run(name, j);
    // bf16 weights streamed to the GPUs + fp32 master, m, v + bf16 gradient staging.
    EXPECT_EQ(r.metrics.peak_host_mem_bytes, 2 * params + 14 * params) << name;
  }
  j.lora_rank = 16;
  auto lora = run("mobius", j);
  std::int64_t trainable = 0;
  CostOptions co{1, 1024, 1, Recompute::kFull};
  co.lora_rank = 16;
  for (const auto& l : model_layer_costs(m, co)) trainable += l.trainable_params;
  EXPECT_EQ(lora.metrics.peak_host_mem_bytes, 2 * params + 14 * trainable);
  EXPECT_LT(trainable, params / 50);  // adapters are tiny; the frozen weights still stream
}

TEST(OffloadSchedules, SynchronousVariantsAreNeverFaster) {
  JobOptions j = small_job();
  for (const char* model : {"llama2-7b", "qwen3-1.7b"}) {
    j.model = model;
    auto async_rp = run("roundpipe", j);
    j.schedule_options["roundpipe_sync"] = "true";
    auto sync_rp = run("roundpipe", j);
    j.schedule_options.clear();
    EXPECT_GE(sync_rp.metrics.step_time_s, async_rp.metrics.step_time_s) << model;
    auto async_sp = run("spipe", j);
    j.schedule_options["spipe_sync_checkpoints"] = "true";
    auto sync_sp = run("spipe", j);
    j.schedule_options.clear();
    EXPECT_GE(sync_sp.metrics.step_time_s, async_sp.metrics.step_time_s) << model;
  }
}

TEST(OffloadSchedules, SpipeRingIsBubbleFreeWhenBIsThreeF) {
  // Uniform blocks: forward f, backward 2f (a backward stage recomputes, so it costs 3f per layer): with
  // B = 3F one backward stage takes one forward stage's time and the ring only pays its ramp:
  // step = ((F + B) M + P - 1) slots of (L / (F P)) f.
  const Duration f = 1'000'000;
  for (auto [P, F] : {std::pair{2, 1}, std::pair{4, 1}, std::pair{4, 2}, std::pair{3, 2}}) {
    const int B = 3 * F, L = P * B, M = 2 * P;
    ScheduleInput in = testing::uniform_input(1, M, f, f, f);
    in.costs = {testing::uniform_layers(L, f, f, f)};
    in.pp = P;
    in.parameters.set("stages", std::vector<std::int64_t>{F, B});
    in.iterations = 1;
    auto r = testing::simulate("spipe", in);
    const Duration slot = static_cast<Duration>(L / (F * P)) * f;
    EXPECT_EQ(testing::step_ns(r), ((F + B) * M + P - 1) * slot) << "P=" << P << " F=" << F;
  }
}

TEST(OffloadSchedules, RoundPipeDispatchesRoundRobinAcrossIterations) {
  JobOptions j = small_job();
  j.model = "qwen3-1.7b";
  auto r = run("roundpipe", j);
  const Plan& p = r.plan;
  // Stage jobs in dispatch order (first compute op of each (iteration, stage)), and the GPU each ran on.
  std::map<std::pair<int, int>, int> gpu_of_job;
  for (const Op& op : p.ops) {
    const auto& st = p.streams[static_cast<std::size_t>(op.stream)];
    if (st.kind != StreamKind::kCompute) continue;
    gpu_of_job.emplace(std::pair{op.tags.iteration, op.tags.stage},
                       p.devices[static_cast<std::size_t>(st.device)].local_index);
  }
  const int jobs = static_cast<int>(gpu_of_job.size()) / p.meta.iterations;
  int k = 0;
  for (const auto& [key, g] : gpu_of_job)
    EXPECT_EQ(g, (k++) % 4) << "job " << key.second << " of iteration " << key.first;
  EXPECT_GT(jobs, 4);                 // more stage jobs than GPUs
  EXPECT_EQ(p.meta.microbatches, 5);  // default G + 1
}

TEST(OffloadSchedules, DeterministicAndRoundTrip) {
  for (const char* name : kOffloadSchedules) {
    auto a = run(name, small_job()), b = run(name, small_job());
    std::string text = plan_to_json(a.plan);
    EXPECT_EQ(text, plan_to_json(b.plan)) << name;
    EXPECT_EQ(a.timeline.end, b.timeline.end) << name;
    Plan back = plan_from_json(text, "p.json");
    EXPECT_EQ(plan_to_json(back), text) << name;
    EXPECT_EQ(Engine{}.run(back).end, a.timeline.end) << name;
  }
}

}  // namespace
}  // namespace pipesim::sim

namespace pipesim::sim {
namespace {

std::int64_t count_kind(const Plan& p, OpKind kind) {
  std::int64_t n = 0;
  for (const Op& op : p.ops) n += op.kind == kind ? 1 : 0;
  return n;
}

TEST(OffloadSchedules, GradientAccumulationRunsEveryFlush) {
  // K flushes per optimizer step: K times the passes, the same optimizer steps, the same tokens per second
  // within the pipeline's fill (a K-fold count of sequences over one flush would double it).
  for (const ScheduleDescriptor& s : schedule_registry()) {
    if (s.kind != ScheduleKind::kWholePlan) continue;
    JobOptions j = testing::job("qwen3-1.7b", "rtx4090-8x", 4, 1, 1, 8);
    j.seq = 1024;
    auto one = testing::simulate(s.name, make_schedule_input(j, s));
    j.accum_steps = 2;
    auto two = testing::simulate(s.name, make_schedule_input(j, s));
    EXPECT_EQ(count_kind(two.plan, OpKind::kForward), 2 * count_kind(one.plan, OpKind::kForward)) << s.name;
    EXPECT_EQ(count_kind(two.plan, OpKind::kOptimizer), count_kind(one.plan, OpKind::kOptimizer)) << s.name;
    EXPECT_LT(two.metrics.tokens_per_s, 1.3 * one.metrics.tokens_per_s) << s.name;
    EXPECT_LE(two.metrics.mfu, 1.0) << s.name;
  }
}

TEST(OffloadSchedules, MultiNodeHostsHoldAndStepTheirOwnStages) {
  for (const char* name : {"mobius", "spipe"}) {
    // 16 GPUs over two 8-GPU nodes; llama2-7b's 32 blocks split evenly.
    JobOptions j = testing::job("llama2-7b", "rtx4090-8x", 16, 1, 1, 32);
    j.seq = 512;
    j.nodes = 2;
    j.iterations = 1;
    if (std::string(name) == "spipe") j.schedule_options["spipe_stages"] = "1,2";
    auto r = testing::simulate(name, make_schedule_input(j, find_schedule(name)));
    std::map<std::string, std::int64_t> host_bytes;
    std::set<DeviceId> adam_hosts;
    for (const auto& d : r.plan.devices)
      if (d.kind == DeviceKind::kHost) host_bytes[d.name] = d.resident_bytes;
    for (const Op& op : r.plan.ops)
      if (op.kind == OpKind::kOptimizer)
        adam_hosts.insert(r.plan.streams[static_cast<std::size_t>(op.stream)].device);
    ASSERT_EQ(host_bytes.size(), 2u) << name;
    EXPECT_GT(host_bytes["host0"], 0) << name;
    EXPECT_GT(host_bytes["host1"], 0) << name;
    EXPECT_EQ(adam_hosts.size(), 2u) << name << ": every node's cores run the optimizer of its stages";
    // Together they hold the whole model: bf16 weights and 14 B of optimizer state per parameter.
    std::int64_t params = 0;
    for (const auto& l : model_layer_costs(load_model("llama2-7b"), CostOptions{1, 512, 1, Recompute::kFull}))
      params += l.params;
    EXPECT_EQ(host_bytes["host0"] + host_bytes["host1"], 16 * params) << name;
    EXPECT_FALSE(r.metrics.oom) << name;
  }
}

}  // namespace
}  // namespace pipesim::sim
