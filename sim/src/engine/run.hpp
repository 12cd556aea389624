// The state of one engine run and the reading of a plan into it (run_setup.cpp). The event loop that runs
// on this state (engine.cpp) derives from it, so that the loop's code alone stays in that file.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/event_queue.hpp"
#include "hardware/flow_network.hpp"
#include "hardware/topology.hpp"
#include "pipesim/sim/engine/engine.hpp"

namespace pipesim::sim::detail {

/// All mutable state of one run; the Engine itself stays const and reusable. Hidden: the library is built
/// position-independent, where GCC takes a default-visibility function as one another library may replace,
/// and calls it through the PLT (once per op as the plan is read).
class [[gnu::visibility("hidden")]] RunState {
 protected:
  RunState(const Plan& plan, const EngineOptions& options);
  /// Reads the plan's streams, ops and collective groups into the records below, checking the plan as it
  /// goes (the devices' memory is left to the run, which tracks it).
  void read_plan();

  enum class Mode : std::uint8_t { kTimed, kFlow, kCpu };
  /// The per-op fields the event loop touches, packed so the hot loop stays in cache.
  struct HotOp {
    /// Timed and CPU ops: the precomputed duration. A transfer: its collective group's dense index (-1:
    /// none) until it starts, then its path latency.
    Duration duration = 0;
    StreamId stream = 0;
    OpId next = -1;  // the op after it on its stream, or -1
    std::int32_t deps_left = 0;
    // Bumped when a collective beside it moves its end event. A transfer's end never moves: it holds the
    // index of its shape in shapes_ (which its end events carry).
    std::uint32_t end_version = 0;
    // The ops that depend on it: -1 none, an op id when it is the only one (the usual case), else
    // chain_ref(k) for the chain of dependent_links_ that starts at link k.
    OpId dependents = -1;
    Mode mode = Mode::kTimed;
    bool started = false;
    bool collective : 1 = false;   // a collective on a GPU: slows the compute beside it
    bool stretchable : 1 = false;  // GPU compute that a collective beside it slows
    // It allocates or frees memory: how much is read from the plan then, keeping the record half a cache
    // line (the amounts themselves would push it past that, for the few ops that have them).
    bool allocates : 1 = false;
    bool frees : 1 = false;
    bool finished : 1 = false;  // for a deadlock's report: the timeline's ends are not filled beforehand
    // A timed op with none of the above to do when it starts or ends (most compute and every fixed-time
    // hop): start() and finish() test this one bit instead of each flag.
    bool plain : 1 = false;
  };
  static_assert(sizeof(HotOp) == 32, "two ops per cache line");
  /// A compute op in flight on a GPU where collectives may slow it: nominal nanoseconds still to run.
  struct Stretched {
    OpId op = 0;
    double work_left = 0;
    TimePoint since = 0;
  };
  struct StreamState {
    DeviceId device = 0;
    OpId head_op = -1;  // the op that runs next (kept here: checking it stays off the per-op arrays), or -1
    OpId last_op = -1;  // while setting up: the last op placed on it
  };
  /// A transfer as the network takes it: its path (links, latency, rate cap), bytes, latency steps and
  /// priority. Worked out as the plan is read, so that starting a transfer reads this and not the plan's op
  /// (a cache miss per transfer, thousands of GPUs apart).
  struct TransferShape {
    Path path;
    std::int64_t bytes = 0;
    std::int32_t latency_steps = 1;
    std::int32_t priority = 0;
    Duration latency_ns = -1;  ///< TransferWork::latency_ns
  };

  const Plan& plan_;
  const EngineOptions& options_;
  Topology topo_;
  FlowNetwork net_;
  EventQueue queue_;
  TimePoint now_ = 0;
  Timeline tl_;

  HugeVector<HotOp> ops_;
  std::vector<StreamState> streams_;
  /// Reverse dependencies beyond an op's first, chained newest first: the plan is not read again to build
  /// them.
  struct DependentLink {
    OpId op;
    std::int32_t next;  // the link of the dependent before it, or -1
  };
  std::vector<DependentLink> dependent_links_;
  static constexpr OpId chain_ref(std::int32_t link) {
    return -2 - link;
  }
  static constexpr std::int32_t chain_link(OpId ref) {
    return -2 - ref;
  }                             // chain_ref's inverse
  std::vector<OpId> released_;  // scratch: a chain's dependents, put back in ascending order
  /// What a memory event (or a collective beside compute) reads and writes of its device, in one 32-byte
  /// record: in separate arrays (and the plan's device record for its kind) a memory event was four cache
  /// lines, thousands of GPUs apart.
  struct DeviceState {
    std::int64_t now = 0;
    std::int64_t peak = 0;
    std::int64_t capacity = 0;
    /// A symmetric plan's host and NVMe devices also hold what the simulated GPUs' twins on the node put
    /// there: each amount counts this many times.
    std::int32_t copies = 1;
    std::int32_t collectives_on = 0;  // collectives in flight (kept when the profile names a slowdown)
  };
  static_assert(sizeof(DeviceState) == 32);
  std::vector<DeviceState> devices_;
  std::vector<Endpoint> endpoints_;   // per device: where it sits in the topology (for transfer shapes)
  HugeVector<TransferShape> shapes_;  // each transfer's, by the index in its HotOp (megabytes at 8,192 GPUs)
  std::vector<std::int32_t> cores_free_;
  /// CPU ops waiting for a device's cores, first come first served. A vector and the index of its first
  /// waiting op: a deque allocates even when empty, and only host devices ever wait.
  struct WaitQueue {
    std::vector<OpId> ids;
    std::size_t head = 0;
    bool empty() const { return head == ids.size(); }
    bool contains(OpId id) const {
      return std::find(ids.begin() + static_cast<std::ptrdiff_t>(head), ids.end(), id) != ids.end();
    }
    OpId pop() {
      const OpId id = ids[head++];
      if (head == ids.size()) ids.clear(), head = 0;
      return id;
    }
  };
  std::vector<WaitQueue> cpu_waiting_;
  // Collective groups are numbered densely (plans may number them sparsely, up to 2^31); a transfer's
  // index sits in its HotOp until it starts.
  struct Group {
    std::int64_t begin = 0;  // its members are group_members_[begin, begin + size) once all are ready
    std::int32_t ready = 0;  // members ready so far
    std::int32_t size = 0;   // members it waits for (kept here: try_start stays off the plan's ops)
  };
  // Both grow with the plan's collectives (megabytes at thousands of GPUs): on huge pages.
  HugeVector<Group> groups_;  // one record per group: a member's arrival touches one cache line
  HugeVector<OpId> group_members_;
  std::vector<OpId> flow_op_;
  std::vector<std::uint32_t> flow_version_;
  std::size_t finished_ = 0;
  // Contention of overlapped collectives with compute (hw.gpu.collective_compute_slowdown); only kept
  // when the profile names a slowdown.
  double slowdown_ = 0;
  double straggler_ = 1;  ///< the expected slowest GPU's time over the profile's (straggler_slowdown)
  std::vector<std::vector<Stretched>> computing_;  // per device: stretchable compute in flight

 private:
  /// What reading the ops gathers besides the records (defined in run_setup.cpp).
  struct PlanReading;

  /// Links are built only for nodes that hold a device of the plan (a cluster may be larger than the job).
  static std::int32_t used_nodes(const Plan& plan) {
    std::int32_t n = 1;
    for (const auto& d : plan.devices) n = std::max(n, std::min(d.node, plan.nodes - 1) + 1);
    return n;
  }
  static std::vector<double> capacities(const Topology& t) {
    std::vector<double> c;
    c.reserve(t.links().size());
    for (const auto& l : t.links()) c.push_back(l.bytes_per_ns);
    return c;
  }
  /// Sizes the timeline and the op records for the plan's `n` ops.
  void size_op_arrays(std::size_t n);
  /// Places each stream on its device; returns, per stream, whether collectives may slow its ops or its
  /// collectives slow compute.
  std::vector<char> read_streams();
  /// Reads op `i` into its record, its stream's chain and the dependents of the ops it depends on.
  void read_op(std::size_t i, PlanReading & r);
  /// Numbers the collective groups of the transfers read and lays out their members.
  void number_groups(const PlanReading& r, std::size_t n);

  /// The time of an op timed by its work (no fixed time).
  Duration compute_duration(const Op& op, DeviceId device) const;
  /// Durations of shared compute works seen last, by the work's address: every microbatch and replica of a
  /// chunk runs one work, so most ops find theirs here instead of pricing it again.
  struct DurationCache {
    static constexpr std::size_t kSlots = 256;
    std::array<const ComputeWork*, kSlots> work{};
    std::array<Duration, kSlots> duration{};
  };
  Duration cached_duration(const Op& op, DeviceId device, DurationCache& cache) const {
    const ComputeWork* w = compute_of(op.payload);
    if (w == nullptr) return compute_duration(op, device);
    const std::size_t slot = (reinterpret_cast<std::uintptr_t>(w) >> 4) % DurationCache::kSlots;
    if (cache.work[slot] != w) {
      cache.duration[slot] = compute_duration(op, device);
      cache.work[slot] = w;
    }
    return cache.duration[slot];
  }
  Endpoint endpoint(DeviceId d) const {
    return endpoints_[static_cast<std::size_t>(d)];
  }
  /// The shapes of a stream's last two transfers: a stream's transfers mostly repeat one of them (a stage's
  /// sends alternate between the next stage's activations and the previous one's gradients; a ring member
  /// repeats its hop), so most share a shape and skip the topology walk.
  struct ShapeMemo {
    DeviceId src = -1, dst = -1;
    bool ring = false;
    std::int32_t latency_steps = 1, priority = 0;
    std::int64_t bytes = 0, message_bytes = 0;
    Duration latency_ns = -1;
    std::uint32_t shape = 0;  // in shapes_
    bool matches(const TransferWork& t, bool r) const {
      return src == t.src && dst == t.dst && ring == r && bytes == t.bytes &&
             message_bytes == t.message_bytes && latency_steps == t.latency_steps && priority == t.priority &&
             latency_ns == t.latency_ns;
    }
  };
  /// The newest of a stream's two shapes is tried first; a miss replaces the older one.
  struct ShapeMemos {
    std::array<ShapeMemo, 2> entry;
    std::uint8_t newest = 0;
  };
  std::uint32_t shape_of(ShapeMemos & memo, const TransferWork& t, bool ring);
  void add_dependent(OpId & dependents, OpId op);
};

}  // namespace pipesim::sim::detail
