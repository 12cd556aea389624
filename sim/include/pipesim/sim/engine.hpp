// The discrete-event engine: executes a Plan against its cluster (hardware profile x nodes) and predicts a
// Timeline. A value type with no global state, so the planner can run many engines in parallel threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/plan.hpp"
#include "pipesim/sim/time.hpp"

namespace pipesim::sim {

struct MemorySample {
  TimePoint time = 0;
  DeviceId device = 0;
  std::int64_t bytes = 0;
};

struct OomReport {
  bool oom = false;
  DeviceId device = -1;         ///< first device to exceed its capacity
  TimePoint time = 0;           ///< when it first did
  std::int64_t bytes_over = 0;  ///< worst excess over capacity, over all devices
};

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
};

/// A link that carried traffic. It is named on demand from where it sits: a run at thousands of GPUs uses
/// tens of thousands of links, and most reports never ask for their names.
struct LinkUsage {
  std::int32_t node = 0;
  std::int32_t index = 0;  ///< the GPU or PCIe switch of the link in its node; 0 for root complex and NVMe
  LinkKind kind = LinkKind::kPcieUp;
  double carried_bytes = 0;
  double capacity_bytes_per_ns = 0;

  /// "node3.gpu5.nvlink.tx", "node0.switch1.uplink.up", "node0.pcie_root.down", "node2.nvme.read", ...
  std::string name() const;
  /// A GPU's PCIe lane or a PCIe switch's uplink: the links metrics report the utilization of.
  bool pcie_lane_or_uplink() const {
    return kind == LinkKind::kPcieUp || kind == LinkKind::kPcieDown || kind == LinkKind::kSwitchUp ||
           kind == LinkKind::kSwitchDown;
  }
};

/// What the engine measured: per-op start/end, memory peaks, OOM, link usage.
struct Timeline {
  HugeVector<TimePoint> start;  ///< per op
  HugeVector<TimePoint> end;
  std::vector<std::int64_t> peak_bytes;      ///< per device
  std::vector<std::int64_t> capacity_bytes;  ///< per device
  OomReport oom;
  std::vector<MemorySample> memory;  ///< only when EngineOptions::record_memory
  std::vector<LinkUsage> links;      ///< links that carried traffic, in link order
  std::uint64_t events = 0;
  std::string source = "simulated";
};

struct EngineOptions {
  bool record_memory = false;
};

class Engine {
 public:
  explicit Engine(EngineOptions options = {}) : options_(options) {}
  /// Runs the plan to completion. Throws DeadlockError naming the stuck ops when some can never start,
  /// InputError when the plan refers to devices, streams or ops that do not exist.
  Timeline run(const Plan& plan) const;

 private:
  EngineOptions options_;
};

/// Checks the plan's references (streams, devices, deps, payload endpoints); throws InputError.
void validate_plan(const Plan& plan, const std::string& file = "plan");

}  // namespace pipesim::sim
