#include <gtest/gtest.h>

#include <string>

#include "core/json_reader.hpp"
#include "job/framework_rates.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/job/framework.hpp"
#include "pipesim/sim/job/job.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

std::string shipped_text(const std::string& name) {
  return detail::read_text_file(std::string(PIPESIM_SOURCE_DIR) + "/frameworks/" + name + ".json");
}

/// The text of megatron-core.json with one JSON pointer replaced.
std::string with(const std::string& pointer, const nlohmann::json& value) {
  nlohmann::json j = nlohmann::json::parse(shipped_text("megatron-core"));
  j[nlohmann::json::json_pointer(pointer)] = value;
  return j.dump();
}

TEST(Framework, ShippedFilesLoadAndCiteEverySetting) {
  const std::vector<std::string> names = shipped_frameworks();
  EXPECT_EQ(names, (std::vector<std::string>{"deepspeed", "fsdp", "hf-transformers",
                                             "hf-transformers-compile", "megatron-core", "megatron-deepspeed",
                                             "megatron-lm-2021", "megatron-lm-2022", "nanotron",
                                             "torchtitan-2024-12"}));
  for (const std::string& name : names) {
    const Framework f = load_framework(name);
    EXPECT_EQ(f.name, name);
    for (const std::string* source :
         {&f.attention.source, &f.dropout.source, &f.sequence_parallel.source, &f.bias_kernels.source,
          &f.norm_backward.source, &f.grad_accumulation.source, &f.grad_sync.source, &f.tp_overlap.source,
          &f.blocking_p2p.source})
      EXPECT_FALSE(source->empty()) << name;
  }
}

TEST(Framework, TheDefaultIsTodaysMegatronCore) {
  // A job that names no framework runs as pipesim always priced it: flash attention, fused biases and
  // gradient accumulation, one-pass norms, overlapped DP and TP communication, sequence parallelism.
  const JobOptions j = with_framework(JobOptions{});
  EXPECT_EQ(framework_name(j), "megatron-core");
  EXPECT_EQ(*j.attention, "flash");
  EXPECT_FALSE(*j.dropout);
  EXPECT_TRUE(*j.sequence_parallel);
  EXPECT_EQ(*j.bias_kernels, "fused");
  EXPECT_EQ(*j.norm_backward, "one-pass");
  EXPECT_EQ(*j.grad_accumulation, "fused");
  EXPECT_EQ(*j.grad_sync, "overlap");
  EXPECT_EQ(*j.tp_overlap, "backward");
  EXPECT_FALSE(*j.blocking_p2p);
}

TEST(Framework, GivenOptionsOverrideTheFramework) {
  JobOptions j;
  j.framework = "megatron-lm-2021";
  j.grad_sync = "overlap";
  j.grad_accumulation = "autograd";
  const JobOptions r = with_framework(j);
  EXPECT_EQ(framework_name(r), "megatron-lm-2021");
  EXPECT_EQ(*r.grad_sync, "overlap");           // given
  EXPECT_EQ(*r.grad_accumulation, "autograd");  // given
  EXPECT_EQ(*r.attention, "unfused");           // the framework's
  EXPECT_EQ(*r.norm_backward, "two-pass");      // the framework's
  EXPECT_TRUE(*r.blocking_p2p);                 // the framework's
  EXPECT_EQ(make_schedule_input(r, find_schedule("1f1b")).framework, "megatron-lm-2021");
}

double step_s(const JobOptions& j) {
  const Plan plan = testing::plan_of("1f1b", j);
  return compute_metrics(plan, Engine{}.run(plan)).step_time_s;
}

TEST(Framework, AFrameworkMovesThePredictionThroughItsSettings) {
  // Megatron-LM 2022 on the same job: unfused attention and dropout move more bytes, the blocking p2p and
  // the gradient sync after the backward wait more; the step is longer than Megatron-Core's.
  JobOptions j;
  j.model = "llama3-8b";
  j.hw = "h100-sxm-8x";
  j.pp = 4;
  const double core = step_s(j);
  j.framework = "megatron-lm-2022";
  const double lm2022 = step_s(j);
  EXPECT_GT(lm2022, core * 1.1);
  // The same settings given as options instead of a framework give the same step.
  JobOptions flags;
  flags.model = "llama3-8b";
  flags.hw = "h100-sxm-8x";
  flags.pp = 4;
  flags.attention = "unfused";
  flags.dropout = true;
  flags.sequence_parallel = false;
  flags.bias_kernels = "separate";
  flags.grad_sync = "after-backward";
  flags.blocking_p2p = true;
  EXPECT_EQ(step_s(flags), lm2022);
}

TEST(Framework, ASmallEagerModelIsBoundByTheCpuIssuingItsKernels) {
  // GPT-2 (124M) on one H100, one sequence of 1,024 tokens per microbatch: each block's forward is tens of
  // microseconds of GPU work, but eager PyTorch's CPU takes 24 us to issue each of its kernels; the pass
  // lasts kernels x 24 us, longer than its GPU work.
  JobOptions j =
      testing::job(std::string(PIPESIM_TEST_DATA_DIR) + "/hf/gpt2.json", "h100-sxm-8x", 1, 1, 1, 4);
  j.nodes = 1;
  j.seq = 1024;
  j.microbatch_size = 1;
  const Plan gpu_only = testing::plan_of("1f1b", j);
  j.host_dispatch_us = 24;
  const Plan eager = testing::plan_of("1f1b", j);
  EXPECT_EQ(eager.meta.host_dispatch_ns, 24000);
  const Timeline a = Engine{}.run(gpu_only), b = Engine{}.run(eager);
  int forwards = 0;
  for (std::size_t i = 0; i < eager.ops.size(); ++i) {
    const ComputeWork* c = compute_of(eager.ops[i].payload);
    if (eager.ops[i].kind != OpKind::kForward || c == nullptr || c->kernels == 0) continue;
    const Duration gpu = a.end[i] - a.start[i], issued = b.end[i] - b.start[i];
    EXPECT_LT(gpu, issued) << i;
    EXPECT_EQ(issued, Duration{c->kernels} * 24000) << i;
    ++forwards;
  }
  EXPECT_GT(forwards, 0);
  // 0 (the Megatron files' setting) leaves the GPU's own time.
  j.host_dispatch_us = 0;
  EXPECT_EQ(step_s(j), compute_metrics(gpu_only, Engine{}.run(gpu_only)).step_time_s);
}

TEST(Framework, EachTensorParallelCollectiveCostsTheCpuItsCallIntoTorchDistributed) {
  // nanotron's TP linears call c10d for every collective: 131 us of CPU per all-gather and 122 us per
  // reduce-scatter (its file's figures), of which the pair's two launches already cost 2 x 24 us of dispatch:
  // 131 + 122 - 48 = 205 us more per pair under sequence parallelism; without it one all-reduce, 89 - 24.
  const Framework nanotron = load_framework("nanotron");
  EXPECT_EQ(nanotron.host_collective_us.value.all_gather, 131);
  EXPECT_EQ(framework_tp_collective_host_ns(nanotron, true, 24000), 205000);
  EXPECT_EQ(framework_tp_collective_host_ns(nanotron, false, 24000), 65000);
  EXPECT_EQ(framework_tp_collective_host_ns(load_framework("megatron-core"), true, 0), 0);  // states none
  // A tp 2 block's forward on one H100 at one short sequence: two collective pairs, each op lasts its
  // kernels' dispatch plus 2 x 205 us (forward) or twice that (backward), longer than its GPU work.
  JobOptions j =
      testing::job(std::string(PIPESIM_TEST_DATA_DIR) + "/hf/gpt2.json", "h100-sxm-8x", 1, 2, 1, 4);
  j.framework = "nanotron";
  j.seq = 1024;
  j.microbatch_size = 1;
  j.sequence_parallel = true;
  const Plan plan = testing::plan_of("1f1b", j);
  const Timeline t = Engine{}.run(plan);
  int checked = 0;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const ComputeWork* c = compute_of(plan.ops[i].payload);
    if (c == nullptr || c->host_ns == 0) continue;
    const Duration pairs = plan.ops[i].kind == OpKind::kForward ? 1 : 2;
    EXPECT_EQ(c->host_ns % (pairs * 2 * 205000), 0) << i;  // whole layers' pairs
    EXPECT_EQ(t.end[i] - t.start[i], Duration{c->kernels} * 24000 + c->host_ns) << i;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(Framework, RunsOnlyThePipelineSchedulesItImplements) {
  const Framework mds = load_framework("megatron-deepspeed");
  EXPECT_EQ(mds.schedules.value, (std::vector<std::string>{"1f1b", "zb-h1"}));
  EXPECT_TRUE(framework_runs(mds, find_schedule("zb-h1")));
  EXPECT_FALSE(framework_runs(mds, find_schedule("interleaved-1f1b")));
  EXPECT_TRUE(framework_runs(mds, find_schedule("roundpipe")));  // an offload system of its own
  EXPECT_TRUE(framework_runs(load_framework("megatron-core"), find_schedule("dualpipe")));  // lists none
  JobOptions j = testing::job("llama3-8b", "h100-sxm-8x", 4, 1, 1, 8);
  j.framework = "megatron-deepspeed";
  EXPECT_EQ(testing::error_of([&] { testing::plan_of("dualpipe", j); }),
            "schedule: megatron-deepspeed runs the pipeline schedules 1f1b, zb-h1; valid: those, or a "
            "CPU-offload schedule");
  std::vector<std::string> names;
  for (const Plan& p : plans_of_all_schedules(j).plans) names.push_back(p.meta.schedule);
  EXPECT_EQ(names, (std::vector<std::string>{"1f1b", "zb-h1", "mobius", "spipe", "roundpipe"}));
}

TEST(Framework, OffersOnlyItsDataParallelismAndRecompute) {
  // nanotron shards optimizer state only (ZeRO-1) and checkpoints whole layers.
  JobOptions j = testing::job("llama3-8b", "h100-sxm-8x", 1, 1, 8, 8);
  j.framework = "nanotron";
  j.zero = 2;
  EXPECT_EQ(testing::error_of([&] { testing::plan_of("1f1b", j); }),
            "zero: nanotron offers data parallelism ddp, zero-1; zero-2 is not one of them");
  j.zero = 1;
  j.recompute = "selective";
  EXPECT_EQ(testing::error_of([&] { testing::plan_of("1f1b", j); }),
            "recompute: nanotron offers recompute none, full; valid: those");
  j.recompute = "full";
  EXPECT_EQ(testing::error_of([&] { testing::plan_of("1f1b", j); }), "no error");
  j.optimizer_offload = true;  // nanotron has no host offload; the CPU-offload schedules bring their own
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("nanotron keeps optimizer state"),
            std::string::npos);
  j.optimizer_offload = false;
  // Without a sharding asked for, simulate adds only the variants the framework offers.
  j.zero = -1;
  std::vector<std::string> modes;
  for (const Plan& p : plans_of_all_schedules(j).plans)
    if (p.meta.schedule == "1f1b") modes.push_back(p.meta.data_parallel);
  EXPECT_EQ(modes, (std::vector<std::string>{"ddp", "zero-1"}));
  // A framework listing none offers every mode.
  EXPECT_TRUE(framework_offers(load_framework("megatron-core").data_parallel, "zero-3"));
  EXPECT_FALSE(framework_offers(load_framework("hf-transformers").data_parallel, "zero-3"));
}

TEST(Framework, AnExplicitMaskMakesTheAttentionKernelComputeEveryScore) {
  // hf-transformers-compile calls cuDNN with a dense mask: Qwen3-1.7B (head dim 128) at 2,048 tokens on an
  // H200 gets half the profile's causal cuDNN rate for the attention core's useful FLOPs.
  const HardwareProfile hw = load_hardware_profile("h200-sxm-8x");
  const KernelRate causal = attention_rate(hw.gpu.attention_kernels.at("cudnn"), 128, 2048);
  JobOptions j = testing::job(std::string(PIPESIM_SOURCE_DIR) + "/tests/fixtures/hf/Qwen__Qwen3-1.7B.json",
                              "h200-sxm-8x", 1, 1, 1, 1);
  j.seq = 2048;
  for (const char* framework : {"hf-transformers", "hf-transformers-compile"}) {
    j.framework = framework;
    const Plan plan = testing::plan_of("1f1b", j);
    const ComputeWork* forward = compute_of(plan.ops[0].payload);
    ASSERT_NE(forward, nullptr);
    const double expected =
        std::string(framework) == "hf-transformers" ? causal.forward_tflops : causal.forward_tflops / 2;
    EXPECT_DOUBLE_EQ(forward->rated_tflops, expected) << framework;
  }
  EXPECT_EQ(load_framework("hf-transformers-compile").attention_mask.value, "dense");
  EXPECT_EQ(load_framework("hf-transformers").attention_mask.value, "causal");  // absent: is_causal
}

TEST(Framework, BadFilesNameFileAndPath) {
  auto err = [](const std::string& text) {
    return testing::error_of([&] { parse_framework(text, "f.json"); });
  };
  EXPECT_EQ(err(with("/settings/attention/value", "fused")),
            "f.json: /settings/attention/value: unknown attention kernel 'fused'; valid: unfused, flash");
  EXPECT_EQ(err(with("/settings/grad_sync/value", "later")),
            "f.json: /settings/grad_sync/value: unknown value 'later'; valid: overlap, after-backward");
  EXPECT_EQ(err(with("/settings/dropout/value", "no")),
            "f.json: /settings/dropout/value: expected true or false");
  EXPECT_EQ(
      err(with("/settings/tp_overlap/source", "")).rfind("f.json: /settings/tp_overlap/source: empty", 0),
      0u);
  EXPECT_EQ(err(with("/version", 2)), "f.json: /version: unsupported version; valid: 1");
  EXPECT_EQ(err(with("/settings/rank_order", nlohmann::json{{"value", "pp-dp-tp"}, {"source", "x"}})),
            "f.json: /settings/rank_order/value: unknown value 'pp-dp-tp'; valid: tp-cp-pp-dp, tp-cp-dp-pp");
  EXPECT_EQ(err(with("/settings/attention_mask", nlohmann::json{{"value", "sparse"}, {"source", "x"}})),
            "f.json: /settings/attention_mask/value: unknown value 'sparse'; valid: causal, dense");
  EXPECT_NE(err(with("/settings/host_dispatch_us", nlohmann::json{{"value", 5000}, {"source", "x"}}))
                .find("/settings/host_dispatch_us/value"),
            std::string::npos);
  EXPECT_EQ(
      err(with("/settings/host_collective_us",
               nlohmann::json{{"value", {{"all_reduce", 89}, {"all_gather", -1}, {"reduce_scatter", 1}}},
                              {"source", "x"}})),
      "f.json: /settings/host_collective_us/value/all_gather: value -1 out of range; valid: 0 .. 1000");
  EXPECT_NE(err(with("/settings/flash", true)).find("/settings/flash"), std::string::npos);  // unknown key
  EXPECT_EQ(
      err(with("/settings/data_parallel", nlohmann::json{{"value", {"ddp", "zero-4"}}, {"source", "x"}})),
      "f.json: /settings/data_parallel/value/1: expected one of: ddp, zero-1, zero-2, zero-3, "
      "fsdp-hybrid");
  EXPECT_EQ(
      err(with("/settings/schedules", nlohmann::json{{"value", {"1f1b", "roundpipe"}}, {"source", "x"}})),
      "f.json: /settings/schedules/value/1: roundpipe is a CPU-offload system that runs on any framework; "
      "list "
      "pipeline schedules only");
  EXPECT_NE(err(with("/settings/schedules", nlohmann::json{{"value", {"1f2b"}}, {"source", "x"}}))
                .find("f.json: /settings/schedules/value/0: unknown schedule '1f2b'"),
            std::string::npos);
  nlohmann::json missing = nlohmann::json::parse(shipped_text("megatron-core"));
  missing["settings"].erase("norm_backward");
  EXPECT_NE(err(missing.dump()).find("/settings/norm_backward"), std::string::npos);
  EXPECT_EQ(testing::error_of([] { load_framework("megatron-lm-2020"); }).find("megatron-lm-2020"), 0u);
}

}  // namespace
}  // namespace pipesim::sim
