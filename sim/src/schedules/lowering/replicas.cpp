// Symmetric or explicit replicas: which plans one simulated replica stands for exactly, the twin counts of
// shared host links, and the notes a plan carries about its placement; the entry point of the lowering.
#include "schedules/lowering/builder.hpp"
#include "schedules/order_lowering.hpp"

namespace pipesim::sim {

namespace {

using lowering::Builder;

/// Which shared links (a PCIe switch uplink, the root complex, the NVMe volume, a leaf's uplink to an
/// oversubscribed spine) a symmetric plan's traffic crosses: between GPUs (collectives, pipeline sends; over
/// the spine or not), or between a GPU and its node's host or NVMe.
struct SharedLinkUse {
  bool gpu_traffic = false, host_traffic = false, spine_traffic = false;
};

SharedLinkUse shared_link_use(const Plan& plan) {
  Topology topo(plan.hw, plan.nodes);
  SharedLinkUse use;
  for (const Op& op : plan.ops) {
    const auto* w = std::get_if<TransferWork>(&op.payload);
    if (!w || op.fixed_duration >= 0) continue;
    const auto& a = plan.devices[static_cast<std::size_t>(w->src)];
    const auto& b = plan.devices[static_cast<std::size_t>(w->dst)];
    Path p = is_collective(op.kind) ? topo.ring_path({a.node, a.local_index}, {b.node, b.local_index},
                                                     w->bytes, w->message_bytes)
                                    : topo.path(endpoint_of(a), endpoint_of(b), w->bytes);
    bool shared = false;
    for (LinkId l : p.links) {
      shared = shared || topo.links()[static_cast<std::size_t>(l)].shared;
      const LinkKind kind = topo.describe(l).kind;
      use.spine_traffic = use.spine_traffic || kind == LinkKind::kLeafUp || kind == LinkKind::kLeafDown;
    }
    if (!shared) continue;
    (a.kind == DeviceKind::kGpu && b.kind == DeviceKind::kGpu ? use.gpu_traffic : use.host_traffic) = true;
  }
  return use;
}

/// Whether a collective's ring inside a node can hop over unalike links: a node whose GPU pairs are joined in
/// more than one way (NVLink bridging only some pairs, or peer-to-peer PCIe under several switches) runs a
/// ring as fast as its slowest hop, which the simulated member's own hop need not be. (Rings that leave the
/// node are priced at their network hop in both kinds of plan: Builder::tp_peer and the DP ring offset.)
bool unalike_ring_hops(const Plan& plan) {
  const HardwareProfile& hw = plan.hw;
  auto nvlinked = [&](std::int32_t a, std::int32_t b) {
    return hw.nvlink_group(a) >= 0 && hw.nvlink_group(a) == hw.nvlink_group(b);
  };
  std::vector<std::int32_t> switch_of(static_cast<std::size_t>(hw.node.gpus), 0);
  for (std::size_t s = 0; s < hw.node.pcie.switches.size(); ++s)
    for (int g : hw.node.pcie.switches[s])
      switch_of[static_cast<std::size_t>(g)] = static_cast<std::int32_t>(s);
  std::set<int>
      kinds;  // 0: NVLink, 1: PCIe under one switch, 2: PCIe across switches, 3: through host memory
  for (std::int32_t a = 0; a < hw.node.gpus; ++a)
    for (std::int32_t b = a + 1; b < hw.node.gpus; ++b)
      kinds.insert(nvlinked(a, b)                                                                     ? 0
                   : !hw.node.pcie.peer_to_peer                                                       ? 3
                   : switch_of[static_cast<std::size_t>(a)] == switch_of[static_cast<std::size_t>(b)] ? 1
                                                                                                      : 2);
  if (kinds.size() < 2) return false;
  for (const Op& op : plan.ops) {
    const auto* w = std::get_if<TransferWork>(&op.payload);
    if (!w || !is_collective(op.kind) || w->src == w->dst) continue;
    const Device& a = plan.devices[static_cast<std::size_t>(w->src)];
    const Device& b = plan.devices[static_cast<std::size_t>(w->dst)];
    if (a.kind == DeviceKind::kGpu && b.kind == DeviceKind::kGpu && a.node == b.node) return true;
  }
  return false;
}

/// A symmetric plan's twin counts (PlanMeta::node_twins, switch_twins): the job GPUs that run the same
/// stage as a simulated GPU on its node and under its PCIe switch. They stand in for simulating the other
/// replicas only where every node repeats the pattern of the simulated replica's nodes and every stage has
/// as many GPUs on a node (and under a switch) as every other: none otherwise.
std::optional<std::pair<std::int32_t, std::int32_t>> twin_counts(const ScheduleInput& in) {
  // The patterns below are of tp x pp replicas laid side by side.
  if (in.cp > 1 || in.dp_inside_pp) return std::nullopt;
  const std::int64_t g = in.hw.node.gpus, tp = in.tp, replica = std::int64_t{in.tp} * in.pp;
  const std::int64_t total = replica * in.dp;
  std::int64_t node = 0;
  if (total <= g)
    node = tp * in.dp;  // one node holds every replica
  else if (g % replica == 0 && total % g == 0)
    node = tp * (g / replica);  // whole replicas per node
  else if (replica % g == 0 && g % tp == 0)
    node = tp;  // a replica spans whole nodes, each holding whole TP groups of some of its stages
  else
    return std::nullopt;
  // Under each PCIe switch of the simulated replica's nodes, every stage present must have as many GPUs.
  const auto& switches = in.hw.node.pcie.switches;
  std::int64_t per_switch = 0;
  for (std::int64_t first = 0; first < std::min(total, replica); first += g) {
    for (const auto& sw : switches) {
      std::map<std::int64_t, std::int64_t> count;  // stage -> GPUs under this switch
      for (int local : sw) {
        const std::int64_t rank = first + local;
        if (rank < total) ++count[(rank / tp) % in.pp];
      }
      for (const auto& [stage, n] : count) {
        if (per_switch == 0) per_switch = n;
        if (n != per_switch) return std::nullopt;
      }
    }
  }
  return std::pair{static_cast<std::int32_t>(node),
                   static_cast<std::int32_t>(std::max<std::int64_t>(1, per_switch))};
}

/// True when a node holding a simulated GPU also holds GPUs of replicas that are not simulated.
bool shares_host_with_replicas(const Plan& plan, const ScheduleInput& in) {
  const std::int64_t gpn = in.hw.node.gpus, total = std::int64_t{in.pp} * in.tp * in.cp * in.dp;
  std::vector<std::int64_t> simulated(static_cast<std::size_t>(plan.nodes), 0);
  std::vector<char> has_stream(plan.devices.size(), 0);
  for (const auto& s : plan.streams) has_stream[static_cast<std::size_t>(s.device)] = 1;
  for (std::size_t d = 0; d < plan.devices.size(); ++d)
    if (plan.devices[d].kind == DeviceKind::kGpu && has_stream[d])
      ++simulated[static_cast<std::size_t>(plan.devices[d].node)];
  for (std::size_t n = 0; n < simulated.size(); ++n) {
    if (simulated[n] == 0) continue;
    const std::int64_t on_node = std::min(gpn, total - static_cast<std::int64_t>(n) * gpn);
    if (on_node > simulated[n]) return true;
  }
  return false;
}

/// Says so in the plan when TP groups leave GPUs of each NVLink domain idle or cross the network, and when
/// the ranks are not in the default order.
void note_placement(Plan& plan, const ScheduleInput& in) {
  const int domain = in.hw.tp_domain_gpus(), used = in.hw.tp_domain_used_gpus(in.tp);
  std::string note;
  if (in.tp > domain)
    note = fmt::format("tp {} spans {} {}: its collectives cross the network", in.tp, in.tp / domain,
                       domain == in.hw.node.gpus ? "nodes" : "NVLink domains");
  else if (used != domain)
    note = fmt::format("tp {} packs {} groups into each {}-GPU NVLink domain: {} of its GPUs idle", in.tp,
                       used / in.tp, domain, domain - used);
  if (in.dp_inside_pp) note += std::string(note.empty() ? "" : "; ") + "ranks ordered tp, cp, dp, pp";
  if (note.empty()) return;
  plan.meta.note = plan.meta.note.empty() ? note : plan.meta.note + "; " + note;
}

Plan lower_layout(const ScheduleDescriptor& schedule, const ScheduleInput& input) {
  if (input.explicit_replicas || input.tp * input.cp * input.dp == 1)
    return Builder(schedule, input).build(input.explicit_replicas);
  Plan plan = Builder(schedule, input).build(false);
  const SharedLinkUse use = shared_link_use(plan);
  if (use.gpu_traffic) {
    // Identical replicas would contend on shared PCIe uplinks or the root complex: simulating one would hide
    // that contention.
    plan = Builder(schedule, input).build(true);
    plan.meta.note =
        use.spine_traffic
            ? "replicas share the leaves' uplinks to an oversubscribed spine; simulated explicitly "
              "instead of symmetric"
            : "replicas share PCIe switch uplinks or the root complex; simulated explicitly instead of "
              "symmetric";
  } else if (unalike_ring_hops(plan)) {
    plan = Builder(schedule, input).build(true);
    plan.meta.note =
        "a node's GPU pairs are linked unalike (NVLink bridges or PCIe switches); rings simulated explicitly";
  } else if (use.host_traffic || ((input.sharding.offload_optimizer || input.sharding.offload_params) &&
                                  shares_host_with_replicas(plan, input))) {
    // The GPUs of a node share its root complex, NVMe volume and host memory (and a switch its uplink).
    // Where they run the simulated GPUs' stages in step, each takes an equal share: the plan says how many
    // share, and the engine divides those links and counts host memory that many times.
    if (const auto twins = twin_counts(input)) {
      plan.meta.node_twins = twins->first;
      plan.meta.switch_twins = twins->second;
    } else {
      plan = Builder(schedule, input).build(true);
      plan.meta.note =
          "replicas share host CPUs, memory and drives for the offloaded state; simulated explicitly";
    }
  }
  return plan;
}

}  // namespace

Plan lower_order_based(const ScheduleDescriptor& schedule, const ScheduleInput& input) {
  Plan plan = lower_layout(schedule, input);
  note_placement(plan, input);
  return plan;
}

}  // namespace pipesim::sim
