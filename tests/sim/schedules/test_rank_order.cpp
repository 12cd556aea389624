// The order of the ranks outside tp and cp: a pipeline's stages side by side (tp-cp-pp-dp, the default) or
// the data-parallel replicas side by side (tp-cp-dp-pp, Megatron-LM's), and which links each puts the
// pipeline hops and the gradient rings on.
#include <string>

#include <gtest/gtest.h>

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
    j.rank_order = order;
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

}  // namespace
}  // namespace pipesim::sim
