// Collectives as NCCL runs them: the algorithm and protocol NCCL's cost model picks, and its latency, counted
// by hand from NCCL's tuner constants (src/graph/tuning.cc): base latencies tree {6.8, 14, 8.4} and ring
// {6.6, 14, 8.4} us for {LL, LL128, Simple}; per step on NVLink tree {0.6, 1.25, 4.0}, ring {0.6, 1.9, 3.4};
// over the network tree {5.0, 8.5, 14}, ring {2.7, 4.0, 14}.
#include <gtest/gtest.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/hardware/nccl_tuning.hpp"
#include "pipesim/sim/job/job.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

TEST(NcclTuning, ASmallAllReduceInsideANodeTakesTheLowLatencyProtocol) {
  // 8 KiB over 8 NVLink GPUs: LL's ring, 6.6 + 14 steps x 0.6 = 15 us, its flags doubling the bytes.
  const NcclCollective c = nccl_collective(CollectiveKind::kAllReduce, 8, 1, true, 8192, 450);
  EXPECT_EQ(c.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(c.protocol, NcclProtocol::kLL);
  EXPECT_DOUBLE_EQ(c.latency_us, 6.6 + 14 * 0.6);
  EXPECT_DOUBLE_EQ(c.wire_factor, 2.0);
}

TEST(NcclTuning, ALargeAllReduceInsideANodeIsASimpleRing) {
  // 1 GiB: the bytes dominate, Simple's full bandwidth wins; 8.4 + 14 x 3.4 = 56 us.
  const NcclCollective c = nccl_collective(CollectiveKind::kAllReduce, 8, 1, true, 1 << 30, 450);
  EXPECT_EQ(c.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(c.protocol, NcclProtocol::kSimple);
  EXPECT_NEAR(c.latency_us, 8.4 + 14 * 3.4, 1e-9);
  EXPECT_EQ(c.wire_factor, 1.0);
}

TEST(NcclTuning, AcrossSixteenNodesATreeBeatsTheRing) {
  // 512 MiB over 16 nodes of 8 GPUs, each GPU's NIC at 50 GB/s: NCCL's model runs the ring at the node's
  // eight NICs, 400 GB/s of bus bandwidth (nChannels x bwInter). Ring Simple: 8.4 + 224 steps inside the
  // nodes x 3.4 + 30 across x 14 = 1,190 us, plus 2 x 127/128 x 512 MiB / 400 GB/s = 2,663 us: 3,853 us. Tree
  // Simple: 8.4 + 2 x (7 x 4.0 + log2(16) x 14) = 176.4 us, plus the whole buffer up and down at 0.92 of the
  // rate, 2,918 us: 3,094 us (LL128's tree: 99.5 + 3,112).
  const std::int64_t bytes = std::int64_t{512} << 20;
  EXPECT_NEAR(
      nccl_latency_us(CollectiveKind::kAllReduce, NcclAlgorithm::kRing, NcclProtocol::kSimple, 128, 16, true),
      8.4 + 224 * 3.4 + 30 * 14.0, 1e-9);
  const NcclCollective c = nccl_collective(CollectiveKind::kAllReduce, 128, 16, true, bytes, 50);
  EXPECT_EQ(c.algorithm, NcclAlgorithm::kTree);
  EXPECT_EQ(c.protocol, NcclProtocol::kSimple);
  EXPECT_NEAR(c.latency_us, 8.4 + 2 * (7 * 4.0 + 4 * 14.0), 1e-9);
  EXPECT_NEAR(c.wire_factor, 128.0 / 127.0 / 0.92, 1e-12);
  // A 64 MiB one (333 us of ring bytes) takes LL128's tree, 99.5 + 389 us against Simple's 176.4 + 365.
  EXPECT_EQ(nccl_collective(CollectiveKind::kAllReduce, 128, 16, true, 64 << 20, 50).protocol,
            NcclProtocol::kLL128);
}

TEST(NcclTuning, WhereTheEfaPluginTunesNcclItsTreeRunsAtHalfTheRingsRate) {
  // The EFA plugin's model for P5 (aws-ofi-nccl src/tuner/nccl_ofi_model.cpp): a network step 20 us (23 with
  // Simple), a tree's NVLink step 28 us with Simple, and the message (not the ring's bus bytes) over a GPU's
  // NICs times its 8 channels, a tree's at half that rate. 256 GPUs on 32 nodes at 50 GB/s a GPU: 400 GB/s.
  // 8 GiB (21,475 us of message): Simple's ring, latency 8.4 + 448 x 3.4 + 62 x 23 = 2,957.6 us (24,432 us),
  // against LL128's ring at 0.92 (14 + 448 x 1.9 + 62 x 20 = 2,105.2 us: 25,447) and the tree's Simple, twice
  // the bytes (8.4 + 2 x (7 x 28 + log2(32) x 23) = 630.4 us: 43,580). 4 MiB (10.5 us of message): the tree's
  // LL128, 14 + 2 x (7 x 1.25 + 5 x 20) = 231.5 us and twice the bytes at 0.9375 of the rate, 22.4 us: 253.9
  // us, against 257.1 for the tree's LL (215.2 + 41.9) and 2,116.6 for the ring's LL128.
  const std::array<double, 3> efa{20, 20, 23};
  EXPECT_NEAR(nccl_latency_us(CollectiveKind::kAllReduce, NcclAlgorithm::kTree, NcclProtocol::kSimple, 256,
                              32, true, &efa),
              8.4 + 2 * (7 * 28.0 + 5 * 23.0), 1e-9);
  const NcclCollective large =
      nccl_collective(CollectiveKind::kAllReduce, 256, 32, true, std::int64_t{8} << 30, 50, &efa);
  EXPECT_EQ(large.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(large.protocol, NcclProtocol::kSimple);
  EXPECT_NEAR(large.latency_us, 8.4 + 448 * 3.4 + 62 * 23.0, 1e-9);
  const NcclCollective small = nccl_collective(CollectiveKind::kAllReduce, 256, 32, true, 4 << 20, 50, &efa);
  EXPECT_EQ(small.algorithm, NcclAlgorithm::kTree);
  EXPECT_EQ(small.protocol, NcclProtocol::kLL128);
  EXPECT_NEAR(small.latency_us, 14.0 + 2 * (7 * 1.25 + 5 * 20.0), 1e-9);
  EXPECT_DOUBLE_EQ(small.wire_factor, 2.0 / 0.9375);
  // Without the plugin (InfiniBand's figures), NCCL's own tree, LL128 at 64 MiB: 0.92 x 120/128 of the rate
  // and 0.9 of that (its tree correction at 64 MiB), its bytes 256/255 of a ring's (116.5 + 432 us against
  // Simple's 204.4 + 456 at its 0.8 and the ring's 3,359 + 334).
  EXPECT_NEAR(nccl_collective(CollectiveKind::kAllReduce, 256, 32, true, 64 << 20, 50).wire_factor,
              256.0 / 255.0 / (0.92 * 120 / 128) / 0.9, 1e-12);
}

TEST(NcclTuning, TreesTakeNcclsCorrectionAtMediumSizesAndSimpleRingsAcrossNodesItsPlateau) {
  // ncclTopoGetAlgoTime (NVIDIA/nccl src/graph/tuning.cc): a tree all-reduce's bandwidth times
  // treeCorrectionFactor[protocol][log2(bytes / 64)] below 512 MiB, and a Simple ring all-reduce across nodes
  // 1.4 times its latency once each rank's share of a channel reaches 64 B.
  // 8 GiB over 32 nodes (InfiniBand's figures, 400 GB/s a node): Simple's ring, latency (8.4 + 448 x 3.4 + 62
  // x 14) x 1.4 = 3,359.4 us and 42,781 us of bytes, against Simple's tree, 204.4 us and its bytes 256/255 /
  // 0.92 as long (46,683 us), uncorrected at 8 GiB.
  const NcclCollective large =
      nccl_collective(CollectiveKind::kAllReduce, 256, 32, true, std::int64_t{8} << 30, 50);
  EXPECT_EQ(large.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(large.protocol, NcclProtocol::kSimple);
  EXPECT_NEAR(large.latency_us, (8.4 + 448 * 3.4 + 62 * 14.0) * 1.4, 1e-9);
  EXPECT_NEAR(large.latency_us,
              1.4 * nccl_latency_us(CollectiveKind::kAllReduce, NcclAlgorithm::kRing, NcclProtocol::kSimple,
                                    256, 32, true),
              1e-9);
  EXPECT_DOUBLE_EQ(large.wire_factor, 1.0);
  // Inside one node nothing is corrected: 16 MiB on 8 GPUs over PCIe's figures is a ring at its full rate.
  const NcclCollective inside = nccl_collective(CollectiveKind::kAllReduce, 8, 1, false, 16 << 20, 25);
  EXPECT_EQ(inside.algorithm, NcclAlgorithm::kRing);
  EXPECT_NEAR(inside.latency_us,
              nccl_latency_us(CollectiveKind::kAllReduce, inside.algorithm, inside.protocol, 8, 1, false),
              1e-9);
}

TEST(NcclTuning, CollectivesThePluginsTunerLeavesToNcclPayTheLatencyThePluginReports) {
  // The EFA plugin's tuner times all-reduces only (aws-ofi-nccl nccl_ofi_tuner_compute_cost returns -1 for
  // every other collective, and its p5 regions cover only all-reduces where a node has several ranks); NCCL
  // then times the rest with its own figures, adding to each network step the latency the plugin reports (75
  // us on P5, src/platform-aws.cpp), twice with Simple (tuning.cc: the flush). An all-gather of 32 MiB over
  // 256 GPUs on 32 nodes at 50 GB/s a GPU (the ring at a node's eight NICs, 400 GB/s), 224 steps inside the
  // nodes and 31 across (the proxy's 1 us, 3 with Simple, where it exceeds NVLink's step):
  //   Simple 8.4 + 224 x 3.4 + 31 x (14 + 2 x 75) = 5,854.0 us, plus 255/256 x 32 MiB / 400 GB/s = 83.6 us;
  //   LL128  14 + 224 x 1.9 + 31 x (4 + 75) = 2,888.6 us, plus 83.6 / 0.92 = 90.8 us: 2,979.4 us;
  //   LL     6.6 + 224 x 1.0 + 31 x (2.7 + 75) = 2,639.3 us, plus 83.6 / 0.5 = 167.1 us: 2,806.4 us.
  const std::array<double, 3> efa{20, 20, 23};
  const NcclCollective gather =
      nccl_collective(CollectiveKind::kAllGather, 256, 32, true, 32 << 20, 50, nullptr, 75);
  EXPECT_EQ(gather.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(gather.protocol, NcclProtocol::kLL);
  EXPECT_NEAR(gather.latency_us, 6.6 + 224 * 1.0 + 31 * (2.7 + 75.0), 1e-9);
  EXPECT_NEAR(nccl_latency_us(CollectiveKind::kAllGather, NcclAlgorithm::kRing, NcclProtocol::kSimple, 256,
                              32, true, nullptr, 75),
              8.4 + 224 * 3.4 + 31 * (14 + 2 * 75.0), 1e-9);
  // One GPU a node: PAT, its log term over NCCL's tree step plus the reported latency, 8 + 6 x (14 + 150) /
  // 3.5 + 64 x 2.8 us.
  EXPECT_NEAR(nccl_latency_us(CollectiveKind::kAllGather, NcclAlgorithm::kPat, NcclProtocol::kSimple, 64, 64,
                              true, nullptr, 75),
              8 + 6 * (14 + 150.0) / 3.5 + 64 * 2.8, 1e-9);

  // Through a profile that gives both (a platform whose plugin tunes by its model): the all-gather takes
  // NCCL's steps and the reported latency; the all-reduce the plugin's step alone, its 8 GiB Simple ring 8.4
  // + 448 x 3.4 + 62 x 23.
  HardwareProfile hw = load_hardware_profile("h100-sxm-8x");
  hw.network.nic_GBps = 50;
  hw.network.step_latency_us = efa;
  hw.network.reported_latency_us = 75;
  EXPECT_NEAR(nccl_timing(hw, CollectiveKind::kAllGather, 256, 32, 32 << 20).latency_us, gather.latency_us,
              1e-9);
  EXPECT_NEAR(nccl_timing(hw, CollectiveKind::kReduceScatter, 256, 32, 32 << 20).latency_us,
              gather.latency_us, 1e-9);
  EXPECT_NEAR(nccl_timing(hw, CollectiveKind::kAllReduce, 256, 32, std::int64_t{8} << 30).latency_us,
              8.4 + 448 * 3.4 + 62 * 23.0, 1e-9);
}

TEST(NcclTuning, OneGpuANodeGathersByPat) {
  // An all-gather of 1 MiB over 64 nodes, one GPU each: PAT pays 8 + log2(64) x 14 / 3.5 + 64 x 2.8 =
  // 211.2 us where the ring pays 8.4 + 63 x 14 = 890.4 (with one GPU a node NCCL takes the tree's network
  // latency) and LL's ring 6.6 + 63 x 5.0 = 321.6 with twice the bytes.
  const NcclCollective c = nccl_collective(CollectiveKind::kAllGather, 64, 64, true, 1 << 20, 50);
  EXPECT_EQ(c.algorithm, NcclAlgorithm::kPat);
  EXPECT_NEAR(c.latency_us, 8 + 6 * 14.0 / 3.5 + 64 * 2.8, 1e-9);
  EXPECT_NEAR(
      nccl_latency_us(CollectiveKind::kAllGather, NcclAlgorithm::kRing, NcclProtocol::kSimple, 64, 64, true),
      8.4 + 63 * 14.0, 1e-9);
  // With eight GPUs a node PAT is off: a ring at the node's eight NICs (400 GB/s), its 448 steps inside the
  // nodes and 63 across (ring latency: several GPUs a node). 1 GiB: LL128, 14 + 448 x 1.9 + 63 x 4.0 =
  // 1,117.2 us plus 2,679 / 0.92 us of bytes, against Simple's 8.4 + 448 x 3.4 + 63 x 14 = 2,413.6 plus
  // 2,679.
  const NcclCollective eight = nccl_collective(CollectiveKind::kAllGather, 512, 64, true, 1 << 30, 50);
  EXPECT_EQ(eight.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(eight.protocol, NcclProtocol::kLL128);
  EXPECT_NEAR(eight.latency_us, 14 + (511 - 63) * 1.9 + 63 * 4.0, 1e-9);
}

TEST(NcclTuning, AnAllReduceAcrossNodesWithNvlsRunsAsNvlsTree) {
  // 1 GiB over two nodes of 8 NVLink-SHARP GPUs, a NIC each at 50 GB/s (the ring at 400 GB/s), the node's
  // NVLS all-reduce at 466 GB/s. Ring Simple: 8.4 + 28 x 3.4 + 2 x 14 = 131.6 us plus 2 x 15/16 x 1 GiB / 400
  // GB/s = 5,033.2 us. NVLS-tree: 25 + 2 x log2(2) x 20.9 = 66.8 us, its bytes at the slower of the node's
  // NVLS (466) and, on two nodes, twice the NICs' (800): 4,320.3 us.
  const std::int64_t gib = std::int64_t{1} << 30;
  const NcclCollective two =
      nccl_collective(CollectiveKind::kAllReduce, 16, 2, true, gib, 50, nullptr, 0, 466);
  EXPECT_EQ(two.algorithm, NcclAlgorithm::kNvlsTree);
  EXPECT_EQ(two.protocol, NcclProtocol::kSimple);
  EXPECT_NEAR(two.latency_us, 25 + 2 * 20.9, 1e-9);
  EXPECT_NEAR(two.wire_factor, 400.0 / 466, 1e-12);
  // Four nodes: the NICs' 400 GB/s bound it as they bound the ring, with less latency (25 + 2 x 2 x 20.9 =
  // 108.6 us against the ring's 282.8).
  const NcclCollective four =
      nccl_collective(CollectiveKind::kAllReduce, 32, 4, true, gib, 50, nullptr, 0, 466);
  EXPECT_EQ(four.algorithm, NcclAlgorithm::kNvlsTree);
  EXPECT_NEAR(four.latency_us, 25 + 4 * 20.9, 1e-9);
  EXPECT_DOUBLE_EQ(four.wire_factor, 1.0);
  // Not with one GPU a node, nor for an all-gather, nor without NVLS, nor where the EFA plugin's model
  // chooses (its NVLS-tree is slower than its tree).
  EXPECT_NE(nccl_collective(CollectiveKind::kAllReduce, 4, 4, true, gib, 50, nullptr, 0, 466).algorithm,
            NcclAlgorithm::kNvlsTree);
  EXPECT_NE(nccl_collective(CollectiveKind::kAllGather, 32, 4, true, gib, 50, nullptr, 0, 466).algorithm,
            NcclAlgorithm::kNvlsTree);
  EXPECT_NE(nccl_collective(CollectiveKind::kAllReduce, 32, 4, true, gib, 50).algorithm,
            NcclAlgorithm::kNvlsTree);
  const std::array<double, 3> efa{20, 20, 23};
  EXPECT_NE(nccl_collective(CollectiveKind::kAllReduce, 32, 4, true, gib, 50, &efa, 0, 466).algorithm,
            NcclAlgorithm::kNvlsTree);

  // Through the profiles: h100-sxm-8x's node measured its NVLS all-reduce by size; on two nodes the bytes run
  // at that rate. On h100-p5-8x's two nodes (the plugin tunes p5 by regions, which NCCL's choice stands for)
  // NCCL's network step adds the 75 us the plugin reports, twice with Simple: 25 + 2 x (20.9 + 150) us.
  const HardwareProfile sxm = load_hardware_profile("h100-sxm-8x");
  const double nvls = interpolate_log_x(sxm.node.nvlink.allreduce_busbw_by_size, static_cast<double>(gib));
  const NcclCollective timed = nccl_timing(sxm, CollectiveKind::kAllReduce, 16, 2, gib);
  EXPECT_EQ(timed.algorithm, NcclAlgorithm::kNvlsTree);
  EXPECT_NEAR(timed.wire_factor, 8 * sxm.network.nic_GBps / nvls, 1e-12);
  const NcclCollective p5 =
      nccl_timing(load_hardware_profile("h100-p5-8x"), CollectiveKind::kAllReduce, 16, 2, gib);
  EXPECT_EQ(p5.algorithm, NcclAlgorithm::kNvlsTree);
  EXPECT_NEAR(p5.latency_us, 25 + 2 * (20.9 + 2 * 75.0), 1e-9);
}

TEST(NcclTuning, PcieGpusPayPciesStepLatency) {
  // No NVLink: 8 GPUs over PCIe, 1 GiB all-reduce as a Simple ring: 8.4 + 14 x 5.7 us.
  EXPECT_NEAR(nccl_collective(CollectiveKind::kAllReduce, 8, 1, false, 1 << 30, 25).latency_us,
              8.4 + 14 * 5.7, 1e-9);
}

TEST(NcclTuning, Ll128NeedsNvlinkInsideTheNode) {
  // NCCL enables LL128 only where the node's GPUs talk over NVLink (ncclTopoTuneModel, typeIntra <= NVB):
  // between LL's small messages and Simple's large ones, 8 GPUs over NVLink take LL128 at some size, over
  // PCIe never.
  int nvlink_ll128 = 0;
  for (std::int64_t bytes = 1 << 10; bytes <= std::int64_t{1} << 30; bytes *= 2) {
    nvlink_ll128 +=
        nccl_collective(CollectiveKind::kAllReduce, 8, 1, true, bytes, 450).protocol == NcclProtocol::kLL128;
    EXPECT_NE(nccl_collective(CollectiveKind::kAllReduce, 8, 1, false, bytes, 25).protocol,
              NcclProtocol::kLL128)
        << bytes;
  }
  EXPECT_GT(nvlink_ll128, 0);
}

TEST(NcclTuning, TheJobChoosesHowCollectivesPayLatency) {
  EXPECT_EQ(parse_collective_latency("steps"), CollectiveLatency::kSteps);
  EXPECT_EQ(testing::error_of([] { parse_collective_latency("fast"); }),
            "unknown collective latency 'fast'; valid: nccl, steps, none");
  // Llama-3-8B's TP collectives over two HGX B200 nodes (tp 16): NCCL's latency (70 us an all-gather), the
  // profile's per-step latency (15 steps at 5 us: 75 us), or none.
  JobOptions j = testing::job("llama3-8b", "b200-sxm-8x", 1, 16, 1, 2);
  j.seq = 2048;
  auto step = [&](const char* mode) {
    j.collective_latency = mode;
    return testing::step_ns(testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b"))));
  };
  const Duration nccl = step("nccl"), steps = step("steps"), none = step("none");
  EXPECT_LT(nccl, steps);
  EXPECT_GT(nccl, none);
  j.collective_latency = "fast";
  EXPECT_NE(
      testing::error_of([&] { make_schedule_input(j, find_schedule("1f1b")); }).find("collective_latency"),
      std::string::npos);
}

TEST(NcclTuning, AJobsGroupsShareANetworkMeasuredByNodeCount) {
  // h100-p5-8x measured its network's bus bandwidth by node count (Ultra-Scale Playbook): the NICs run more
  // slowly as more nodes send. A tp 16 group spans 2 nodes; in a 64-node job the other 31 groups send at the
  // same time, so its all-gather's bytes take the 64-node rate: the same algorithm, protocol and latency,
  // its wire factor scaled by the 2-node over the 64-node NIC rate.
  const HardwareProfile p5 = load_hardware_profile("h100-p5-8x");
  const auto kind = CollectiveKind::kAllGather;
  const std::int64_t bytes = 2 << 20;
  const NcclCollective alone = nccl_timing(p5, kind, 16, 2, bytes);
  const NcclCollective shared = nccl_timing(p5, kind, 16, 2, bytes, 64);
  EXPECT_EQ(shared.algorithm, alone.algorithm);
  EXPECT_EQ(shared.protocol, alone.protocol);
  EXPECT_DOUBLE_EQ(shared.latency_us, alone.latency_us);
  const double slower = network_nic_GBps(p5, kind, 2) / network_nic_GBps(p5, kind, 64);
  EXPECT_GT(slower, 4.0);
  EXPECT_NEAR(shared.wire_factor, alone.wire_factor * slower, 1e-9 * shared.wire_factor);
  // Fewer sharing nodes than the group spans: the group's own count; a network measured by its datasheet
  // alone (h100-sxm-8x) runs at its NICs' rate whoever shares it.
  EXPECT_DOUBLE_EQ(nccl_timing(p5, kind, 16, 2, bytes, 1).wire_factor, alone.wire_factor);
  const HardwareProfile sxm = load_hardware_profile("h100-sxm-8x");
  EXPECT_DOUBLE_EQ(nccl_timing(sxm, kind, 16, 2, bytes, 64).wire_factor,
                   nccl_timing(sxm, kind, 16, 2, bytes).wire_factor);

  // The job: Llama-3-8B at tp 16 on 8 nodes of p5 (dp 4): its TP collectives take the 8-node rate, slower
  // than alone; `network_sharing` "alone" prices each group on its own 2 nodes; an unknown mode is refused.
  JobOptions j = testing::job("llama3-8b", "h100-p5-8x", 1, 16, 4, 4);
  j.seq = 2048;
  auto step = [&](const char* mode) {
    j.network_sharing = mode;
    return testing::step_ns(testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b"))));
  };
  EXPECT_GT(step("job"), step("alone"));
  j.dp = 1;  // the job is the group: nothing else shares the network
  EXPECT_EQ(step("job"), step("alone"));
  j.network_sharing = "crowded";
  EXPECT_NE(testing::error_of([&] { make_schedule_input(j, find_schedule("1f1b")); }).find("network_sharing"),
            std::string::npos);
}

}  // namespace
}  // namespace pipesim::sim
