#include "pipesim/sim/engine/engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "engine/event_queue.hpp"
#include "engine/run.hpp"
#include "hardware/flow_network.hpp"
#include "hardware/topology.hpp"
#include "pipesim/sim/core/error.hpp"

namespace pipesim::sim {

namespace {

enum EventType : std::int32_t { kOpEnd = 0, kFlowDone = 1 };

/// The event loop of one run, on the state read from the plan. In this file's anonymous namespace, so that
/// its member functions have internal linkage: GCC then inlines the ones called from one place (finish,
/// start_other, end_other) into the loop, which it does not for a function another file could call.
class Run : detail::RunState {
 public:
  Run(const Plan& plan, const EngineOptions& options) : RunState(plan, options) {}

  Timeline execute();

 private:
  /// Sets each device's capacity, cores and resident memory.
  void setup_devices();
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
  /// One of `d`'s dependencies ended: it starts once none is left.
  void release(OpId d) {
    if (--ops_[static_cast<std::size_t>(d)].deps_left == 0) try_start(d);
  }
};

void Run::setup_devices() {
  const std::size_t nd = plan_.devices.size();
  devices_.assign(nd, {});
  cores_free_.assign(nd, 0);
  cpu_waiting_.resize(nd);
  for (std::size_t d = 0; d < nd; ++d) {
    const auto& dev = plan_.devices[d];
    devices_[d].capacity = dev.kind == DeviceKind::kGpu    ? plan_.gpu_tensor_capacity()
                           : dev.kind == DeviceKind::kHost ? plan_.hw.host.dram_bytes
                                                           : plan_.hw.host.nvme.bytes;
    if (dev.kind != DeviceKind::kGpu) devices_[d].copies = std::max(1, plan_.meta.node_twins);
    cores_free_[d] = dev.kind == DeviceKind::kHost ? plan_.hw.host.cores : 0;
    adjust_memory(static_cast<DeviceId>(d), dev.resident_bytes);
  }
}

Timeline Run::execute() {
  read_plan();
  setup_devices();
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
    h.duration = t.latency_ns >= 0 ? t.latency_ns : p.latency * t.latency_steps;
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
