#include "hardware/topology.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/compile.h>
#include <fmt/format.h>

namespace pipesim::sim {

namespace {
// Per-GPU link slots.
constexpr std::int32_t kLaneUp = 0, kLaneDown = 1, kNvlTx = 2, kNvlRx = 3, kNicTx = 4, kNicRx = 5,
                       kGpuLinks = 6;
constexpr std::int32_t kSwUp = 0, kSwDown = 1;
const char* kGpuLinkNames[] = {"pcie.up", "pcie.down", "nvlink.tx", "nvlink.rx", "nic.tx", "nic.rx"};
// A GPU's link slots in LinkKind's order: describe() counts from kPcieUp.
static_assert(static_cast<int>(LinkKind::kPcieUp) + kNvlTx == static_cast<int>(LinkKind::kNvlinkTx) &&
              static_cast<int>(LinkKind::kPcieUp) + kNicRx == static_cast<int>(LinkKind::kNicRx));

}  // namespace

Topology::Topology(const HardwareProfile& hw, std::int32_t nodes, std::int32_t node_twins,
                   std::int32_t switch_twins)
    : hw_(&hw), nodes_(nodes), gpus_(hw.node.gpus) {
  const double node_div = std::max(1, node_twins), switch_div = std::max(1, switch_twins);
  const auto& pcie = hw.node.pcie;
  std::int32_t switches = static_cast<std::int32_t>(pcie.switches.size());
  per_node_ = gpus_ * kGpuLinks + 2 * switches + 4;  // + the root complex and the NVMe volume, each 2 ways
  switch_of_gpu_.assign(static_cast<std::size_t>(gpus_), 0);
  for (std::int32_t s = 0; s < switches; ++s)
    for (int g : pcie.switches[static_cast<std::size_t>(s)]) switch_of_gpu_[static_cast<std::size_t>(g)] = s;
  links_.reserve(static_cast<std::size_t>(per_node_) * static_cast<std::size_t>(nodes));
  for (std::int32_t n = 0; n < nodes; ++n) {
    for (std::int32_t g = 0; g < gpus_; ++g) {
      links_.push_back({pcie.lane_GBps, false});
      links_.push_back({pcie.lane_GBps, false});
      links_.push_back({hw.node.nvlink.GBps_per_direction, false});
      links_.push_back({hw.node.nvlink.GBps_per_direction, false});
      links_.push_back({hw.network.nic_GBps, false});
      links_.push_back({hw.network.nic_GBps, false});
    }
    for (std::int32_t s = 0; s < switches; ++s) {
      bool shared = pcie.switches[static_cast<std::size_t>(s)].size() > 1;
      links_.push_back({pcie.uplink_GBps / switch_div, shared});
      links_.push_back({pcie.uplink_GBps / switch_div, shared});
    }
    // Without a measured limit the root complex is as wide as all uplinks together (never the bottleneck).
    double root = pcie.root_complex_GBps > 0 ? pcie.root_complex_GBps : pcie.uplink_GBps * switches;
    links_.push_back({root / node_div, true});
    links_.push_back({root / node_div, true});
    // NVMe read (volume -> host memory) and write; a profile without NVMe never routes over them.
    const auto& nvme = hw.host.nvme;
    links_.push_back({(nvme.bytes > 0 ? nvme.read_GBps : 1.0) / node_div, true});
    links_.push_back({(nvme.bytes > 0 ? nvme.write_GBps : 1.0) / node_div, true});
  }
  // A leaf's uplinks for one rail carry what its nodes' NICs on that rail send, over the oversubscription.
  // They are shared by the nodes of the leaf: a symmetric plan whose traffic crosses them is simulated
  // explicitly (lower_layout).
  const NetworkSpec& net = hw.network;
  leaf_links_begin_ = static_cast<std::int32_t>(links_.size());
  spine_links_ = net.leaf_nodes > 0 && net.oversubscription > 1 && nodes > net.leaf_nodes;
  if (spine_links_) {
    const std::int32_t leaves = (nodes + net.leaf_nodes - 1) / net.leaf_nodes;
    const double uplink = net.leaf_nodes * net.nic_GBps / net.oversubscription;
    for (std::int32_t l = 0; l < leaves * gpus_ * 2; ++l) links_.push_back({uplink, true});
  }
}

LinkId Topology::leaf_link(std::int32_t leaf, std::int32_t rail, std::int32_t which) const {
  return leaf_links_begin_ + (leaf * gpus_ + rail) * 2 + which;
}

void Topology::add_spine(std::int32_t a, std::int32_t ga, std::int32_t b, std::int32_t gb, Path& p) const {
  const NetworkSpec& net = hw_->network;
  if (!net.crosses_spine(a, b)) return;
  p.latency += 2 * net.switch_latency;  // up to a spine switch and down to the other leaf
  if (!spine_links_) return;
  p.links.push_back(leaf_link(a / net.leaf_nodes, ga, kSwUp));
  p.links.push_back(leaf_link(b / net.leaf_nodes, gb, kSwDown));
}

LinkId Topology::gpu_link(std::int32_t node, std::int32_t gpu, std::int32_t which) const {
  return node * per_node_ + gpu * kGpuLinks + which;
}

LinkId Topology::switch_link(std::int32_t node, std::int32_t sw, std::int32_t which) const {
  return node * per_node_ + gpus_ * kGpuLinks + 2 * sw + which;
}

LinkId Topology::root_link(std::int32_t node, std::int32_t which) const {
  return node * per_node_ + per_node_ - 4 + which;
}

LinkId Topology::nvme_link(std::int32_t node, std::int32_t which) const {
  return node * per_node_ + per_node_ - 2 + which;
}

LinkUsage Topology::describe(LinkId id) const {
  LinkUsage u;
  if (id >= leaf_links_begin_) {
    const std::int32_t rest = id - leaf_links_begin_;
    u.node = rest / 2 / gpus_;
    u.index = rest / 2 % gpus_;
    u.kind = rest % 2 == kSwUp ? LinkKind::kLeafUp : LinkKind::kLeafDown;
    u.capacity_bytes_per_ns = links_[static_cast<std::size_t>(id)].bytes_per_ns;
    return u;
  }
  u.node = id / per_node_;
  const std::int32_t rest = id % per_node_;
  u.capacity_bytes_per_ns = links_[static_cast<std::size_t>(id)].bytes_per_ns;
  if (rest >= per_node_ - 4) {  // the root complex, then the NVMe volume, each 2 ways
    static constexpr LinkKind kNodeLinks[] = {LinkKind::kRootUp, LinkKind::kRootDown, LinkKind::kNvmeRead,
                                              LinkKind::kNvmeWrite};
    u.kind = kNodeLinks[rest - (per_node_ - 4)];
  } else if (rest < gpus_ * kGpuLinks) {
    u.index = rest / kGpuLinks;
    u.kind = static_cast<LinkKind>(static_cast<int>(LinkKind::kPcieUp) + rest % kGpuLinks);
  } else {
    u.index = (rest - gpus_ * kGpuLinks) / 2;
    u.kind = (rest - gpus_ * kGpuLinks) % 2 == kSwUp ? LinkKind::kSwitchUp : LinkKind::kSwitchDown;
  }
  return u;
}

std::string LinkUsage::name() const {
  switch (kind) {
    case LinkKind::kRootUp:
    case LinkKind::kRootDown:
      return fmt::format(FMT_COMPILE("node{}.pcie_root.{}"), node, kind == LinkKind::kRootUp ? "up" : "down");
    case LinkKind::kNvmeRead:
    case LinkKind::kNvmeWrite:
      return fmt::format(FMT_COMPILE("node{}.nvme.{}"), node, kind == LinkKind::kNvmeRead ? "read" : "write");
    case LinkKind::kLeafUp:
    case LinkKind::kLeafDown:
      return fmt::format(FMT_COMPILE("leaf{}.rail{}.spine.{}"), node, index,
                         kind == LinkKind::kLeafUp ? "up" : "down");
    case LinkKind::kSwitchUp:
    case LinkKind::kSwitchDown:
      return fmt::format(FMT_COMPILE("node{}.switch{}.uplink.{}"), node, index,
                         kind == LinkKind::kSwitchUp ? "up" : "down");
    default:
      return fmt::format(FMT_COMPILE("node{}.gpu{}.{}"), node, index,
                         kGpuLinkNames[static_cast<int>(kind) - static_cast<int>(LinkKind::kPcieUp)]);
  }
}

bool Topology::nvlinked(std::int32_t a, std::int32_t b) const {
  int ga = hw_->nvlink_group(a);
  return ga >= 0 && ga == hw_->nvlink_group(b);
}

Path Topology::path(Endpoint src, Endpoint dst, std::int64_t bytes) const {
  Path p;
  const auto& pcie = hw_->node.pcie;
  auto sw = [&](std::int32_t g) { return switch_of_gpu_[static_cast<std::size_t>(g)]; };
  if (src.gpu == Endpoint::kNvme || dst.gpu == Endpoint::kNvme) {
    // Between a node's NVMe volume and its host memory (ZeRO-Infinity stages through pinned host buffers).
    const bool read = src.gpu == Endpoint::kNvme;
    p.links = {nvme_link(read ? src.node : dst.node, read ? 0 : 1)};
    p.latency = hw_->host.nvme.latency;
    return p;
  }
  if (src.gpu < 0 && dst.gpu < 0) return p;  // host to host on one node: memory copy, not modelled as a link
  if (src.gpu < 0 || dst.gpu < 0) {
    // Host <-> GPU over PCIe: root complex, switch uplink and lane; the calibrated copy curve caps the rate
    // by transfer size.
    bool h2d = src.gpu < 0;
    std::int32_t node = h2d ? dst.node : src.node, g = h2d ? dst.gpu : src.gpu;
    if (h2d)
      p.links = {root_link(node, kSwDown), switch_link(node, sw(g), kSwDown), gpu_link(node, g, kLaneDown)};
    else
      p.links = {gpu_link(node, g, kLaneUp), switch_link(node, sw(g), kSwUp), root_link(node, kSwUp)};
    const auto& curve = h2d ? pcie.h2d_GBps_by_size : pcie.d2h_GBps_by_size;
    if (!curve.empty()) p.max_bytes_per_ns = interpolate_log_x(curve, static_cast<double>(bytes));
    p.latency = pcie.latency;
    if (src.node != dst.node) p.latency += hw_->network.latency;
    return p;
  }
  if (src.node != dst.node && !hw_->nvlink_domain_shared(src.node, dst.node)) {
    p.links = {gpu_link(src.node, src.gpu, kNicTx), gpu_link(dst.node, dst.gpu, kNicRx)};
    p.latency = hw_->network.latency;
    add_spine(src.node, src.gpu, dst.node, dst.gpu, p);
  } else if (src.node != dst.node || nvlinked(src.gpu, dst.gpu)) {  // one node, or one NVLink domain
    p.links = {gpu_link(src.node, src.gpu, kNvlTx), gpu_link(dst.node, dst.gpu, kNvlRx)};
    p.latency = hw_->node.nvlink.latency;
  } else {
    // No NVLink: peer traffic crosses PCIe, through the root complex when the GPUs sit under different
    // switches.
    p.links.push_back(gpu_link(src.node, src.gpu, kLaneUp));
    // Through the root complex when the GPUs sit under different switches, or always when peer-to-peer
    // copies are disabled (staged in host memory).
    if (sw(src.gpu) != sw(dst.gpu) || !pcie.peer_to_peer) {
      p.links.push_back(switch_link(src.node, sw(src.gpu), kSwUp));
      p.links.push_back(root_link(src.node, kSwUp));
      p.links.push_back(root_link(src.node, kSwDown));
      p.links.push_back(switch_link(dst.node, sw(dst.gpu), kSwDown));
    }
    p.links.push_back(gpu_link(dst.node, dst.gpu, kLaneDown));
    p.latency = pcie.latency;
    if (!pcie.peer_to_peer) p.max_bytes_per_ns = hw_->staged_GBps(1);
  }
  return p;
}

double Topology::nvlink_busbw(std::int64_t message_bytes) const {
  if (message_bytes != busbw_message_) {
    busbw_ = interpolate_log_x(hw_->node.nvlink.allreduce_busbw_by_size, static_cast<double>(message_bytes));
    busbw_message_ = message_bytes;
  }
  return busbw_;
}

Path Topology::ring_path(Endpoint self, Endpoint next, std::int64_t bytes, std::int64_t message_bytes) const {
  Path p = path(self, next, bytes);
  if (self.gpu < 0 || next.gpu < 0) return p;
  if (self.node != next.node && !hw_->nvlink_domain_shared(self.node, next.node)) {
    p.links = {gpu_link(self.node, self.gpu, kNicTx), gpu_link(self.node, self.gpu, kNicRx)};
    // path() above added the spine's latency already; its links as the member's own send crosses them.
    if (spine_links_ && hw_->network.crosses_spine(self.node, next.node)) {
      p.links.push_back(leaf_link(self.node / hw_->network.leaf_nodes, self.gpu, kSwUp));
      p.links.push_back(leaf_link(next.node / hw_->network.leaf_nodes, next.gpu, kSwDown));
    }
  } else if (self.node != next.node || nvlinked(self.gpu, next.gpu)) {  // one node, or one NVLink domain
    p.links = {gpu_link(self.node, self.gpu, kNvlTx), gpu_link(self.node, self.gpu, kNvlRx)};
    // The measured NCCL bus bandwidth, when the profile has one, caps a ring member below the raw port rate.
    p.max_bytes_per_ns = hw_->node.nvlink.allreduce_busbw_GBps;
    if (!hw_->node.nvlink.allreduce_busbw_by_size.empty() && message_bytes > 0)
      p.max_bytes_per_ns = nvlink_busbw(message_bytes);
  } else {
    auto sw = switch_of_gpu_[static_cast<std::size_t>(self.gpu)];
    p.links = {gpu_link(self.node, self.gpu, kLaneUp)};
    const bool staged = !hw_->node.pcie.peer_to_peer;  // through host memory: up and down the root complex
    if (sw != switch_of_gpu_[static_cast<std::size_t>(next.gpu)] || staged) {
      p.links.push_back(switch_link(self.node, sw, kSwUp));
      p.links.push_back(switch_link(self.node, sw, kSwDown));
    }
    if (staged) {
      p.links.push_back(root_link(self.node, kSwUp));
      p.links.push_back(root_link(self.node, kSwDown));
      // Every GPU of the node stages its ring traffic through host memory at once.
      p.max_bytes_per_ns = hw_->staged_GBps(hw_->node.gpus);
    }
    p.links.push_back(gpu_link(self.node, self.gpu, kLaneDown));
  }
  return p;
}

}  // namespace pipesim::sim
