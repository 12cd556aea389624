// The links of a cluster as a run reports them: which link (a GPU's PCIe lane, NVLink port or NIC, a PCIe
// switch's uplink, a node's root complex or NVMe volume, each way), the bytes it carried and its capacity.
#pragma once

#include <cstdint>
#include <string>

namespace pipesim::sim {

/// The kind of a directed link: a GPU's PCIe lane, NVLink port or NIC, a PCIe switch's uplink, a node's root
/// complex or NVMe volume, each way.
enum class LinkKind : std::uint8_t {
  kPcieUp,
  kPcieDown,
  kNvlinkTx,
  kNvlinkRx,
  kNicTx,
  kNicRx,
  kSwitchUp,
  kSwitchDown,
  kRootUp,
  kRootDown,
  kNvmeRead,
  kNvmeWrite,
  kLeafUp,  ///< a leaf switch's uplinks to the spine for one rail (`node`: the leaf, `index`: the rail)
  kLeafDown,
};

/// A link that carried traffic. It is named on demand from where it sits: a run at thousands of GPUs uses
/// tens of thousands of links, and most reports never ask for their names.
struct LinkUsage {
  std::int32_t node = 0;
  std::int32_t index = 0;  ///< the GPU or PCIe switch of the link in its node; 0 for root complex and NVMe
  LinkKind kind = LinkKind::kPcieUp;
  double carried_bytes = 0;
  double capacity_bytes_per_ns = 0;

  /// "node3.gpu5.nvlink.tx", "node0.switch1.uplink.up", "node0.pcie_root.down", "node2.nvme.read",
  /// "leaf1.rail4.spine.up", ...
  std::string name() const;
  /// A GPU's PCIe lane or a PCIe switch's uplink: the links metrics report the utilization of.
  bool pcie_lane_or_uplink() const {
    return kind == LinkKind::kPcieUp || kind == LinkKind::kPcieDown || kind == LinkKind::kSwitchUp ||
           kind == LinkKind::kSwitchDown;
  }
};

}  // namespace pipesim::sim
