// The order of the ranks outside tp and cp: a pipeline's stages side by side (tp-cp-pp-dp, the default) or
// the data-parallel replicas side by side (tp-cp-dp-pp, Megatron-LM's), and which links each puts the
// pipeline hops and the gradient rings on.
#include <string>

#include <gtest/gtest.h>

#include "pipesim/sim/job/framework.hpp"
#include "pipesim/sim/job/job.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

TEST(RankOrder, ReplicasInsideStagesKeepDataParallelRingsOnANode) {
  // tp 4 x dp 2 x pp 2 on 8-GPU nodes: in the default order a pipeline fills a node and the gradient ring
  // crosses to the other; ordered tp-cp-dp-pp (Megatron-LM) a node holds both replicas of one stage, so the
  // ring stays on NVLink and the pipeline hop crosses nodes. Symmetric and explicit plans agree either way.
  for (const char* order : {"tp-cp-pp-dp", "tp-cp-dp-pp"}) {
    JobOptions j = testing::job("llama3-8b", "h100-sxm-8x", 2, 4, 2, 4);
    j.rank_order = std::string(order);
    j.seq = 2048;
    const Plan plan = testing::plan_of("1f1b", j);
    const bool dp_inside = std::string(order) == "tp-cp-dp-pp";
    int p2p = 0, ring = 0;
    for (const Op& op : plan.ops) {
      const auto* w = std::get_if<TransferWork>(&op.payload);
      if (!w) continue;
      const bool across = plan.devices[static_cast<std::size_t>(w->src)].node !=
                          plan.devices[static_cast<std::size_t>(w->dst)].node;
      const std::string& stream = plan.streams[static_cast<std::size_t>(op.stream)].name;
      if (op.kind == OpKind::kP2P) {
        EXPECT_EQ(across, dp_inside) << order;
        ++p2p;
      } else if (stream == "collective") {
        EXPECT_EQ(across, !dp_inside) << order;
        ++ring;
      }
    }
    EXPECT_GT(p2p, 0);
    EXPECT_GT(ring, 0);
    EXPECT_EQ(plan.meta.note.find("ranks ordered tp, cp, dp, pp") != std::string::npos, dp_inside);
    const Duration sym =
        testing::step_ns(testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b"))));
    j.explicit_replicas = true;
    EXPECT_EQ(testing::step_ns(testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b")))), sym)
        << order;
  }
  JobOptions bad = testing::job("llama3-8b", "h100-sxm-8x", 2, 4, 2, 4);
  bad.rank_order = "pp-dp-tp";
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", bad); }).find("rank_order"), std::string::npos);
}

TEST(RankOrder, TheFrameworkNumbersItsRanks) {
  // Megatron-LM, nanotron and torchtitan build their groups with the replicas side by side and the pipeline
  // stages outermost; a job that names no order takes its framework's, one that names it keeps its own. A
  // framework file without a rank order keeps pipesim's (hf-transformers runs no pipeline).
  EXPECT_EQ(load_framework("nanotron").rank_order.value, "tp-cp-dp-pp");
  EXPECT_EQ(load_framework("megatron-core").rank_order.value, kDefaultRankOrder);  // the default: unchanged
  EXPECT_EQ(load_framework("hf-transformers").rank_order.value, kDefaultRankOrder);
  JobOptions j = testing::job("llama3-8b", "h100-sxm-8x", 2, 4, 2, 4);
  j.seq = 2048;
  for (const char* framework : {"nanotron", "megatron-lm-2022", "fsdp"}) {
    j.framework = framework;
    EXPECT_NE(testing::plan_of("1f1b", j).meta.note.find("ranks ordered tp, cp, dp, pp"), std::string::npos)
        << framework;
  }
  j.rank_order = std::string(kDefaultRankOrder);
  EXPECT_EQ(testing::plan_of("1f1b", j).meta.note.find("ranks ordered tp, cp, dp, pp"), std::string::npos);
}

}  // namespace
}  // namespace pipesim::sim
