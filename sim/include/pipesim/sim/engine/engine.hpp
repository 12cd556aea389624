// The discrete-event engine: executes a Plan against its cluster (hardware profile x nodes) and predicts a
// Timeline. A value type with no global state, so the planner can run many engines in parallel threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/core/huge_page_allocator.hpp"
#include "pipesim/sim/core/time.hpp"
#include "pipesim/sim/hardware/link_usage.hpp"
#include "pipesim/sim/plan/plan.hpp"

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

}  // namespace pipesim::sim
