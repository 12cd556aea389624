// Cluster topology: the directed links of N nodes of one hardware profile, and the path a transfer takes.
// Each GPU has a PCIe lane to its switch (up/down), an NVLink port (tx/rx) when the node has NVLink, and a
// NIC (tx/rx); each PCIe switch has an uplink to the root complex (up/down) shared by the GPUs under it, and
// the root complex (up/down) carries all host<->GPU and cross-switch traffic of the node. Where the network's
// leaves are oversubscribed, each leaf has an uplink to the spine per rail (up/down) that traffic between
// leaves crosses; a non-blocking spine tier cannot bind, so only its switches' latency is added.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "hardware/path_links.hpp"
#include "pipesim/sim/core/time.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/hardware/link_usage.hpp"

namespace pipesim::sim {

struct Link {
  double bytes_per_ns = 0;  ///< capacity in one direction (1 GB/s = 1 byte/ns)
  bool shared = false;      ///< used by more than one GPU (a switch uplink)
};

/// Endpoint of a transfer: a GPU (node, index), a node's host memory or its NVMe volume.
struct Endpoint {
  static constexpr std::int32_t kHostMemory = -1, kNvme = -2;
  std::int32_t node = 0;
  std::int32_t gpu = kHostMemory;  ///< GPU index, or kHostMemory / kNvme
};

struct Path {
  PathLinks links;
  Duration latency = 0;
  double max_bytes_per_ns =
      0;  ///< per-flow cap: calibrated copy rate by size, or measured NCCL bus bandwidth; 0: none
};

/// One per run or plan check: its const lookups keep a one-entry memo, so one instance is not for
/// concurrent use.
class Topology {
 public:
  /// `node_twins` / `switch_twins`: a symmetric plan's GPU copies sharing the root complex and NVMe volume /
  /// a switch uplink with each simulated GPU (PlanMeta); those links keep 1/count of their capacity.
  Topology(const HardwareProfile& hw, std::int32_t nodes, std::int32_t node_twins = 1,
           std::int32_t switch_twins = 1);

  Path path(Endpoint src, Endpoint dst, std::int64_t bytes) const;
  /// Path of one member of a ring collective whose neighbour is `next`: the member sends to `next` and
  /// receives as much from its predecessor over the same fabric, so its flow crosses its own egress and
  /// ingress links (NIC tx+rx, NVLink tx+rx, or PCIe up+down incl. switch uplinks when the ring leaves the
  /// switch). Every member then loads links exactly as in a full ring, which keeps symmetric and explicit
  /// replica simulation in agreement.
  /// `message_bytes`: one collective's buffer (0: unknown), for the size-dependent NVLink bus bandwidth.
  Path ring_path(Endpoint self, Endpoint next, std::int64_t bytes, std::int64_t message_bytes = 0) const;
  const std::vector<Link>& links() const { return links_; }
  std::string link_name(LinkId id) const { return describe(id).name(); }
  /// Where link `id` sits and its capacity (carried bytes left 0).
  LinkUsage describe(LinkId id) const;
  std::int32_t nodes() const { return nodes_; }

 private:
  bool nvlinked(std::int32_t gpu_a, std::int32_t gpu_b) const;
  LinkId gpu_link(std::int32_t node, std::int32_t gpu, std::int32_t which) const;
  LinkId switch_link(std::int32_t node, std::int32_t sw, std::int32_t which) const;
  LinkId root_link(std::int32_t node, std::int32_t which) const;
  LinkId nvme_link(std::int32_t node, std::int32_t which) const;
  /// Leaf `leaf`'s uplink to the spine for rail `rail`, one way.
  LinkId leaf_link(std::int32_t leaf, std::int32_t rail, std::int32_t which) const;
  /// A network hop from (node a, GPU ga) to (node b, GPU gb) between leaves: the spine's switches' latency,
  /// and where the leaves are oversubscribed the sender leaf's uplink and the receiver leaf's downlink.
  void add_spine(std::int32_t a, std::int32_t ga, std::int32_t b, std::int32_t gb, Path& p) const;

  /// The NVLink bus bandwidth by message size, for the last size asked (the members of one collective ask
  /// for the same one, one after the other).
  double nvlink_busbw(std::int64_t message_bytes) const;

  const HardwareProfile* hw_;
  mutable std::int64_t busbw_message_ = -1;
  mutable double busbw_ = 0;
  std::int32_t nodes_;
  std::int32_t gpus_;
  std::int32_t per_node_;
  std::int32_t leaf_links_begin_ = 0;  ///< the first leaf uplink's id (after every node's links)
  bool spine_links_ = false;           ///< leaves oversubscribed: their uplinks are links of their own
  std::vector<std::int32_t> switch_of_gpu_;
  std::vector<Link> links_;
};

}  // namespace pipesim::sim
