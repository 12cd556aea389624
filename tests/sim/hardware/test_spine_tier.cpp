// A rail-optimised network of leaves joined by a spine: traffic between leaves crosses two more switches and,
// where the leaves are oversubscribed, their uplinks, which the nodes of a leaf share. Hand-computed on H100
// nodes (50 GB/s a NIC, 5 us a hop through the leaf).
#include <cmath>
#include <memory>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "hardware/flow_network.hpp"
#include "hardware/topology.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/job/job.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

/// h100-sxm-8x with `leaf_nodes` nodes a leaf, oversubscribed `ratio` : 1 towards the spine.
HardwareProfile tiered(std::int32_t leaf_nodes, double ratio) {
  nlohmann::json p = nlohmann::json::parse(
      detail::read_text_file(std::string(PIPESIM_SOURCE_DIR) + "/hw_profiles/h100-sxm-8x.json"));
  auto& net = p["network"];
  net["leaf_nodes"] = leaf_nodes;
  net["oversubscription"] = ratio;
  net["switch_latency_us"] = 0.5;
  net["sources"]["leaf_nodes"] = "test";
  net["sources"]["oversubscription"] = "test";
  net["sources"]["switch_latency_us"] = "test";
  return parse_hardware_profile(p.dump(), "tiered.json");
}

double capacity(const Topology& t, LinkId l) {
  return t.links()[static_cast<std::size_t>(l)].bytes_per_ns;
}

TEST(SpineTier, TrafficBetweenLeavesCrossesTheSpineAndItsOversubscribedUplinks) {
  // Two nodes a leaf, 4 : 1 oversubscribed: a leaf's uplink for one rail carries 2 x 50 / 4 = 25 GB/s.
  const HardwareProfile hw = tiered(2, 4);
  Topology t(hw, 4);
  Path near = t.path({0, 3}, {1, 3}, 1 << 20);  // the same leaf: NICs only, one hop
  ASSERT_EQ(near.links.size(), 2u);
  EXPECT_EQ(near.latency, 5000);
  Path far = t.path({1, 3}, {2, 3}, 1 << 20);  // leaf 0 to leaf 1: up to the spine and down, 2 x 0.5 us more
  ASSERT_EQ(far.links.size(), 4u);
  EXPECT_EQ(t.link_name(far.links[2]), "leaf0.rail3.spine.up");
  EXPECT_EQ(t.link_name(far.links[3]), "leaf1.rail3.spine.down");
  EXPECT_EQ(far.latency, 6000);
  EXPECT_DOUBLE_EQ(capacity(t, far.links[2]), 25.0);

  // One flow across: the uplink (25) binds below the NIC (50). Both nodes of leaf 0 sending across on rail 3:
  // 12.5 GB/s each. A 100 MB transfer then takes 4 ms and 8 ms.
  std::vector<double> caps;
  for (const Link& l : t.links()) caps.push_back(l.bytes_per_ns);
  FlowNetwork net(caps);
  const double bytes = 1e8;
  FlowId a = net.add(std::span<const LinkId>(far.links.begin(), far.links.size()), bytes, 0, 0);
  EXPECT_DOUBLE_EQ(net.rate(a), 25.0);
  EXPECT_DOUBLE_EQ(bytes / net.rate(a), 4e6);
  Path other = t.path({0, 3}, {3, 3}, 1 << 20);
  FlowId b = net.add(std::span<const LinkId>(other.links.begin(), other.links.size()), bytes, 0, 0);
  EXPECT_DOUBLE_EQ(net.rate(a), 12.5);
  EXPECT_DOUBLE_EQ(net.rate(b), 12.5);
  EXPECT_DOUBLE_EQ(bytes / net.rate(b), 8e6);
  // Another rail has an uplink of its own: a flow on rail 5 keeps its 25 GB/s.
  Path rail5 = t.path({0, 5}, {2, 5}, 1 << 20);
  FlowId c = net.add(std::span<const LinkId>(rail5.links.begin(), rail5.links.size()), bytes, 0, 0);
  EXPECT_DOUBLE_EQ(net.rate(c), 25.0);

  // A ring member whose neighbour is under the other leaf crosses its own leaf's uplink and the other's
  // downlink; its neighbour under its own leaf, neither.
  Path ring = t.ring_path({1, 3}, {2, 3}, 1 << 20);
  ASSERT_EQ(ring.links.size(), 4u);
  EXPECT_EQ(t.link_name(ring.links[0]), "node1.gpu3.nic.tx");
  EXPECT_EQ(t.link_name(ring.links[2]), "leaf0.rail3.spine.up");
  EXPECT_EQ(t.link_name(ring.links[3]), "leaf1.rail3.spine.down");
  EXPECT_EQ(t.ring_path({0, 3}, {1, 3}, 1 << 20).links.size(), 2u);
}

TEST(SpineTier, ANonBlockingSpineAddsOnlyItsSwitchesLatency) {
  const HardwareProfile hw = tiered(2, 1);
  Topology t(hw, 4);
  Topology flat(load_hardware_profile("h100-sxm-8x"), 4);
  EXPECT_EQ(t.links().size(), flat.links().size());  // no uplinks: at 1 : 1 they cannot bind
  Path far = t.path({1, 3}, {2, 3}, 1 << 20);
  EXPECT_EQ(far.links.size(), 2u);
  EXPECT_EQ(far.latency, 6000);
  // On fewer nodes than a leaf holds no traffic leaves it.
  EXPECT_EQ(Topology(tiered(8, 4), 4).links().size(), flat.links().size());
}

TEST(SpineTier, AnOversubscribedSpineSlowsTheDataParallelRingThatCrossesIt) {
  // Qwen3-1.7B, tp 8 in each node and dp 4 over 4 nodes, two nodes a leaf. The gradient all-reduce's ring
  // on each rail crosses from leaf 0 to leaf 1 once and back once: at 4 : 1 each crossing gets 25 GB/s, half
  // the NIC, and the whole ring waits for it; at 1 : 1 it runs at the NIC's 50 GB/s. The gradient
  // all-reduces take twice as long (their fixed latencies aside).
  JobOptions j = testing::job("qwen3-1.7b", "", 1, 8, 4, 4);
  j.seq = 1024;
  j.explicit_replicas = true;
  const auto all_reduce_ns = [&](double ratio) {
    j.loaded_hw = std::make_shared<const HardwareProfile>(tiered(2, ratio));
    const Plan plan = testing::plan_of("1f1b", j);
    const Timeline tl = Engine{}.run(plan);
    Duration sum = 0, latency = 0;
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
      const auto* w = std::get_if<TransferWork>(&plan.ops[i].payload);
      const Device& src = plan.devices[static_cast<std::size_t>(w ? w->src : 0)];
      const Device& dst = plan.devices[static_cast<std::size_t>(w ? w->dst : 0)];
      if (w == nullptr || plan.ops[i].kind != OpKind::kAllReduce || src.node == dst.node || src.node != 1)
        continue;
      sum += tl.end[i] - tl.start[i];
      latency += std::max<Duration>(0, w->latency_ns);
    }
    return std::pair{sum, latency};
  };
  const auto [blocking, blocking_latency] = all_reduce_ns(4);
  const auto [free, free_latency] = all_reduce_ns(1);
  ASSERT_GT(free, 0);
  EXPECT_EQ(blocking_latency, free_latency);
  const double ratio =
      static_cast<double>(blocking - blocking_latency) / static_cast<double>(free - free_latency);
  EXPECT_NEAR(ratio, 2.0, 0.02);
}

TEST(SpineTier, BadTiersNameTheirPath) {
  nlohmann::json p = nlohmann::json::parse(
      detail::read_text_file(std::string(PIPESIM_SOURCE_DIR) + "/hw_profiles/h100-sxm-8x.json"));
  p["network"].erase("leaf_nodes");
  p["network"]["sources"].erase("leaf_nodes");
  p["network"]["oversubscription"] = 2;
  p["network"]["sources"]["oversubscription"] = "test";
  EXPECT_NE(
      testing::error_of([&] { parse_hardware_profile(p.dump(), "hw.json"); }).find("/network/leaf_nodes"),
      std::string::npos);
  p["network"]["leaf_nodes"] = 32;
  p["network"]["sources"]["leaf_nodes"] = "test";
  p["network"]["oversubscription"] = 0.5;
  EXPECT_NE(testing::error_of([&] {
              parse_hardware_profile(p.dump(), "hw.json");
            }).find("/network/oversubscription"),
            std::string::npos);
  // Written back as read.
  p["network"]["oversubscription"] = 2;
  const HardwareProfile hw = parse_hardware_profile(p.dump(), "hw.json");
  const HardwareProfile again = parse_hardware_profile(hardware_profile_to_json(hw), "again.json");
  EXPECT_EQ(again.network.leaf_nodes, 32);
  EXPECT_DOUBLE_EQ(again.network.oversubscription, 2);
}

}  // namespace
}  // namespace pipesim::sim
