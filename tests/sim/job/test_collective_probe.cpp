// A collective alone, timed as plans time theirs (`pipesim collectives`), against hand-computed times: NCCL's
// latency for the algorithm and protocol it picks plus the ring's bytes over the binding link, inside a node
// over host memory, across nodes on one and on several rails, as a tree at a small message, and across an
// oversubscribed spine.
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/hardware/nccl_tuning.hpp"
#include "pipesim/sim/job/collective_probe.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

nlohmann::json profile_json(const std::string& name) {
  return nlohmann::json::parse(
      detail::read_text_file(std::string(PIPESIM_SOURCE_DIR) + "/hw_profiles/" + name + ".json"));
}

/// ns of `bytes` at `GBps` (1 GB/s = 1 byte/ns).
double wire_ns(double bytes, double GBps) {
  return bytes / GBps;
}

TEST(CollectiveProbe, StagedThroughHostMemoryEachGpuGetsTheMeasuredBusBandwidth) {
  // Eight RTX 4090s without peer-to-peer: a 128 MiB all-reduce is a Simple ring (LL128 needs NVLink), NCCL's
  // 8.4 us + 14 steps x 5.7 us over PCIe, each GPU's 2 x 7/8 of the buffer at the measured 15.04 GB/s.
  const HardwareProfile hw = load_hardware_profile("rtx4090-8x");
  const CollectiveProbe p = probe_collective(hw, CollectiveKind::kAllReduce, 8, 1, 128 * kMiB);
  EXPECT_EQ(p.nccl.algorithm, NcclAlgorithm::kRing);
  EXPECT_EQ(p.nccl.protocol, NcclProtocol::kSimple);
  const double expected = (8.4 + 14 * 5.7) * 1e3 + wire_ns(2.0 * 7 / 8 * 128 * kMiB, 15.04);
  EXPECT_NEAR(static_cast<double>(p.time), expected, 2.0);
  EXPECT_NEAR(p.busbw_GBps, 2.0 * 7 / 8 * 128 * kMiB / expected, 1e-3);
}

TEST(CollectiveProbe, WithoutAMeasurementHostMemoryBoundsTheStagedRing) {
  // The same node without its measured figure: every byte is written to and read from host memory, eight
  // GPUs at once: 300 GB/s / 16 = 18.75 GB/s each. Four GPUs of the node share it as eight would (every GPU
  // of the node stages at once in a training job).
  nlohmann::json j = profile_json("rtx4090-8x");
  j["node"]["pcie"].erase("staged_busbw_GBps");
  j["node"]["pcie"]["sources"].erase("staged_busbw_GBps");
  const HardwareProfile hw = parse_hardware_profile(j.dump(), "no-measurement.json");
  EXPECT_DOUBLE_EQ(hw.staged_GBps(8), 18.75);
  const CollectiveProbe p = probe_collective(hw, CollectiveKind::kAllReduce, 8, 1, 128 * kMiB);
  EXPECT_NEAR(static_cast<double>(p.time), (8.4 + 14 * 5.7) * 1e3 + wire_ns(2.0 * 7 / 8 * 128 * kMiB, 18.75),
              2.0);
  // A point-to-point copy between two GPUs crosses host memory twice, alone: 150 GB/s, above its PCIe lane.
  EXPECT_DOUBLE_EQ(hw.staged_GBps(1), 150.0);
  // A measured figure is refused where GPUs do have peer-to-peer.
  j["node"]["pcie"]["peer_to_peer"] = true;
  j["node"]["pcie"]["staged_busbw_GBps"] = 15;
  j["node"]["pcie"]["sources"]["staged_busbw_GBps"] = "test";
  EXPECT_NE(testing::error_of([&] {
              parse_hardware_profile(j.dump(), "p2p.json");
            }).find("/node/pcie/staged_busbw_GBps"),
            std::string::npos);
}

TEST(CollectiveProbe, AcrossNodesEachRailCarriesItsShareOfTheRing) {
  // Four HGX H100 nodes, 512 MiB all-reduce: NVLS-tree, NCCL's latency 25 us + 2 x log2(4) x 20.9 us where a
  // Simple ring's is 8.4 + 56 steps inside the nodes at NVLink's 3.4 us + 6 across at 14 us; its bytes at the
  // slower of the node's NVLS all-reduce (444 GB/s at 512 MiB) and its eight NICs (400 GB/s): as a ring's,
  // one leaving through each of the 8 NICs, each carrying 2 x 31/32 / 8 of the buffer at 50 GB/s.
  const HardwareProfile hw = load_hardware_profile("h100-sxm-8x");
  const CollectiveProbe p = probe_collective(hw, CollectiveKind::kAllReduce, 8, 4, 512 * kMiB);
  EXPECT_EQ(p.nccl.algorithm, NcclAlgorithm::kNvlsTree);
  EXPECT_EQ(p.nccl.protocol, NcclProtocol::kSimple);
  EXPECT_NEAR(p.nccl.latency_us, 25 + 2 * 2 * 20.9, 1e-9);
  EXPECT_NEAR(
      nccl_latency_us(CollectiveKind::kAllReduce, NcclAlgorithm::kRing, NcclProtocol::kSimple, 32, 4, true),
      8.4 + 56 * 3.4 + 6 * 14.0, 1e-9);
  EXPECT_DOUBLE_EQ(p.nccl.wire_factor, 1.0);
  EXPECT_NEAR(static_cast<double>(p.time),
              p.nccl.latency_us * 1e3 + wire_ns(2.0 * 31 / 32 * 512 * kMiB / 8, 50.0), 2.0);
  // One GPU a node: one rail, the whole 2 x 3/4 of the buffer through one NIC.
  const CollectiveProbe one = probe_collective(hw, CollectiveKind::kAllReduce, 1, 4, 512 * kMiB);
  EXPECT_NEAR(static_cast<double>(one.time),
              one.nccl.latency_us * 1e3 + wire_ns(2.0 * 3 / 4 * 512 * kMiB, 50.0) * one.nccl.wire_factor,
              2.0);
}

TEST(CollectiveProbe, ASmallAllReduceAcrossNodesIsATree) {
  // 1 MiB over four H100 nodes: a tree with LL128, 14 us + 2 x (7 hops at 1.25 us + 2 levels at 8.5 us)
  // = 65.5 us, sending the whole buffer up and down (32/31 of a ring's bytes) at 0.92 x 120/128 of the ring's
  // rate (the node's eight NICs, 400 GB/s) and at 0.6 of that, NCCL's correction of trees at 1 MiB
  // (ncclTopoGetAlgoTime: treeCorrectionFactor[LL128][log2(1 MiB / 64)]): 10.1 us, 75.6 in all; against LL's
  // tree, 6.8 + 2 x (7 x 0.6 + 2 x 5.0) = 35.2 us and its bytes at 1/3.8 of 92 % and 0.5 of that, 43.3 us.
  const HardwareProfile hw = load_hardware_profile("h100-sxm-8x");
  const CollectiveProbe p = probe_collective(hw, CollectiveKind::kAllReduce, 8, 4, kMiB);
  EXPECT_EQ(p.nccl.algorithm, NcclAlgorithm::kTree);
  EXPECT_EQ(p.nccl.protocol, NcclProtocol::kLL128);
  EXPECT_NEAR(p.nccl.latency_us, 14.0 + 2 * (7 * 1.25 + 2 * 8.5), 1e-9);
  const double wire = 32.0 / 31 / (0.92 * 120 / 128) / 0.6;
  EXPECT_NEAR(p.nccl.wire_factor, wire, 1e-12);
  EXPECT_NEAR(static_cast<double>(p.time),
              p.nccl.latency_us * 1e3 + wire_ns(std::llround(2.0 * 31 / 32 * kMiB / 8 * wire), 50.0), 2.0);
}

TEST(CollectiveProbe, AnOversubscribedSpineSlowsTheRingsThatCrossIt) {
  // Each node its own leaf, 4 : 1 oversubscribed: a rail's uplink carries 50 / 4 = 12.5 GB/s, and the ring
  // leaving every node crosses it.
  nlohmann::json j = profile_json("h100-sxm-8x");
  j["network"]["leaf_nodes"] = 1;
  j["network"]["oversubscription"] = 4;
  j["network"]["sources"]["leaf_nodes"] = "test";
  j["network"]["sources"]["oversubscription"] = "test";
  const HardwareProfile hw = parse_hardware_profile(j.dump(), "oversubscribed.json");
  const CollectiveProbe p = probe_collective(hw, CollectiveKind::kAllReduce, 8, 4, 512 * kMiB);
  EXPECT_NEAR(static_cast<double>(p.time),
              p.nccl.latency_us * 1e3 + wire_ns(2.0 * 31 / 32 * 512 * kMiB / 8, 12.5), 2.0);
}

TEST(CollectiveProbe, InsideAnNvlinkNodeTheMeasuredCurveSetsTheRate) {
  // An HGX H100 node's profile measured NCCL's all-reduce bus bandwidth by size: the ring runs at it, no
  // latency added (the curve holds it), up to the NVLink port's 450 GB/s (the curve's 466 at 1 GiB is NVLink
  // SHARP reducing in the switch, which the ring does not model).
  const HardwareProfile hw = load_hardware_profile("h100-sxm-8x");
  for (std::int64_t bytes : {kMiB, 64 * kMiB, 1024 * kMiB}) {
    const CollectiveProbe p = probe_collective(hw, CollectiveKind::kAllReduce, 8, 1, bytes);
    EXPECT_EQ(p.nccl.latency_us, 0);
    const double bus =
        std::min(hw.node.nvlink.GBps_per_direction,
                 interpolate_log_x(hw.node.nvlink.allreduce_busbw_by_size, static_cast<double>(bytes)));
    EXPECT_NEAR(p.busbw_GBps, bus, bus * 1e-4) << bytes;
  }
  EXPECT_NE(testing::error_of([&] {
              probe_collective(hw, CollectiveKind::kAllGather, 9, 1, kMiB);
            }).find("valid: 1 to the 8"),
            std::string::npos);
}

TEST(CollectiveProbe, ANetworkMeasuredByNodeCountGivesItsBusBandwidthBack) {
  // h100-p5-8x holds the bus bandwidth its cluster measured at 256 MB on 1 to 64 nodes, by kind: pipesim's
  // NICs run at the rate that gives it back at that size (NCCL's latency, with the 75 us the EFA plugin
  // reports added to each network step, counted in), and more slowly than the 50 GB/s of their datasheet as
  // nodes grow.
  const HardwareProfile hw = load_hardware_profile("h100-p5-8x");
  const auto& net = hw.network;
  for (CollectiveKind kind :
       {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter})
    for (const CurvePoint& point : net.busbw_by_nodes[static_cast<std::size_t>(kind)]) {
      const auto nodes = static_cast<std::int32_t>(point.x);
      if (nodes < 2) continue;
      const CollectiveProbe p = probe_collective(hw, kind, 8, nodes, net.busbw_message_bytes);
      if (network_nic_GBps(hw, kind, nodes) < net.nic_GBps)
        EXPECT_NEAR(p.busbw_GBps, point.y, point.y * 1e-3) << static_cast<int>(kind) << " on " << nodes;
      else  // measured faster than the NICs' datasheet 50 GB/s allow: those hold
        EXPECT_LT(p.busbw_GBps, point.y) << static_cast<int>(kind) << " on " << nodes;
    }
  // Four nodes' all-reduce: 160.1 GB/s of 2 x 31/32 x 256 MiB is 3248.6 us. NCCL's own choice (the EFA plugin
  // tunes p5 by regions, which NCCL's model stands for) is LL128's tree: 14 + 2 x (7 x 1.25 + log2(4) x (8.5
  // + the 75 us the plugin reports)) = 365.5 us and the ring's 1,300.2 us of bytes at 400 GB/s, 32/31 of
  // them, at 0.92 x 120/128: 1,921.6 us, against 2,007.7 for LL128's ring and 2,008.8 for NVLS-tree. Its
  // latency leaves the rest for each NIC's eighth of those bytes.
  const double bus = 2.0 * 31 / 32 * 256 * kMiB, measured_us = bus / 160.1e3;
  const double latency_us = 14 + 2 * (7 * 1.25 + 2 * (8.5 + 75.0)), wire = 32.0 / 31 / (0.92 * 120 / 128);
  EXPECT_EQ(net.step_latency(), nullptr);
  EXPECT_NEAR(nccl_latency_us(CollectiveKind::kAllReduce, NcclAlgorithm::kTree, NcclProtocol::kLL128, 32, 4,
                              true, nullptr, net.reported_latency_us),
              latency_us, 1e-9);
  EXPECT_NEAR(network_nic_GBps(hw, CollectiveKind::kAllReduce, 4),
              bus * wire / 8 / ((measured_us - latency_us) * 1e3), 1e-9);
  EXPECT_LT(network_nic_GBps(hw, CollectiveKind::kAllReduce, 64),
            network_nic_GBps(hw, CollectiveKind::kAllReduce, 4));
  // Two nodes' all-reduce measured faster than eight NICs at 50 GB/s give with that latency: the datasheet
  // holds.
  EXPECT_DOUBLE_EQ(network_nic_GBps(hw, CollectiveKind::kAllReduce, 2), net.nic_GBps);
  // On one node the NVLink curve rules, as on any HGX node.
  EXPECT_DOUBLE_EQ(network_nic_GBps(hw, CollectiveKind::kAllReduce, 1), net.nic_GBps);
  // A measurement of no bandwidth is refused with its JSON path.
  nlohmann::json j = profile_json("h100-p5-8x");
  j["network"]["collective_busbw_by_nodes"]["all_reduce"][2]["GBps"] = 0;
  EXPECT_NE(testing::error_of([&] {
              parse_hardware_profile(j.dump(), "p5.json");
            }).find("/network/collective_busbw_by_nodes/all_reduce/2: a measurement needs"),
            std::string::npos);
}

TEST(CollectiveProbe, OneNodesAllGathersRunAtTheRateItsProfileMeasured) {
  // h100-p5-8x measured its cluster's one-node all-gather and reduce-scatter at 256 MB (249.8 and 249.7 GB/s)
  // well below its all-reduce (NVSwitch reduces in the network for all-reduces only): inside a node those
  // kinds run the all-reduce curve's ring with as many times the bytes, and give their measurement back.
  const HardwareProfile hw = load_hardware_profile("h100-p5-8x");
  const std::int64_t bytes = hw.network.busbw_message_bytes;
  const double all_reduce =
      interpolate_log_x(hw.node.nvlink.allreduce_busbw_by_size, static_cast<double>(bytes));
  for (CollectiveKind kind : {CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}) {
    const double measured = hw.network.busbw_by_nodes[static_cast<std::size_t>(kind)][0].y;
    const CollectiveProbe p = probe_collective(hw, kind, 8, 1, bytes);
    EXPECT_NEAR(p.nccl.wire_factor, all_reduce / measured, 1e-12);
    EXPECT_NEAR(p.busbw_GBps, measured, measured * 1e-3) << static_cast<int>(kind);
  }
  // The all-reduce keeps its own curve (423 GB/s there, not the by-node table's 436); a profile without a
  // one-node measurement by kind (h100-sxm-8x) runs every kind at the all-reduce curve's rate.
  EXPECT_NEAR(probe_collective(hw, CollectiveKind::kAllReduce, 8, 1, bytes).busbw_GBps, all_reduce,
              all_reduce * 1e-3);
  const HardwareProfile sxm = load_hardware_profile("h100-sxm-8x");
  EXPECT_DOUBLE_EQ(nccl_timing(sxm, CollectiveKind::kAllGather, 8, 1, bytes).wire_factor, 1.0);
  EXPECT_NEAR(probe_collective(sxm, CollectiveKind::kAllGather, 8, 1, bytes).busbw_GBps,
              probe_collective(sxm, CollectiveKind::kAllReduce, 8, 1, bytes).busbw_GBps, 1.0);
}

}  // namespace
}  // namespace pipesim::sim
