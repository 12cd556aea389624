#include "pipesim/sim/engine/engine.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "core/page_populator.hpp"
#include "engine/event_queue.hpp"
#include "engine/group_numbering.hpp"
#include "hardware/flow_network.hpp"
#include "hardware/topology.hpp"
#include "pipesim/sim/core/error.hpp"
#include "plan/endpoints.hpp"
#include "plan/plan_validator.hpp"

namespace pipesim::sim {

namespace {

enum EventType : std::int32_t { kOpEnd = 0, kFlowDone = 1 };

/// All mutable state of one run; the Engine itself stays const and reusable.
class Run {
 public:
  Run(const Plan& plan, const EngineOptions& options)
      : plan_(plan),
        options_(options),
        topo_(plan.hw, used_nodes(plan), plan.meta.node_twins, plan.meta.switch_twins),
        net_(capacities(topo_)) {
    net_.set_batching(true);
  }

  Timeline execute();

 private:
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
  void setup();
  /// Starts op `id` if it is ready: its dependencies ended and it heads its stream (`at_head`: known to).
  void try_start(OpId id, bool at_head = false);
  void start(OpId id);
  /// Starts an op that is not plain: CPU work (which may wait for cores), a transfer, memory, collectives.
  void start_other(OpId id);
  /// What every op does when it starts: its start time and the prefetches ahead of it.
  void begin(HotOp& h, std::size_t i);
  void finish(OpId id);
  /// What an op that is not plain does besides when it ends.
  void end_other(const HotOp& h, OpId id);
  void schedule_flow_events(const std::vector<FlowId>& flows);
  void adjust_memory(DeviceId d, std::int64_t delta);
  /// Compute time per nominal nanosecond on device `d` now: 1, or 1 + the slowdown while a collective runs.
  double stretch(DeviceId d) const {
    return devices_[static_cast<std::size_t>(d)].collectives_on > 0 ? 1.0 + slowdown_ : 1.0;
  }
  /// The instant `work` nominal nanoseconds end when run at `factor`.
  TimePoint stretched_end(double work, double factor) const {
    return after(static_cast<Duration>(std::ceil(std::max(0.0, work) * factor)));
  }
  /// A collective started or ended on `d`: the compute in flight there moves to the new rate.
  void restretch(DeviceId d, double old_factor);
  /// The instant `d` after now; a run that would pass the int64 time range is bad input, not a wrap.
  TimePoint after(Duration d) const {
    TimePoint t;
    if (__builtin_add_overflow(now_, d, &t))
      throw InputError(plan_.origin, "", "the run passes the simulated time range (about 292 years)");
    return t;
  }
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
  Endpoint endpoint(DeviceId d) const { return endpoints_[static_cast<std::size_t>(d)]; }
  /// A transfer as the network takes it: its path (links, latency, rate cap), bytes, latency steps and
  /// priority. Worked out as the plan is read, so that starting a transfer reads this and not the plan's op
  /// (a cache miss per transfer, thousands of GPUs apart).
  struct TransferShape {
    Path path;
    std::int64_t bytes = 0;
    std::int32_t latency_steps = 1;
    std::int32_t priority = 0;
  };
  /// The shapes of a stream's last two transfers: a stream's transfers mostly repeat one of them (a stage's
  /// sends alternate between the next stage's activations and the previous one's gradients; a ring member
  /// repeats its hop), so most share a shape and skip the topology walk.
  struct ShapeMemo {
    DeviceId src = -1, dst = -1;
    bool ring = false;
    std::int32_t latency_steps = 1, priority = 0;
    std::int64_t bytes = 0, message_bytes = 0;
    std::uint32_t shape = 0;  // in shapes_
    bool matches(const TransferWork& t, bool r) const {
      return src == t.src && dst == t.dst && ring == r && bytes == t.bytes &&
             message_bytes == t.message_bytes && latency_steps == t.latency_steps && priority == t.priority;
    }
  };
  /// The newest of a stream's two shapes is tried first; a miss replaces the older one.
  struct ShapeMemos {
    std::array<ShapeMemo, 2> entry;
    std::uint8_t newest = 0;
  };
  std::uint32_t shape_of(ShapeMemos& memo, const TransferWork& t, bool ring);
  [[noreturn]] void report_deadlock() const;
  /// A stream's ops sit mostly one after another, and each is first touched by the event loop when the one
  /// before it ends: fetch the state of the ops a few places on while this one runs. (Hundreds of streams
  /// advance at once, more than the hardware prefetcher follows.)
  void prefetch_ahead(std::size_t i) const {
    const std::size_t ahead = std::min(i + kPrefetchOps, ops_.size() - 1);
    __builtin_prefetch(&ops_[ahead]);
  }
  static constexpr std::size_t kPrefetchOps = 8;
  /// Ops that end at this instant a few events on: their records now, and once those have arrived, the ops
  /// they release (in a large job thousands of GPUs end ops at one instant, each op's record a cache miss).
  void prefetch_events_ahead() const {
    if (const Event* e = queue_.peek_now(kPrefetchEvents); e != nullptr) {
      if (e->type() == kOpEnd) {
        __builtin_prefetch(&ops_[static_cast<std::size_t>(e->target)]);
        __builtin_prefetch(&tl_.end[static_cast<std::size_t>(e->target)], 1);
      } else {
        net_.prefetch_flow(e->target);
      }
    }
    if (const Event* e = queue_.peek_now(kPrefetchEvents / 2); e != nullptr) {
      if (e->type() == kOpEnd) {
        const HotOp& h = ops_[static_cast<std::size_t>(e->target)];
        if (h.dependents >= 0) __builtin_prefetch(&ops_[static_cast<std::size_t>(h.dependents)]);
      } else {
        net_.prefetch_links(e->target);
      }
    }
  }
  static constexpr std::size_t kPrefetchEvents = 4;

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
  static constexpr OpId chain_ref(std::int32_t link) { return -2 - link; }
  static constexpr std::int32_t chain_link(OpId ref) { return -2 - ref; }  // chain_ref's inverse
  void add_dependent(OpId& dependents, OpId op);
  /// One of `d`'s dependencies ended: it starts once none is left.
  void release(OpId d) {
    if (--ops_[static_cast<std::size_t>(d)].deps_left == 0) try_start(d);
  }
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
  std::vector<std::vector<Stretched>> computing_;  // per device: stretchable compute in flight
};

void Run::setup() {
  // The plan is checked as it is read: devices and streams here, each op in the loop below.
  PlanValidator check(plan_, plan_.origin);
  const std::size_t n = plan_.ops.size();
  slowdown_ = plan_.hw.gpu.collective_compute_slowdown;
  if (slowdown_ > 0) {
    computing_.assign(plan_.devices.size(), {});
  }
  // Every op's start and end are written as it runs (a run that leaves one out is a deadlock and returns no
  // timeline), so they are not filled first.
  tl_.start.resize(n);
  tl_.end.resize(n);
  ops_.clear();
  ops_.reserve(n);  // filled below: each op's entry is written once
  // Backed with pages on the other CPU meanwhile: the records as this pass fills them, the timeline as the
  // run does.
  populate_elements(ops_, 0, n);
  populate_elements(tl_.start, 0, n);
  populate_elements(tl_.end, 0, n);
  // Each op's dependents, gathered as the ops that name it are read (copied into ops_ after the pass: an op
  // may depend on one later in the plan).
  HugeVector<OpId> dependents(n, -1);
  streams_.resize(plan_.streams.size());
  // Streams whose ops collectives may slow or that slow compute (GPU streams, when the profile names a
  // slowdown): looked up per stream here, not per op.
  std::vector<char> contended(plan_.streams.size(), 0);
  for (std::size_t s = 0; s < plan_.streams.size(); ++s) {
    const DeviceId d = plan_.streams[s].device;
    streams_[s].device = d;
    contended[s] = slowdown_ > 0 && plan_.devices[static_cast<std::size_t>(d)].kind == DeviceKind::kGpu;
  }
  // Sized for every op up front (address space only: pages are backed as entries are written), so that
  // neither array is copied as it grows: growth was a fifth of the tp 8 x pp 16 x dp 64 run's page faults.
  HugeVector<std::int32_t> group_ids;
  group_ids.reserve(n);
  struct Member {
    OpId op;
    std::int32_t size;  // the group's size this op states
  };
  HugeVector<Member> grouped;  // the transfers that belong to a collective group, beside group_ids
  grouped.reserve(n);
  // Each stream's last transfer shapes (a stream's index into `memos` once it carries a transfer).
  std::vector<ShapeMemos> memos;
  std::vector<std::int32_t> memo_of_stream(plan_.streams.size(), -1);
  endpoints_.resize(plan_.devices.size());
  for (std::size_t d = 0; d < plan_.devices.size(); ++d) endpoints_[d] = endpoint_of(plan_.devices[d]);
  DurationCache durations;
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = plan_.ops[i];
    check.op(i, op);
    const OpExtras& extras = plan_.extras_of(op);
    const bool timed_by_work = op.fixed_duration < 0;
    const auto id = static_cast<OpId>(i);
    HotOp& h = ops_.emplace_back();
    auto& st = streams_[static_cast<std::size_t>(op.stream)];
    h.stream = op.stream;
    if (st.last_op >= 0)
      ops_[static_cast<std::size_t>(st.last_op)].next = id;
    else
      st.head_op = id;
    st.last_op = id;
    h.deps_left = static_cast<std::int32_t>(op.deps.size());
    // The flags start false: each is stored only when set (a bit field's store reads its byte first).
    if (extras.alloc_bytes != 0) h.allocates = true;
    if (extras.free_bytes != 0) h.frees = true;
    if (contended[static_cast<std::size_t>(op.stream)] != 0) {
      if (is_collective(op.kind)) h.collective = true;
      if (std::holds_alternative<SharedCompute>(op.payload) && timed_by_work) h.stretchable = true;
    }
    if (const auto* t = std::get_if<TransferWork>(&op.payload); t && timed_by_work) {
      h.mode = Mode::kFlow;
      h.duration = -1;
      if (t->group >= 0) {
        group_ids.push_back(t->group);
        grouped.push_back({id, t->group_size});
      }
      std::int32_t& memo = memo_of_stream[static_cast<std::size_t>(op.stream)];
      if (memo < 0) {
        memo = static_cast<std::int32_t>(memos.size());
        memos.emplace_back();
      }
      h.end_version = shape_of(memos[static_cast<std::size_t>(memo)], *t, is_collective(op.kind));
    } else {
      h.mode = std::holds_alternative<CpuWork>(op.payload) && timed_by_work ? Mode::kCpu : Mode::kTimed;
      try {
        h.duration = timed_by_work ? cached_duration(op, st.device, durations) : op.fixed_duration;
      } catch (const InputError&) {
        throw InputError(
            plan_.hw.origin, fmt::format("/ops/{}", i),
            "op duration exceeds the simulated time range (about 292 years); check its work and rates");
      }
    }
    if (h.mode == Mode::kTimed && !h.allocates && !h.frees && !h.collective && !h.stretchable) h.plain = true;
    for (OpId d : op.deps) add_dependent(dependents[static_cast<std::size_t>(d)], id);
  }
  check.finish();
  for (std::size_t i = 0; i < n; ++i) ops_[i].dependents = dependents[i];
  // The members are numbered from the ids kept beside them: the plan's ops are not read again.
  const GroupNumbering groups(group_ids, n);
  groups_.assign(groups.size(), {});
  for (std::size_t k = 0; k < grouped.size(); ++k) {
    const auto i = static_cast<std::size_t>(grouped[k].op);
    const std::int32_t group = group_ids[k], size = grouped[k].size;
    Group& g = groups_[groups[group]];
    ops_[i].duration = static_cast<Duration>(groups[group]);
    if (g.size != 0 && g.size != size)
      throw InputError(plan_.origin, fmt::format("/ops/{}/transfer/group_size", i),
                       fmt::format("{} members, where another op of collective group {} says {}; valid: {}",
                                   size, group, g.size, g.size));
    g.size = size;
    if (++g.ready > g.size)  // counts members here; reset below
      throw InputError(plan_.origin, fmt::format("/ops/{}/transfer/group", i),
                       fmt::format("collective group {} has {} member ops; valid: at most its group_size, {} "
                                   "(each collective its own group)",
                                   group, g.ready, g.size));
  }
  // Each group's member ops in one flat array, in the order they become ready (sized by the ops present: a
  // group may declare more members than the plan holds, and then never starts; it starts once `size` are
  // ready, which is then all of them).
  std::int64_t members = 0;
  for (Group& g : groups_) {
    g.begin = members;
    members += std::exchange(g.ready, 0);
  }
  group_members_.assign(static_cast<std::size_t>(members), -1);

  const std::size_t nd = plan_.devices.size();
  devices_.assign(nd, {});
  cores_free_.assign(nd, 0);
  cpu_waiting_.resize(nd);
  for (std::size_t d = 0; d < nd; ++d) {
    const auto& dev = plan_.devices[d];
    devices_[d].capacity = dev.kind == DeviceKind::kGpu    ? plan_.hw.gpu.hbm_bytes
                           : dev.kind == DeviceKind::kHost ? plan_.hw.host.dram_bytes
                                                           : plan_.hw.host.nvme.bytes;
    if (dev.kind != DeviceKind::kGpu) devices_[d].copies = std::max(1, plan_.meta.node_twins);
    cores_free_[d] = dev.kind == DeviceKind::kHost ? plan_.hw.host.cores : 0;
    adjust_memory(static_cast<DeviceId>(d), dev.resident_bytes);
  }
}

std::uint32_t Run::shape_of(ShapeMemos& memo, const TransferWork& t, bool ring) {
  if (memo.entry[memo.newest].matches(t, ring)) return memo.entry[memo.newest].shape;
  memo.newest ^= 1;
  ShapeMemo& m = memo.entry[memo.newest];
  if (!m.matches(t, ring)) {
    if (shapes_.size() > std::numeric_limits<std::uint32_t>::max())
      throw InputError(plan_.origin, "/ops", "over 2^32 distinct transfers; valid: fewer");
    TransferShape shape;
    shape.path = ring ? topo_.ring_path(endpoint(t.src), endpoint(t.dst), t.bytes, t.message_bytes)
                      : topo_.path(endpoint(t.src), endpoint(t.dst), t.bytes);
    shape.bytes = t.bytes;
    shape.latency_steps = t.latency_steps;
    shape.priority = t.priority;
    shapes_.push_back(shape);
    m.src = t.src, m.dst = t.dst, m.ring = ring;
    m.latency_steps = t.latency_steps, m.priority = t.priority;
    m.bytes = t.bytes, m.message_bytes = t.message_bytes;
    m.shape = static_cast<std::uint32_t>(shapes_.size() - 1);
  }
  return m.shape;
}

void Run::add_dependent(OpId& dependents, OpId op) {
  if (dependents == -1) {
    dependents = op;
    return;
  }
  // A second dependent: both move to links (the chain is walked backwards, so the first is linked first).
  if (dependent_links_.size() + 2 > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) - 2)
    throw InputError(plan_.origin, "/ops",
                     "over 2^31 - 4 dependencies on ops that have more than one dependent; valid: fewer");
  std::int32_t prev = -1;
  if (dependents >= 0) {
    prev = static_cast<std::int32_t>(dependent_links_.size());
    dependent_links_.push_back({dependents, -1});
  } else {
    prev = chain_link(dependents);
  }
  dependents = chain_ref(static_cast<std::int32_t>(dependent_links_.size()));
  dependent_links_.push_back({op, prev});
}

Timeline Run::execute() {
  setup();
  for (const auto& st : streams_)
    if (st.head_op >= 0) try_start(st.head_op, true);

  net_.flush(now_);
  schedule_flow_events(net_.changed());
  while (!queue_.empty()) {
    Event ev = queue_.pop();
    // Kept on in release builds: a queue that hands out the past means the engine is broken.
    if (ev.time < now_)
      throw std::logic_error(fmt::format("simulated time went backwards: {} ns after {} ns", ev.time, now_));
    now_ = ev.time;
    ++tl_.events;
    prefetch_events_ahead();
    // An event superseded since it was pushed (an end moved by a collective starting or ending beside it, a
    // flow's finish by a rate change) does nothing, but may still be the instant's last.
    if (ev.type() == kOpEnd) {
      if (slowdown_ <= 0 || ev.version == ops_[static_cast<std::size_t>(ev.target)].end_version)
        finish(ev.target);
    } else if (ev.type() == kFlowDone && ev.version == flow_version_[static_cast<std::size_t>(ev.target)]) {
      OpId op = flow_op_[static_cast<std::size_t>(ev.target)];
      ++flow_version_[static_cast<std::size_t>(ev.target)];
      net_.remove(ev.target, now_);  // the flows beside it are re-rated by the instant's flush
      const HotOp& h = ops_[static_cast<std::size_t>(op)];
      queue_.push(after(h.duration), 0, kOpEnd, op, h.end_version);
    }
    // Flows started or ended at this instant share one rate recomputation, once the instant is over.
    if (net_.has_pending() && !queue_.more_at_last_popped_time()) {
      net_.flush(now_);
      schedule_flow_events(net_.changed());
    }
  }
  if (finished_ != plan_.ops.size()) report_deadlock();

  std::vector<double> carried = net_.carried_bytes(now_);
  tl_.links.reserve(static_cast<std::size_t>(
      std::count_if(carried.begin(), carried.end(), [](double bytes) { return bytes > 0; })));
  for (std::size_t l = 0; l < carried.size(); ++l)
    if (carried[l] > 0) {
      tl_.links.push_back(topo_.describe(static_cast<LinkId>(l)));
      tl_.links.back().carried_bytes = carried[l];
    }
  tl_.peak_bytes.reserve(devices_.size());
  tl_.capacity_bytes.reserve(devices_.size());
  for (const DeviceState& m : devices_) {
    tl_.peak_bytes.push_back(m.peak);
    tl_.capacity_bytes.push_back(m.capacity);
  }
  return std::move(tl_);
}

void Run::try_start(OpId id, bool at_head) {
  HotOp& h = ops_[static_cast<std::size_t>(id)];
  if (h.started || h.deps_left > 0) return;
  if (!at_head && streams_[static_cast<std::size_t>(h.stream)].head_op != id) return;
  if (h.mode == Mode::kFlow && h.duration >= 0) {
    Group& g = groups_[static_cast<std::size_t>(h.duration)];
    if (g.size > 1) {
      // A collective starts on all members at once, when the last of them is ready.
      h.started = true;
      group_members_[static_cast<std::size_t>(g.begin + g.ready)] = id;
      if (++g.ready < g.size) return;
      for (std::int64_t k = g.begin; k < g.begin + g.size; ++k) {
        const OpId m = group_members_[static_cast<std::size_t>(k)];
        ops_[static_cast<std::size_t>(m)].started = false;
        start(m);
      }
      return;
    }
  }
  start(id);
}

Duration Run::compute_duration(const Op& op, DeviceId device) const {
  const auto& hw = plan_.hw;
  if (const auto* c = compute_of(op.payload))
    return hw.op_ns(c->flops, c->gemm_gflop, c->kernels, plan_.meta.dtype, c->mem_bytes, c->expert_flops,
                    c->expert_gemm_gflop, c->expert_weight_bytes, c->attention_flops, c->attention_bytes,
                    c->wide_flops, c->score_bytes);
  if (const auto* m = std::get_if<MemoryWork>(&op.payload)) {
    if (plan_.devices[static_cast<std::size_t>(device)].kind == DeviceKind::kGpu)
      return hw.memory_ns(m->bytes);
    return duration_for_work(static_cast<double>(m->bytes), hw.host.dram_GBps * 1e9);
  }
  if (const auto* w = std::get_if<CpuWork>(&op.payload))
    return duration_for_work(static_cast<double>(w->params), hw.adam_params_per_s(w->threads));
  return 0;
}

void Run::start(OpId id) {
  const auto i = static_cast<std::size_t>(id);
  HotOp& h = ops_[i];
  if (!h.plain) {
    start_other(id);
    return;
  }
  begin(h, i);
  queue_.push(after(h.duration), 0, kOpEnd, id);
}

void Run::begin(HotOp& h, std::size_t i) {
  h.started = true;
  tl_.start[i] = now_;
  prefetch_ahead(i);
}

void Run::start_other(OpId id) {
  const auto i = static_cast<std::size_t>(id);
  HotOp& h = ops_[i];
  const DeviceId dev = streams_[static_cast<std::size_t>(h.stream)].device;
  if (h.mode == Mode::kCpu) {
    auto d = static_cast<std::size_t>(dev);
    const auto threads = std::get<CpuWork>(plan_.ops[i].payload).threads;
    if (cores_free_[d] < threads) {  // wait for cores, first come first served
      h.started = true;
      if (!cpu_waiting_[d].contains(id)) cpu_waiting_[d].ids.push_back(id);
      return;
    }
    cores_free_[d] -= threads;
  }
  begin(h, i);
  if (h.allocates) adjust_memory(dev, plan_.extras_of(plan_.ops[i]).alloc_bytes);
  if (h.collective) {
    const double old_factor = stretch(dev);
    if (devices_[static_cast<std::size_t>(dev)].collectives_on++ == 0) restretch(dev, old_factor);
  }
  if (h.stretchable) {
    computing_[static_cast<std::size_t>(dev)].push_back({id, static_cast<double>(h.duration), now_});
    queue_.push(stretched_end(static_cast<double>(h.duration), stretch(dev)), 0, kOpEnd, id, h.end_version);
    return;
  }
  if (h.mode == Mode::kFlow) {
    const TransferShape& t = shapes_[h.end_version];
    const Path& p = t.path;
    h.duration = p.latency * t.latency_steps;
    if (!p.links.empty() && t.bytes > 0) {
      FlowId f = net_.add(p.links, static_cast<double>(t.bytes), p.max_bytes_per_ns, now_, t.priority);
      if (static_cast<std::size_t>(f) >= flow_op_.size()) {
        flow_op_.resize(static_cast<std::size_t>(f) + 1, -1);
        flow_version_.resize(static_cast<std::size_t>(f) + 1, 0);
      }
      flow_op_[static_cast<std::size_t>(f)] = id;
      return;  // rated when the instant's flush runs (the network batches)
    }
    queue_.push(after(h.duration), 0, kOpEnd, id, h.end_version);
    return;
  }
  queue_.push(after(h.duration), 0, kOpEnd, id);
}

void Run::schedule_flow_events(const std::vector<FlowId>& flows) {
  for (FlowId f : flows) {
    auto fi = static_cast<std::size_t>(f);
    ++flow_version_[fi];
    TimePoint t = net_.finish_time(f);
    if (t == std::numeric_limits<TimePoint>::max()) continue;  // starved: rescheduled when a rate changes
    queue_.push(std::max(t, now_), 0, kFlowDone, f, flow_version_[fi]);
  }
}

void Run::finish(OpId id) {
  const auto i = static_cast<std::size_t>(id);
  HotOp& h = ops_[i];
  auto& st = streams_[static_cast<std::size_t>(h.stream)];
  tl_.end[i] = now_;
  h.finished = true;
  ++finished_;
  if (!h.plain) end_other(h, id);
  st.head_op = h.next;
  if (h.next >= 0) try_start(h.next, true);
  if (h.dependents >= 0) {
    release(h.dependents);
  } else if (h.dependents < -1) {
    // The chain runs from the last dependent to the first; they are tried in plan order.
    released_.clear();
    for (std::int32_t k = chain_link(h.dependents); k >= 0;
         k = dependent_links_[static_cast<std::size_t>(k)].next)
      released_.push_back(dependent_links_[static_cast<std::size_t>(k)].op);
    for (std::size_t k = released_.size(); k-- > 0;) release(released_[k]);
  }
}

void Run::end_other(const HotOp& h, OpId id) {
  const auto i = static_cast<std::size_t>(id);
  const auto& st = streams_[static_cast<std::size_t>(h.stream)];
  if (h.frees) adjust_memory(st.device, -plan_.extras_of(plan_.ops[i]).free_bytes);
  if (h.stretchable) {
    auto& running = computing_[static_cast<std::size_t>(st.device)];
    running.erase(
        std::find_if(running.begin(), running.end(), [id](const Stretched& s) { return s.op == id; }));
  }
  if (h.collective) {
    const double old_factor = stretch(st.device);
    if (--devices_[static_cast<std::size_t>(st.device)].collectives_on == 0) restretch(st.device, old_factor);
  }
  if (h.mode == Mode::kCpu) {
    auto d = static_cast<std::size_t>(st.device);
    cores_free_[d] += std::get<CpuWork>(plan_.ops[i].payload).threads;
    while (!cpu_waiting_[d].empty()) {
      const OpId next = cpu_waiting_[d].ids[cpu_waiting_[d].head];
      const auto& nw = std::get<CpuWork>(plan_.ops[static_cast<std::size_t>(next)].payload);
      if (cores_free_[d] < nw.threads) break;
      cpu_waiting_[d].pop();
      ops_[static_cast<std::size_t>(next)].started = false;
      start(next);
    }
  }
}

void Run::restretch(DeviceId d, double old_factor) {
  const double factor = stretch(d);
  for (Stretched& s : computing_[static_cast<std::size_t>(d)]) {
    s.work_left -= static_cast<double>(now_ - s.since) / old_factor;
    s.since = now_;
    const auto i = static_cast<std::size_t>(s.op);
    queue_.push(stretched_end(s.work_left, factor), 0, kOpEnd, s.op, ++ops_[i].end_version);
  }
}

void Run::adjust_memory(DeviceId d, std::int64_t delta) {
  if (delta == 0) return;
  DeviceState& m = devices_[static_cast<std::size_t>(d)];
  if ((m.copies > 1 && __builtin_mul_overflow(delta, std::int64_t{m.copies}, &delta)) ||
      __builtin_add_overflow(m.now, delta, &m.now))
    throw InputError(plan_.origin, fmt::format("/devices/{}", d),
                     "the memory this plan allocates on the device passes 2^63 bytes");
  m.peak = std::max(m.peak, m.now);
  std::int64_t over = m.now - m.capacity;
  if (over > 0) {
    if (!tl_.oom.oom) {
      tl_.oom.oom = true;
      tl_.oom.device = d;
      tl_.oom.time = now_;
    }
    tl_.oom.bytes_over = std::max(tl_.oom.bytes_over, over);
  }
  if (options_.record_memory) tl_.memory.push_back({now_, d, m.now});
}

std::string describe(const Plan& plan, OpId id) {
  const Op& op = plan.ops[static_cast<std::size_t>(id)];
  const auto& st = plan.streams[static_cast<std::size_t>(op.stream)];
  std::string s = fmt::format("op {} {} on {}/{}", id, to_string(op.kind),
                              plan.devices[static_cast<std::size_t>(st.device)].name, st.name);
  if (op.tags.stage >= 0) s += fmt::format(" stage {}", op.tags.stage);
  if (op.tags.microbatch >= 0) s += fmt::format(" mb {}", op.tags.microbatch);
  return s;
}

void Run::report_deadlock() const {
  std::string msg =
      fmt::format("deadlock: {} of {} ops never ran; stuck:", plan_.ops.size() - finished_, plan_.ops.size());
  int shown = 0;
  for (std::size_t s = 0; s < streams_.size() && shown < 8; ++s) {
    const OpId head = streams_[s].head_op;
    if (head < 0) continue;
    msg += fmt::format(" [{} waits for", describe(plan_, head));
    int listed = 0;
    for (OpId d : plan_.ops[static_cast<std::size_t>(head)].deps) {
      if (ops_[static_cast<std::size_t>(d)].finished) continue;
      if (listed++ == 3) {
        msg += " ...";
        break;
      }
      msg += fmt::format(" {};", describe(plan_, d));
    }
    if (listed == 0) msg += " the other members of its collective";
    msg += "]";
    ++shown;
  }
  throw DeadlockError(msg);
}

}  // namespace

Timeline Engine::run(const Plan& plan) const {
  Run r(plan, options_);
  return r.execute();
}

}  // namespace pipesim::sim
