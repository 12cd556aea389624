#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "hardware/flow_network.hpp"
#include "hardware/topology.hpp"
#include "pipesim/sim/hardware/hardware.hpp"

namespace pipesim::sim {
namespace {

TEST(FlowNetwork, MaxMinFairnessWorkedExample) {
  // Links: L0 = 10, L1 = 4, L2 = 10 bytes/ns. Flows: A over L0+L1, B over L1, C over L0+L2, D over L2.
  // L1 is the tightest (4/2): A = B = 2. Then L2 (10/2 = 5 < L0's 8 left for C): C = D = 5. L0 carries 7
  // of 10.
  FlowNetwork net({10, 4, 10});
  FlowId a = net.add({0, 1}, 1e6, 0, 0);
  FlowId b = net.add({1}, 1e6, 0, 0);
  FlowId c = net.add({0, 2}, 1e6, 0, 0);
  FlowId d = net.add({2}, 1e6, 0, 0);
  EXPECT_DOUBLE_EQ(net.rate(a), 2);
  EXPECT_DOUBLE_EQ(net.rate(b), 2);
  EXPECT_DOUBLE_EQ(net.rate(c), 5);
  EXPECT_DOUBLE_EQ(net.rate(d), 5);
  // When D ends, C is limited by L0 (10 - 2 = 8), not L2.
  net.remove(d, 100);
  EXPECT_DOUBLE_EQ(net.rate(c), 8);
  EXPECT_DOUBLE_EQ(net.rate(a), 2);
  // C moved 5 bytes/ns for 100 ns.
  EXPECT_DOUBLE_EQ(net.remaining(c), 1e6 - 500);
  // A per-flow cap (a size-dependent copy rate) binds before the links do.
  FlowId e = net.add({2}, 1e6, 1.5, 100);
  EXPECT_DOUBLE_EQ(net.rate(e), 1.5);
  EXPECT_DOUBLE_EQ(net.rate(c), 8);
}

TEST(FlowNetwork, AFlowAloneOnItsLinksGetsTheTightestLinkOrItsCap) {
  FlowNetwork net({10, 4, 10});
  FlowId a = net.add({0, 1}, 1e6, 0, 0);
  EXPECT_DOUBLE_EQ(net.rate(a), 4);  // L1 binds
  FlowId b = net.add({2}, 1e6, 3, 0);
  EXPECT_DOUBLE_EQ(net.rate(b), 3);  // its cap binds
  FlowId none = net.add(std::span<const std::int32_t>{}, 1e6, 0, 0);
  EXPECT_DOUBLE_EQ(net.rate(none), 0);  // over no link at all: no rate, as progressive filling gives it
  // A path that crosses one link twice counts twice there, as in the filling: half of L0, even when the
  // links of a flow removed at the same time join its group.
  FlowNetwork twice({10, 4});
  FlowId r = twice.add({0, 1}, 1e6, 0, 0);
  FlowId f = twice.add({0, 0}, 1e6, 0, 0);
  twice.remove(r, 10);
  EXPECT_DOUBLE_EQ(twice.rate(f), 5);
}

TEST(FlowNetwork, BatchedChangesGiveTheSameRatesWithOneRecomputationPerGroup) {
  // The worked example's flows started at one instant, plus an independent group on links 3 and 4.
  FlowNetwork net({10, 4, 10, 6, 6});
  net.set_batching(true);
  FlowId a = net.add({0, 1}, 1e6, 0, 0), b = net.add({1}, 1e6, 0, 0), c = net.add({0, 2}, 1e6, 0, 0),
         d = net.add({2}, 1e6, 0, 0), e = net.add({3, 4}, 1e6, 0, 0), f = net.add({4}, 1e6, 0, 0);
  EXPECT_TRUE(net.changed().empty());  // nothing recomputed yet
  EXPECT_DOUBLE_EQ(net.rate(a), 0);
  net.flush(0);
  EXPECT_EQ(net.changed(), (std::vector<FlowId>{a, b, c, d, e, f}));
  EXPECT_DOUBLE_EQ(net.rate(a), 2);
  EXPECT_DOUBLE_EQ(net.rate(b), 2);
  EXPECT_DOUBLE_EQ(net.rate(c), 5);
  EXPECT_DOUBLE_EQ(net.rate(d), 5);
  EXPECT_DOUBLE_EQ(net.rate(e), 3);
  EXPECT_DOUBLE_EQ(net.rate(f), 3);
  // D and F end at the same instant: each group is recomputed once, as if they had ended one by one.
  net.remove(d, 100);
  net.remove(f, 100);
  EXPECT_TRUE(net.has_pending());
  net.flush(100);
  EXPECT_EQ(net.changed(), (std::vector<FlowId>{a, b, c, e}));
  EXPECT_DOUBLE_EQ(net.rate(c), 8);
  EXPECT_DOUBLE_EQ(net.rate(e), 6);
  EXPECT_DOUBLE_EQ(net.remaining(c), 1e6 - 500);
  EXPECT_FALSE(net.has_pending());
}

TEST(FlowNetwork, BatchedInstantsGiveTheRatesOfOneChangeAtATime) {
  // Flows start and end in bursts at shared instants, on paths of one to three of six links (a link twice
  // now and then), some capped, some in the background. After each instant's flush every flow in flight has
  // the rate and the bytes left that recomputing after each change gives: a flush seeds its groups from the
  // flows started and the links left, in any order.
  const std::vector<double> capacity{10, 4, 10, 6, 25, 1};
  FlowNetwork batched(capacity), one_by_one(capacity);
  batched.set_batching(true);
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::vector<FlowId> live;  // the same ids in both: they reuse freed ids alike
  for (TimePoint now = 0; now < 4000; now += 1 + pick(50)) {
    for (int k = pick(3); k > 0 && !live.empty(); --k) {
      const auto at = static_cast<std::size_t>(pick(static_cast<int>(live.size())));
      batched.remove(live[at], now);
      one_by_one.remove(live[at], now);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
    }
    for (int k = pick(4); k > 0; --k) {
      PathLinks path;
      for (int l = 1 + pick(3); l > 0; --l) path.push_back(pick(6));
      const double bytes = 1e3 * (1 + pick(100)), cap = pick(4) == 0 ? 0.5 + pick(8) : 0;
      const std::int32_t priority = pick(5) == 0 ? 1 : 0;
      const FlowId f = batched.add(path, bytes, cap, now, priority);
      ASSERT_EQ(f, one_by_one.add(path, bytes, cap, now, priority));
      live.push_back(f);
    }
    batched.flush(now);
    EXPECT_FALSE(batched.has_pending());
    for (FlowId f : live) {
      EXPECT_EQ(batched.rate(f), one_by_one.rate(f)) << "flow " << f << " at " << now;
      EXPECT_EQ(batched.remaining(f), one_by_one.remaining(f)) << "flow " << f << " at " << now;
    }
  }
  EXPECT_GT(live.size(), 3u);
}

TEST(FlowNetwork, BackgroundFlowsUseWhatForegroundLeaves) {
  // One 10 B/ns link: an activation upload (foreground) and a weight chunk (background) at once.
  FlowNetwork net({10, 4});
  FlowId weights = net.add({0}, 1e6, 0, 0, 1);
  EXPECT_DOUBLE_EQ(net.rate(weights), 10);  // alone, background takes the whole link
  FlowId act = net.add({0}, 1e3, 0, 0, 0);
  EXPECT_DOUBLE_EQ(net.rate(act), 10);  // the activation is not slowed down by the prefetch
  EXPECT_DOUBLE_EQ(net.rate(weights), 0);
  FlowId capped = net.add({0, 1}, 1e3, 0, 0, 0);  // a foreground flow limited elsewhere leaves room
  EXPECT_DOUBLE_EQ(net.rate(capped), 4);
  EXPECT_DOUBLE_EQ(net.rate(act), 6);
  EXPECT_DOUBLE_EQ(net.rate(weights), 0);
  net.remove(act, 100);
  EXPECT_DOUBLE_EQ(net.rate(weights), 6);
}

TEST(FlowNetwork, FinishTimeRoundsUp) {
  FlowNetwork net({3});
  FlowId f = net.add({0}, 10, 0, 7);
  EXPECT_EQ(net.finish_time(f), 7 + 4);  // 10 / 3 = 3.33 ns -> 4
}

/// rtx4090-8x's GPUs two to a PCIe switch, as 8-GPU servers with switches hold them.
HardwareProfile four_switches() {
  HardwareProfile hw = load_hardware_profile("rtx4090-8x");
  hw.node.pcie.switches = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  return hw;
}

TEST(FlowNetwork, SharedPcieUplinkOnRtx4090Server) {
  // RTX 4090s under four PCIe switches: GPUs {0,1} share one switch uplink (25 GB/s), GPU 2 sits under
  // another switch.
  const HardwareProfile hw = four_switches();
  Topology topo(hw, 1);
  std::vector<double> cap;
  for (const auto& l : topo.links()) cap.push_back(l.bytes_per_ns);
  FlowNetwork net(cap);
  Path p0 = topo.path({0, -1}, {0, 0}, 1 << 30), p1 = topo.path({0, -1}, {0, 1}, 1 << 30),
       p2 = topo.path({0, -1}, {0, 2}, 1 << 30);
  FlowId f0 = net.add(p0.links, 1e9, 0, 0);
  FlowId f1 = net.add(p1.links, 1e9, 0, 0);
  FlowId f2 = net.add(p2.links, 1e9, 0, 0);
  EXPECT_DOUBLE_EQ(net.rate(f0), 12.5);  // two GPUs halve their shared uplink
  EXPECT_DOUBLE_EQ(net.rate(f1), 12.5);
  EXPECT_DOUBLE_EQ(net.rate(f2), 25.0);  // alone under its switch
  // The opposite direction is a separate capacity: a D2H from GPU 0 runs at full lane speed.
  Path up = topo.path({0, 0}, {0, -1}, 1 << 30);
  FlowId g = net.add(up.links, 1e9, 0, 0);
  EXPECT_DOUBLE_EQ(net.rate(g), 25.0);
  EXPECT_DOUBLE_EQ(net.rate(f0), 12.5);
  // GPU-to-GPU across switches without NVLink crosses both uplinks and the root complex.
  Path peer = topo.path({0, 1}, {0, 2}, 1 << 20);
  EXPECT_EQ(peer.links.size(), 6u);
  EXPECT_TRUE(topo.links()[static_cast<std::size_t>(peer.links[1])].shared);
  EXPECT_EQ(topo.link_name(peer.links[2]), "node0.pcie_root.up");
  EXPECT_EQ(topo.path({0, -1}, {0, 0}, 1).links.size(), 3u);
}

TEST(FlowNetwork, RootComplexCapsAllGpusCopyingAtOnce) {
  // A measured root complex of 60 GB/s: four GPUs under four switches, each alone at 25 GB/s, share it.
  HardwareProfile hw = four_switches();
  hw.node.pcie.root_complex_GBps = 60;
  Topology topo(hw, 1);
  std::vector<double> cap;
  for (const auto& l : topo.links()) cap.push_back(l.bytes_per_ns);
  FlowNetwork net(cap);
  std::vector<FlowId> f;
  for (int g : {0, 2, 4, 6}) f.push_back(net.add(topo.path({0, -1}, {0, g}, 1 << 30).links, 1e9, 0, 0));
  for (FlowId x : f) EXPECT_DOUBLE_EQ(net.rate(x), 15.0);
  // Unset, it never binds: the uplinks do.
  const HardwareProfile plain = four_switches();
  Topology open(plain, 1);
  EXPECT_DOUBLE_EQ(
      open.links()[static_cast<std::size_t>(open.path({0, -1}, {0, 0}, 1).links[0])].bytes_per_ns, 100.0);
}

}  // namespace
}  // namespace pipesim::sim
