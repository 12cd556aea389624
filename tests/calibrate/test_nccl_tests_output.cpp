// A cluster's network from its own nccl-tests outputs (calibrate --from-nccl-tests): what is read from each
// output, and the profile's bus bandwidth by node count that comes of them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "pipesim/calibrate/nccl_tests_output.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/hardware/nccl_tuning.hpp"
#include "test_helpers.hpp"

namespace pipesim::calibrate {
namespace {

/// An nccl-tests 2.13 output of `op` over `nodes` hosts of 8 GPUs, as all_reduce_perf prints it: 64 MiB at
/// `small` GB/s and 256 MiB at `large` (out of place; the in-place figures differ, and are not read).
std::string output(const std::string& op, int nodes, double small, double large,
                   const std::string& tag = "") {
  std::string s = tag + "# Collective test starting: " + op + "_perf\n";
  s += tag +
       "# nThread 1 nGpus 1 minBytes 67108864 maxBytes 268435456 step: 4(factor) warmup iters: 5 iters: 20\n";
  s += tag + "#\n" + tag + "# Using devices\n";
  for (int r = 0; r < nodes * 8; ++r)
    s += fmt::format(
        "{}#  Rank {:2} Group  0 Pid {:6} on ip-10-0-0-{} device  {} [0x{:02x}] NVIDIA H100 80GB HBM3\n", tag,
        r, 4000 + r, r / 8, r % 8, 0x53 + r % 8);
  s += "ip-10-0-0-0:4000:4000 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.0<0>\n";  // NCCL_DEBUG=INFO
  s += tag + "#\n";
  s += tag +
       "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
       "algbw   "
       "busbw #wrong\n";
  s += tag +
       "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)"
       "  (GB/s)\n";
  s += fmt::format(
      "{}    67108864      16777216     float     sum      -1   1000.0   67.11  {:.2f}      0    990.0   "
      "67.79   99.99      0\n",
      tag, small);
  s += fmt::format(
      "{}   268435456      67108864     float     sum      -1   3000.0   89.48  {:.2f}      0   2990.0   "
      "89.78   99.99      0\n",
      tag, large);
  s += tag + "# Out of bounds values : 0 OK\n" + tag + "# Avg bus bandwidth    : 123.4\n";
  return s;
}

TEST(NcclTestsOutput, ARunsCollectiveNodesAndBusBandwidthAreRead) {
  const NcclTestsRun run = parse_nccl_tests_output(output("all_reduce", 2, 120.5, 180.25), "ar2.txt");
  EXPECT_EQ(run.op, "all_reduce");
  EXPECT_EQ(run.nodes, 2);
  EXPECT_EQ(run.ranks, 16);
  EXPECT_EQ(run.device, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(run.busbw.size(), 2u);
  EXPECT_DOUBLE_EQ(run.busbw[0].x, 67108864.0);
  EXPECT_DOUBLE_EQ(run.busbw[0].y, 120.5);  // out of place, not the in-place 99.99
  EXPECT_DOUBLE_EQ(run.busbw[1].y, 180.25);
  // mpirun --tag-output prefixes every line; the collective may come from the file's name alone.
  std::string tagged = output("all_gather", 4, 50, 90, "[1,0]<stdout>:");
  tagged.erase(0, tagged.find('\n') + 1);
  const NcclTestsRun gather = parse_nccl_tests_output(tagged, "runs/all_gather_perf_4n.log");
  EXPECT_EQ(gather.op, "all_gather");
  EXPECT_EQ(gather.nodes, 4);
  EXPECT_DOUBLE_EQ(gather.busbw[1].y, 90);
}

TEST(NcclTestsOutput, TheProfileTakesEachCollectivesFigureByNodeCount) {
  const sim::HardwareProfile base = sim::load_hardware_profile("h100-sxm-8x");
  const std::vector<NcclTestsRun> runs = {
      parse_nccl_tests_output(output("all_reduce", 4, 100, 150), "ar4.txt"),
      parse_nccl_tests_output(output("all_reduce", 2, 120, 200), "ar2.txt"),
      parse_nccl_tests_output(output("all_gather", 2, 90, 160), "ag2.txt")};
  const sim::HardwareProfile hw = with_nccl_tests(base, runs, 0);  // the largest size every run ran: 256 MiB
  EXPECT_EQ(hw.network.busbw_message_bytes, 268435456);
  const auto& ar = hw.network.busbw_by_nodes[static_cast<std::size_t>(sim::CollectiveKind::kAllReduce)];
  ASSERT_EQ(ar.size(), 2u);
  EXPECT_DOUBLE_EQ(ar[0].x, 2);
  EXPECT_DOUBLE_EQ(ar[0].y, 200);
  EXPECT_DOUBLE_EQ(ar[1].x, 4);
  EXPECT_DOUBLE_EQ(ar[1].y, 150);
  EXPECT_EQ(hw.network.busbw_by_nodes[static_cast<std::size_t>(sim::CollectiveKind::kAllGather)].size(), 1u);
  EXPECT_TRUE(
      hw.network.busbw_by_nodes[static_cast<std::size_t>(sim::CollectiveKind::kReduceScatter)].empty());
  EXPECT_NE(
      hw.network.sources.at("collective_busbw_by_nodes").find("ar4.txt (all_reduce_perf, 4 nodes x 8 GPUs"),
      std::string::npos);
  // Another size every run measured; the measured figure comes back as the NICs' rate slows below the
  // datasheet's; the profile round-trips through its JSON.
  EXPECT_DOUBLE_EQ(with_nccl_tests(base, runs, 67108864).network.busbw_by_nodes[0][0].y, 120);
  EXPECT_LT(sim::network_nic_GBps(hw, sim::CollectiveKind::kAllReduce, 4),
            sim::network_nic_GBps(hw, sim::CollectiveKind::kAllReduce, 2));
  const sim::HardwareProfile back =
      sim::parse_hardware_profile(sim::hardware_profile_to_json(hw), "calibrated.json");
  EXPECT_EQ(back.network.busbw_by_nodes[0].size(), 2u);
  EXPECT_EQ(back.network.busbw_message_bytes, 268435456);
}

TEST(NcclTestsOutput, AMalformedOrUnfitOutputIsRefusedInOneLine) {
  auto error = [](const std::string& text, const std::string& file = "out.txt") {
    return sim::testing::error_of([&] { parse_nccl_tests_output(text, file); });
  };
  std::string no_ranks = output("all_reduce", 1, 1, 2);
  for (std::size_t at; (at = no_ranks.find("#  Rank")) != std::string::npos;)
    no_ranks.erase(at, no_ranks.find('\n', at) - at + 1);
  EXPECT_NE(error(no_ranks).find("no '#  Rank N ... on HOST' lines"), std::string::npos);
  EXPECT_NE(error(output("broadcast", 1, 1, 2)).find("valid: all_reduce_perf"), std::string::npos);
  std::string no_op = output("all_reduce", 1, 1, 2);
  no_op.erase(0, no_op.find('\n') + 1);
  EXPECT_NE(error(no_op, "out.txt").find("no collective in the file's name"), std::string::npos);
  EXPECT_NE(error("# Collective test starting: all_reduce_perf\n  1024  256 float sum -1 1.0 1.0 1.0 0\n")
                .find("line 2: a result row before the column header"),
            std::string::npos);
  std::string bad = output("all_reduce", 1, 1, 2);
  bad.replace(bad.find("67.11  1.00"), 11, "67.11  nan");
  EXPECT_NE(error(bad).find("a bus bandwidth of 0 GB/s or more"), std::string::npos);
  std::string rows = output("all_reduce", 1, 1, 2);
  EXPECT_NE(error(rows + "    67108864  16777216 float sum -1 1.0 1.0 1.0 0\n").find("sizes must increase"),
            std::string::npos);

  const sim::HardwareProfile base = sim::load_hardware_profile("h100-sxm-8x");
  const NcclTestsRun two = parse_nccl_tests_output(output("all_reduce", 2, 1, 2), "a.txt");
  EXPECT_NE(sim::testing::error_of([&] {
              with_nccl_tests(base, {two, two}, 0);
            }).find("a second all_reduce_perf run"),
            std::string::npos);
  EXPECT_NE(sim::testing::error_of([&] {
              with_nccl_tests(base, {two}, 1 << 20);
            }).find("no result at 1048576 bytes"),
            std::string::npos);
  NcclTestsRun four_a_node = two;
  four_a_node.ranks = 8;
  EXPECT_NE(
      sim::testing::error_of([&] { with_nccl_tests(base, {four_a_node}, 0); }).find("8 ranks on 2 nodes"),
      std::string::npos);
  EXPECT_NE(sim::testing::error_of([&] { with_nccl_tests(base, {}, 0); }).find("no nccl-tests output given"),
            std::string::npos);
}

}  // namespace
}  // namespace pipesim::calibrate
