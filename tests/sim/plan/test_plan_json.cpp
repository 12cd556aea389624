#include <gtest/gtest.h>

#include <stdexcept>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

Plan model_plan(const std::string& schedule) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 4, 2, 2, 8);
  j.seq = 1024;
  j.recompute = "selective";
  return testing::plan_of(schedule, j);
}

TEST(PlanJson, RoundTripIsLossless) {
  for (const auto& s : schedule_registry()) {
    if (s.kind == ScheduleKind::kWholePlan) continue;  // offload schedules: see test_offload_schedules.cpp
    Plan p = model_plan(s.name);
    std::string text = plan_to_json(p);
    Plan back = plan_from_json(text, "p.json");
    EXPECT_EQ(plan_to_json(back), text) << s.name;
    EXPECT_NE(text.find("\"gemms\""), std::string::npos) << s.name << ": compute ops carry their GEMM shapes";
    // And the loaded plan predicts exactly the same timeline.
    Timeline a = Engine{}.run(p), b = Engine{}.run(back);
    EXPECT_EQ(a.start, b.start) << s.name;
    EXPECT_EQ(a.end, b.end) << s.name;
  }
}

TEST(PlanJson, TheCpuTimeOfAnOpsCollectivesTravelsWithIt) {
  // An eager framework's TP collectives cost the CPU more than a kernel's dispatch (ComputeWork::host_ns):
  // the saved plan keeps it, and the loaded plan's CPU-bound op lasts as long.
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 2, 1, 4);
  j.seq = 256;
  j.microbatch_size = 1;
  j.framework = "nanotron";
  const Plan p = testing::plan_of("1f1b", j);
  const std::string text = plan_to_json(p);
  EXPECT_NE(text.find("\"host_ns\""), std::string::npos);
  const Plan back = plan_from_json(text, "p.json");
  EXPECT_EQ(plan_to_json(back), text);
  EXPECT_EQ(Engine{}.run(p).end, Engine{}.run(back).end);
}

TEST(PlanJson, TwinCountsTravelWithThePlan) {
  // Offloaded optimizer on one node of 8 H100s (pp 2, tp 2, dp 2): each simulated GPU stands for 4 GPUs of
  // its stage on the node and 2 under its PCIe switch.
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 2, 2, 4);
  j.seq = 1024;
  j.optimizer_offload = true;
  Plan p = testing::plan_of("1f1b", j);
  ASSERT_EQ(p.meta.node_twins, 4);
  ASSERT_EQ(p.meta.switch_twins, 2);
  const std::string text = plan_to_json(p);
  Plan back = plan_from_json(text, "p.json");
  EXPECT_EQ(back.meta.node_twins, 4);
  EXPECT_EQ(back.meta.switch_twins, 2);
  EXPECT_EQ(plan_to_json(back), text);
  Timeline a = Engine{}.run(p), b = Engine{}.run(back);
  EXPECT_EQ(a.end, b.end);
  EXPECT_EQ(a.peak_bytes, b.peak_bytes);
  // Plans without shared host links leave the counts out, and a count must be at least 1.
  EXPECT_EQ(plan_to_json(model_plan("1f1b")).find("twins"), std::string::npos);
  std::string zero = text;
  zero.replace(zero.find("\"node_twins\": 4"), 15, "\"node_twins\": 0");
  const std::string e = testing::error_of([&] { plan_from_json(zero, "p.json"); });
  EXPECT_NE(e.find("p.json: /meta/node_twins"), std::string::npos) << e;
}

TEST(PlanJson, RejectsBadPlans) {
  std::string text = plan_to_json(model_plan("1f1b"));
  auto err = [](const std::string& t) { return testing::error_of([&] { plan_from_json(t, "p.json"); }); };
  std::string kind = text;
  kind.replace(kind.find("\"kind\": \"forward\""), 17, "\"kind\": \"fwd\"");
  EXPECT_NE(err(kind).find("unknown value 'fwd'; valid: forward, backward"), std::string::npos) << err(kind);
  std::string fmt = text;
  fmt.replace(fmt.find("pipesim-plan"), 12, "pipesim-plna");
  EXPECT_NE(err(fmt).find("p.json: /format: expected \"pipesim-plan\""), std::string::npos);
  std::string dep = text;
  dep.replace(dep.rfind("\"deps\": []"), 10, "\"deps\": [99999999]");
  EXPECT_NE(err(dep).find("/deps/0: value 99999999 out of range"), std::string::npos) << err(dep);
  EXPECT_NE(err("[1,2]").find("expected a JSON object"), std::string::npos);
  // Layer indices are kept in 16 bits.
  std::string layer = text;
  const std::size_t at = layer.find("\"layer_begin\": ") + 15;
  layer.replace(at, layer.find(',', at) - at, "40000");
  EXPECT_NE(err(layer).find("/tags/layer_begin: value 40000 out of range; valid: -1 .. 32767"),
            std::string::npos)
      << err(layer);
}

TEST(PlanJson, ExtrasTravelWithTheirOps) {
  // Memory sits in the plan's extras, one entry per op that allocates or frees any: the round trip keeps
  // each with its op and gives none to the others.
  testing::PlanMaker pm(2);
  const OpId timed = pm.add(0, ComputeWork{1e9, 1, 1, 0}, 1234);
  const OpId plain = pm.add(0, ComputeWork{1e9, 1, 1, 0}, -1);
  const OpId holds = pm.add(2, ComputeWork{1e9, 1, 1, 0}, -1, {timed});
  pm.plan.extras_of(holds).alloc_bytes = 1 << 20;
  pm.plan.extras_of(holds).free_bytes = 1 << 10;
  const Plan back = plan_from_json(plan_to_json(pm.plan), "p.json");
  ASSERT_EQ(back.extras.size(), 1u);
  EXPECT_EQ(back.ops[static_cast<std::size_t>(timed)].fixed_duration, 1234);
  EXPECT_EQ(back.ops[static_cast<std::size_t>(timed)].extras, -1);
  EXPECT_EQ(back.ops[static_cast<std::size_t>(plain)].extras, -1);
  EXPECT_EQ(back.extras_of(back.ops[static_cast<std::size_t>(plain)]), OpExtras{});
  EXPECT_EQ(back.extras_of(back.ops[static_cast<std::size_t>(holds)]), (OpExtras{1 << 20, 1 << 10}));
  const Timeline a = Engine{}.run(pm.plan), b = Engine{}.run(back);
  EXPECT_EQ(a.end, b.end);
  EXPECT_EQ(a.peak_bytes, b.peak_bytes);
  EXPECT_EQ(b.end[static_cast<std::size_t>(timed)], 1234);
}

TEST(OpTags, LayerIndicesBeyond16BitsAreRefused) {
  EXPECT_EQ(OpTags(0, 0, 0, 32766, 32767, 0).layer_end, 32767);
  EXPECT_THROW(OpTags(0, 0, 0, 0, 32768, 0), std::length_error);
  EXPECT_THROW(OpTags(0, 0, 0, -2, 1, 0), std::length_error);
}

}  // namespace
}  // namespace pipesim::sim
