// NVLink domains larger than a node (GB200 NVL72: 18 trays of 4 GPUs) and a CPU-GPU link other than PCIe
// (NVLink-C2C to the Grace CPUs), against the same traffic on HGX B200 nodes joined by the network.
#include <cmath>

#include <gtest/gtest.h>

#include "hardware/flow_network.hpp"
#include "hardware/topology.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/hardware/nccl_tuning.hpp"
#include "pipesim/sim/job/job.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

TEST(NvlinkDomain, TrafficBetweenTraysOfOneRackTakesNvlinkAndLeavesItForTheNetwork) {
  const HardwareProfile gb = load_hardware_profile("gb200-nvl72");
  ASSERT_EQ(gb.node.gpus, 4);
  ASSERT_EQ(gb.node.nvlink.domain_nodes, 18);
  Topology rack(gb, 36);  // two racks
  // Tray 0 to tray 17: the same rack, NVLink ports at 900 GB/s per direction.
  Path in = rack.path({0, 3}, {17, 0}, 1 << 20);
  ASSERT_EQ(in.links.size(), 2u);
  EXPECT_EQ(rack.link_name(in.links[0]), "node0.gpu3.nvlink.tx");
  EXPECT_EQ(rack.link_name(in.links[1]), "node17.gpu0.nvlink.rx");
  EXPECT_EQ(in.latency, gb.node.nvlink.latency);
  // Tray 17 to tray 18: the next rack, over the NICs.
  Path out = rack.path({17, 3}, {18, 0}, 1 << 20);
  EXPECT_EQ(rack.link_name(out.links[0]), "node17.gpu3.nic.tx");
  EXPECT_EQ(out.latency, gb.network.latency);

  // A ring member whose neighbour sits on the next tray: its own NVLink ports, capped by the measured bus
  // bandwidth at the message size (593.53 GB/s at 256 MiB, nccl-tests on a GB200 tray). 2(n-1)/n of a
  // 256 MiB all-reduce over 8 GPUs is 469,762,048 bytes: ceil(469762048 / 593.53) = 791,472 ns, plus
  // 2(n-1) = 14 steps of 3 us.
  const std::int64_t message = 268435456, bus = 2 * 7 * message / 8;
  Path ring = rack.ring_path({0, 3}, {1, 0}, bus, message);
  EXPECT_EQ(rack.link_name(ring.links[0]), "node0.gpu3.nvlink.tx");
  EXPECT_DOUBLE_EQ(ring.max_bytes_per_ns, 593.53);
  EXPECT_EQ(static_cast<std::int64_t>(std::ceil(static_cast<double>(bus) / ring.max_bytes_per_ns)), 791472);
  // The same member on HGX B200 (8 GPUs a node): the next node is only reached over its 50 GB/s NIC,
  // 9,395,241 ns for the same bytes, 12 times longer.
  const HardwareProfile hgx = load_hardware_profile("b200-sxm-8x");
  Topology nodes(hgx, 2);
  Path across = nodes.ring_path({0, 7}, {1, 0}, bus, message);
  EXPECT_EQ(nodes.link_name(across.links[0]), "node0.gpu7.nic.tx");
  const double nic = nodes.links()[static_cast<std::size_t>(across.links[0])].bytes_per_ns;
  EXPECT_DOUBLE_EQ(nic, 50.0);
  EXPECT_EQ(static_cast<std::int64_t>(std::ceil(static_cast<double>(bus) / nic)), 9395241);
}

TEST(NvlinkDomain, TensorParallelismSpansWholeTraysInsideTheDomain) {
  const HardwareProfile gb = load_hardware_profile("gb200-nvl72");
  EXPECT_EQ(gb.tp_domain_gpus(), 72);
  for (int tp : {1, 2, 4, 8, 12, 16, 24, 36, 72, 144}) EXPECT_EQ(gb.tp_placement_error(tp), "") << tp;
  // 16 does not divide the 72 GPUs of the rack: four groups fill 64 of them, the other 8 stay idle, and
  // the fifth group starts on the next rack. 6 splits a tray.
  EXPECT_EQ(gb.tp_domain_used_gpus(16), 64);
  EXPECT_EQ(gb.tp_domain_used_gpus(8), 72);
  EXPECT_EQ(gb.gpu_slot(63, 16), 63);
  EXPECT_EQ(gb.gpu_slot(64, 16), 72);
  EXPECT_EQ(gb.gpu_slot(130, 16), 146);  // third rack (2 x 72), third GPU
  EXPECT_EQ(gb.gpu_slot(130, 8), 130);
  EXPECT_NE(gb.tp_placement_error(6).find("tp 6 must divide the 4 GPUs of a node or span whole nodes"),
            std::string::npos)
      << gb.tp_placement_error(6);
  const HardwareProfile hgx = load_hardware_profile("b200-sxm-8x");
  EXPECT_EQ(hgx.tp_domain_gpus(), 8);
  EXPECT_EQ(hgx.tp_placement_error(16), "");  // two whole nodes, over the network
  EXPECT_EQ(hgx.tp_domain_used_gpus(16), 8);
  EXPECT_EQ(hgx.gpu_slot(15, 16), 15);
  EXPECT_NE(hgx.tp_placement_error(12).find("tp 12 must divide the 8 GPUs of a node or span whole nodes"),
            std::string::npos);
}

/// The first TP all-reduce of llama3-8b with tp 16 (one pipeline, two microbatches) on `hw`: its transfer,
/// its simulated duration, and the plan's note.
struct Tp16 {
  TransferWork w;
  Duration ns = 0;
  std::string note;
  std::int32_t src_node = 0, dst_node = 0;
};
Tp16 tp16(const std::string& hw) {
  JobOptions j = testing::job("llama3-8b", hw, 1, 16, 1, 2);
  j.seq = 2048;
  auto r = testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b")));
  for (std::size_t i = 0; i < r.plan.ops.size(); ++i) {
    const Op& op = r.plan.ops[i];
    if (op.kind != OpKind::kAllReduce) continue;
    Tp16 out{std::get<TransferWork>(op.payload), r.timeline.end[i] - r.timeline.start[i], r.plan.meta.note};
    out.src_node = r.plan.devices[static_cast<std::size_t>(out.w.src)].node;
    out.dst_node = r.plan.devices[static_cast<std::size_t>(out.w.dst)].node;
    return out;
  }
  ADD_FAILURE() << "no TP all-reduce on " << hw;
  return {};
}

TEST(NvlinkDomain, Tp16StaysOnNvlinkInAnNvl72RackAndCrossesTheNetworkOnHgxNodes) {
  // The same job, tp 16: on GB200 NVL72 the group spans four trays of one rack; every ring hop goes through
  // the NVLink switches (900 GB/s ports), capped by the measured bus bandwidth at the message size. On HGX
  // B200 it spans two nodes: NCCL runs the ring as several rings, one leaving through each member's 50 GB/s
  // NIC, so each member's NIC carries 1/8 of its ring bytes (the rest moves over NVLink beside it), with
  // LL128's flags (NCCL's model of such a ring: the eight NICs' 400 GB/s), and every member is priced on that
  // hop.
  const Tp16 gb = tp16("gb200-nvl72"), hgx = tp16("b200-sxm-8x");
  EXPECT_EQ(gb.note, "tp 16 packs 4 groups into each 72-GPU NVLink domain: 8 of its GPUs idle");
  EXPECT_EQ(hgx.note, "tp 16 spans 2 nodes: its collectives cross the network");
  // 2(n-1)/n of each collective's buffer per GPU, 2(n-1) latency steps per collective; over the NICs an
  // eighth of it.
  ASSERT_NEAR(static_cast<double>(hgx.w.bytes), static_cast<double>(gb.w.bytes) / 8 / 0.92, 1.0);
  ASSERT_EQ(gb.w.latency_steps, hgx.w.latency_steps);
  EXPECT_EQ(gb.w.latency_steps % (2 * 15), 0);
  EXPECT_TRUE(load_hardware_profile("gb200-nvl72").nvlink_domain_shared(gb.src_node, gb.dst_node));
  EXPECT_EQ(hgx.src_node, 0);
  EXPECT_EQ(hgx.dst_node, 1);
  const HardwareProfile gbp = load_hardware_profile("gb200-nvl72"),
                        hgxp = load_hardware_profile("b200-sxm-8x");
  const double bus = interpolate_log_x(gbp.node.nvlink.allreduce_busbw_by_size,
                                       static_cast<double>(gb.w.message_bytes));  // GB/s = bytes per ns
  ASSERT_LT(bus, gbp.node.nvlink.GBps_per_direction);
  auto expect = [](const TransferWork& w, double bytes_per_ns) {
    return Duration{w.latency_ns} +
           static_cast<Duration>(std::ceil(static_cast<double>(w.bytes) / bytes_per_ns));
  };
  // In the rack the measured bus bandwidth at the message size holds NCCL's latency already. Across two HGX
  // nodes each of sequence parallelism's all-gathers and reduce-scatters (16 MiB) is NCCL's LL128 ring over
  // 16 GPUs: 14 us of base latency, 14 steps inside the nodes at NVLink's 1.9 us (above the network proxy's
  // 1 us) and one across at 4 us, 44.6 us each and 42.7 us of bytes (Simple's ring: 70 + 39.3 us).
  EXPECT_EQ(gb.w.latency_ns, 0);
  const NcclCollective ag = nccl_collective(CollectiveKind::kAllGather, 16, 2, true, hgx.w.message_bytes,
                                            hgxp.network.nic_GBps),
                       rs = nccl_collective(CollectiveKind::kReduceScatter, 16, 2, true, hgx.w.message_bytes,
                                            hgxp.network.nic_GBps);
  EXPECT_EQ(ag.protocol, NcclProtocol::kLL128);
  EXPECT_NEAR(ag.latency_us, 14 + 14 * 1.9 + 4.0, 1e-9);
  EXPECT_NEAR(rs.latency_us, ag.latency_us, 1e-9);
  EXPECT_GT(hgx.w.latency_ns, 0);
  EXPECT_EQ(hgx.w.latency_ns % 89'200, 0);  // whole pairs of 44.6 us
  EXPECT_EQ(gb.ns, expect(gb.w, bus));
  EXPECT_EQ(hgx.ns, expect(hgx.w, hgxp.network.nic_GBps));
  EXPECT_GT(hgx.ns, gb.ns);
  // Every member is priced on the same hop, so simulating one replica stands for all of them: tp 16 x pp 2
  // x dp 2 (two racks of GB200, eight HGX nodes) takes the same step either way.
  for (const char* hw : {"gb200-nvl72", "b200-sxm-8x"}) {
    JobOptions j = testing::job("llama3-8b", hw, 2, 16, 2, 4);
    j.seq = 1024;
    const Duration sym =
        testing::step_ns(testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b"))));
    j.explicit_replicas = true;
    const Duration exp =
        testing::step_ns(testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b"))));
    EXPECT_EQ(sym, exp) << hw;
  }
}

/// Step and the longest data-parallel gradient all-reduce (the collective stream's; TP all-reduces run on
/// the compute stream and the tp stream) of llama3-8b, tp 4 x dp 2 (two trays), on `hw`.
std::pair<Duration, Duration> tp4_dp2(const HardwareProfile& hw) {
  JobOptions j = testing::job("llama3-8b", "gb200-nvl72", 1, 4, 2, 2);
  j.seq = 2048;
  j.loaded_hw = std::make_shared<const HardwareProfile>(hw);
  auto r = testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b")));
  Duration longest = 0;
  for (std::size_t i = 0; i < r.plan.ops.size(); ++i)
    if (r.plan.ops[i].kind == OpKind::kAllReduce &&
        r.plan.streams[static_cast<std::size_t>(r.plan.ops[i].stream)].name == "collective")
      longest = std::max(longest, r.timeline.end[i] - r.timeline.start[i]);
  return {testing::step_ns(r), longest};
}

TEST(NvlinkDomain, DataParallelGradientsBetweenTraysRideNvlink) {
  // The two TP groups of tp 4 x dp 2 sit on two trays: inside the rack their gradient all-reduce rides
  // NVLink; with every tray its own domain (as if joined by the network) it crosses the 50 GB/s NICs.
  HardwareProfile rack = load_hardware_profile("gb200-nvl72");
  HardwareProfile trays = rack;
  trays.node.nvlink.domain_nodes = 1;
  const auto [rack_step, rack_ar] = tp4_dp2(rack);
  const auto [tray_step, tray_ar] = tp4_dp2(trays);
  EXPECT_GT(rack_ar, 0);
  EXPECT_GT(tray_ar, 5 * rack_ar);  // 50 GB/s NIC against NVLink's bus bandwidth
  EXPECT_LT(rack_step, tray_step);
}

TEST(NvlinkDomain, GraceHostLinkIsNvlinkC2cSharedByItsTwoGpus) {
  const HardwareProfile gb = load_hardware_profile("gb200-nvl72");
  EXPECT_EQ(gb.node.pcie.link, "nvlink-c2c");
  Topology topo(gb, 1);
  std::vector<double> cap;
  for (const auto& l : topo.links()) cap.push_back(l.bytes_per_ns);
  FlowNetwork net(cap);
  // One GPU alone copies at the Grace's 450 GB/s per direction; its neighbour on the same Grace halves it;
  // a GPU on the other Grace keeps its own.
  FlowId a = net.add(topo.path({0, -1}, {0, 0}, 1 << 30).links, 1e9, 0, 0);
  EXPECT_DOUBLE_EQ(net.rate(a), 450.0);
  FlowId b = net.add(topo.path({0, -1}, {0, 1}, 1 << 30).links, 1e9, 0, 0);
  FlowId c = net.add(topo.path({0, -1}, {0, 2}, 1 << 30).links, 1e9, 0, 0);
  EXPECT_DOUBLE_EQ(net.rate(a), 225.0);
  EXPECT_DOUBLE_EQ(net.rate(b), 225.0);
  EXPECT_DOUBLE_EQ(net.rate(c), 450.0);
  // PCIe Gen5 on HGX B200: 55 GB/s for the same lone copy, an eighth of it.
  const HardwareProfile hgx = load_hardware_profile("b200-sxm-8x");
  EXPECT_EQ(hgx.node.pcie.link, "pcie");
  EXPECT_DOUBLE_EQ(hgx.node.pcie.lane_GBps, 55.0);
}

TEST(NvlinkDomain, ProfileChecksTheDomain) {
  HardwareProfile hgx = load_hardware_profile("rtx4090-8x");  // no NVLink
  std::string text = hardware_profile_to_json(hgx);
  text.replace(text.find("\"GBps_per_direction\""), 20, "\"domain_nodes\": 2, \"GBps_per_direction\"");
  const std::string e = testing::error_of([&] { parse_hardware_profile(text, "hw.json"); });
  EXPECT_NE(e.find("hw.json: /node/nvlink/domain_nodes: an NVLink domain of several nodes needs NVLink"),
            std::string::npos)
      << e;
  std::string link = hardware_profile_to_json(load_hardware_profile("gb200-nvl72"));
  link.replace(link.find("\"nvlink-c2c\""), 12, "\"cxl\"");
  const std::string e2 = testing::error_of([&] { parse_hardware_profile(link, "hw.json"); });
  EXPECT_NE(e2.find("unknown host link 'cxl'; valid: pcie, nvlink-c2c"), std::string::npos) << e2;
}

}  // namespace
}  // namespace pipesim::sim
