// The issue loop shared by every backend: one thread per plan stream, ops in stream order, each started when
// its dependencies are done (collectives when all their members have arrived), a watchdog that names the
// stuck ops instead of hanging.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend.hpp"
#include "cuda_backend.hpp"
#include "pipesim/replay/replay.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/plan/plan_check.hpp"
#include "transport.hpp"

namespace pipesim::replay {

using sim::OpId;
using sim::Plan;
using sim::TimePoint;

namespace {

constexpr std::size_t kMaxStreams = 4096;  // one thread each

/// Which process runs which streams: one process for the whole plan, or (multi-node, over a transport) one
/// per node, each running the streams of its node's devices and telling the others what they wait for.
struct Placement {
  Transport* transport = nullptr;  // null: one process
  int rank = 0;
  std::vector<int> rank_of_stream;
  std::vector<std::vector<int>> remote_dependents;  // per op: other ranks with ops that depend on it
  std::unordered_map<std::int32_t, std::vector<int>> group_ranks;  // per collective: other ranks with members
  std::int64_t clock_offset_ns = 0;
  bool local(std::size_t stream) const { return !transport || rank_of_stream[stream] == rank; }

  static Placement of(const Plan& plan, Transport* t) {
    Placement p;
    p.transport = t;
    p.rank = t ? t->rank() : 0;
    for (const auto& s : plan.streams)
      p.rank_of_stream.push_back(t ? plan.devices[static_cast<std::size_t>(s.device)].node : 0);
    p.remote_dependents.resize(plan.ops.size());
    if (!t) return p;
    std::unordered_map<std::int32_t, std::vector<int>> members;
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
      const int r = p.rank_of_stream[static_cast<std::size_t>(plan.ops[i].stream)];
      for (OpId d : plan.ops[i].deps) {
        const int dr =
            p.rank_of_stream[static_cast<std::size_t>(plan.ops[static_cast<std::size_t>(d)].stream)];
        auto& v = p.remote_dependents[static_cast<std::size_t>(d)];
        if (dr != r && std::find(v.begin(), v.end(), r) == v.end()) v.push_back(r);
      }
      if (const auto* w = std::get_if<sim::TransferWork>(&plan.ops[i].payload);
          w && w->group >= 0 && w->group_size > 1) {
        auto& v = members[w->group];
        if (std::find(v.begin(), v.end(), r) == v.end()) v.push_back(r);
      }
    }
    for (auto& [g, ranks] : members)
      for (int r : ranks)
        if (r != p.rank) p.group_ranks[g].push_back(r);
    return p;
  }
};

/// One replay of the whole plan (or, multi-node, of this process's part of it).
class Run {
 public:
  Run(const Plan& plan, Backend& backend, double timeout_s, const Placement& placement)
      : plan_(plan),
        backend_(backend),
        timeout_(std::chrono::duration<double>(timeout_s)),
        place_(placement) {
    const std::size_t n = plan.ops.size();
    done_ = std::vector<char>(n, 0);
    stream_ops_.resize(plan.streams.size());
    for (std::size_t i = 0; i < n; ++i) {
      const auto s = static_cast<std::size_t>(plan.ops[i].stream);
      stream_ops_[s].push_back(static_cast<OpId>(i));
      if (place_.local(s)) ++local_total_;
    }
    head_.assign(plan.streams.size(), 0);
    tl_.start.assign(n, -1);
    tl_.end.assign(n, -1);
  }

  /// A message from another node: an op there finished, or a member of a collective arrived.
  void on_message(Transport::Message kind, std::int64_t value) {
    {
      std::lock_guard lock(mutex_);
      if (kind == Transport::Message::kDone && value >= 0 && static_cast<std::size_t>(value) < done_.size())
        done_[static_cast<std::size_t>(value)] = 1;
      else if (kind == Transport::Message::kArrive)
        ++arrived_[static_cast<std::int32_t>(value)];
      ++heard_;
    }
    cv_.notify_all();
  }

  /// Runs this process's streams; op times are on the common steady clock (ns), unset (-1) for other nodes'.
  sim::Timeline execute() {
    std::vector<std::thread> threads;
    threads.reserve(plan_.streams.size());
    for (std::size_t s = 0; s < plan_.streams.size(); ++s)
      if (!stream_ops_[s].empty() && place_.local(s)) threads.emplace_back([this, s] { run_stream(s); });
    // Watchdog: progress is a finished op or a message; none for the timeout means the plan is stuck.
    {
      std::unique_lock lock(mutex_);
      std::size_t seen = finished_ + heard_;
      auto last = std::chrono::steady_clock::now();
      while (finished_ < local_total_ && !abort_) {
        cv_.wait_for(lock, std::chrono::milliseconds(50));
        if (finished_ + heard_ != seen) {
          seen = finished_ + heard_;
          last = std::chrono::steady_clock::now();
        } else if (running_ == 0 && std::chrono::steady_clock::now() - last > timeout_) {
          stuck_ = describe_stuck();
          abort_ = true;
        }
      }
      cv_.notify_all();
    }
    for (auto& t : threads) t.join();
    if (failure_) std::rethrow_exception(failure_);
    if (!stuck_.empty()) throw sim::DeadlockError(stuck_);
    tl_.source = "measured";
    return std::move(tl_);
  }

 private:
  void run_stream(std::size_t s) {
    try {
      for (OpId id : stream_ops_[s]) {
        const auto i = static_cast<std::size_t>(id);
        const sim::Op& op = plan_.ops[i];
        {
          std::unique_lock lock(mutex_);
          cv_.wait(lock, [&] { return abort_ || deps_done(op); });
          if (abort_) return;
          // A collective starts on all its members at once, when the last of them is ready.
          if (const auto* t = std::get_if<sim::TransferWork>(&op.payload);
              t && t->group >= 0 && t->group_size > 1) {
            std::int32_t& arrived = arrived_[t->group];
            if (++arrived == t->group_size) cv_.notify_all();
            if (auto it = place_.group_ranks.find(t->group); it != place_.group_ranks.end())
              for (int r : it->second) place_.transport->send(r, Transport::Message::kArrive, t->group);
            cv_.wait(lock, [&] { return abort_ || arrived >= t->group_size; });
            if (abort_) return;
          }
          const TimePoint t0 = now();
          tl_.start[i] = t0;
          ++running_;  // an op at work always finishes: the watchdog only counts idle time
        }
        backend_.execute(plan_, id);
        {
          std::lock_guard lock(mutex_);
          const TimePoint t1 = now();
          tl_.end[i] = t1;
          done_[i] = 1;
          --running_;
          ++head_[s];
          ++finished_;
        }
        for (int r : place_.remote_dependents[i]) place_.transport->send(r, Transport::Message::kDone, id);
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
      abort_ = true;
      cv_.notify_all();
    }
  }

  TimePoint now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
               .count() -
           place_.clock_offset_ns;
  }

  bool deps_done(const sim::Op& op) const {
    return std::all_of(op.deps.begin(), op.deps.end(),
                       [&](OpId d) { return done_[static_cast<std::size_t>(d)] != 0; });
  }
  /// Each stream's waiting op and what it waits for (caller holds the lock).
  std::string describe_stuck() const {
    std::string out =
        fmt::format("replay made no progress for {:.0f} s; {} of {} ops never ran; stuck:", timeout_.count(),
                    local_total_ - finished_, local_total_);
    int listed = 0;
    for (std::size_t s = 0; s < stream_ops_.size() && listed < 8; ++s) {
      if (head_[s] >= stream_ops_[s].size() || !place_.local(s)) continue;
      const OpId id = stream_ops_[s][head_[s]];
      const sim::Op& op = plan_.ops[static_cast<std::size_t>(id)];
      std::string waits;
      for (OpId d : op.deps)
        if (!done_[static_cast<std::size_t>(d)]) waits += fmt::format(" op {}", d);
      if (waits.empty()) waits = " the other members of its collective";
      out += fmt::format(" [op {} {} on {} waits for{}]", id, sim::to_string(op.kind), plan_.streams[s].name,
                         waits);
      ++listed;
    }
    return out;
  }

  const Plan& plan_;
  Backend& backend_;
  std::chrono::duration<double> timeout_;
  const Placement& place_;
  std::size_t local_total_ = 0, heard_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<char> done_;
  std::vector<std::vector<OpId>> stream_ops_;
  std::vector<std::size_t> head_;
  std::unordered_map<std::int32_t, std::int32_t> arrived_;  // collective group -> members ready
  std::size_t finished_ = 0;
  std::size_t running_ = 0;
  bool abort_ = false;
  std::string stuck_;
  std::exception_ptr failure_;
  sim::Timeline tl_;
};

}  // namespace

/// The plan's memory effects (resident bytes, allocations at op starts, frees at op ends) in measured time
/// order, frees first at equal times: peaks and OOM as the simulator reports them.
void apply_memory(const Plan& plan, sim::Timeline& tl) {
  const std::size_t nd = plan.devices.size();
  std::vector<std::int64_t> now(nd, 0);
  tl.peak_bytes.assign(nd, 0);
  tl.capacity_bytes.assign(nd, 0);
  tl.oom = {};
  auto adjust = [&](std::size_t d, std::int64_t delta, TimePoint at) {
    now[d] += delta;
    tl.peak_bytes[d] = std::max(tl.peak_bytes[d], now[d]);
    const std::int64_t over = now[d] - tl.capacity_bytes[d];
    if (over > 0) {
      if (!tl.oom.oom) tl.oom = {true, static_cast<sim::DeviceId>(d), at, over};
      tl.oom.bytes_over = std::max(tl.oom.bytes_over, over);
    }
  };
  for (std::size_t d = 0; d < nd; ++d) {
    const auto& dev = plan.devices[d];
    tl.capacity_bytes[d] = dev.kind == sim::DeviceKind::kGpu    ? plan.hw.gpu.hbm_bytes
                           : dev.kind == sim::DeviceKind::kHost ? plan.hw.host.dram_bytes
                                                                : plan.hw.host.nvme.bytes;
    adjust(d, dev.resident_bytes, 0);
  }
  struct Change {
    TimePoint at;
    int order;  // 0: a free (op end), 1: an allocation (op start)
    std::size_t op;
  };
  std::vector<Change> changes;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const sim::OpExtras& extras = plan.extras_of(plan.ops[i]);
    if (extras.alloc_bytes != 0) changes.push_back({tl.start[i], 1, i});
    if (extras.free_bytes != 0) changes.push_back({tl.end[i], 0, i});
  }
  std::stable_sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
    return a.at != b.at ? a.at < b.at : a.order < b.order;
  });
  for (const Change& c : changes) {
    const sim::Op& op = plan.ops[c.op];
    const auto d = static_cast<std::size_t>(plan.streams[static_cast<std::size_t>(op.stream)].device);
    const sim::OpExtras& extras = plan.extras_of(op);
    adjust(d, c.order == 1 ? extras.alloc_bytes : -extras.free_bytes, c.at);
  }
}

namespace {

void check_replay_inputs(const Plan& plan, const ReplayOptions& o) {
  if (o.iterations < 1 || o.iterations > 1000)
    throw sim::InputError(sim::Option{"iterations"}, "",
                          fmt::format("{} asked; valid: 1 .. 1000", o.iterations));
  if (!(o.work_scale > 0 && o.work_scale <= 1))
    throw sim::InputError(sim::Option{"work_scale"}, "", "valid: greater than 0, at most 1");
  if (!(o.timeout_s >= 0.1 && o.timeout_s <= 86400))
    throw sim::InputError(sim::Option{"timeout_s"}, "", "valid: 0.1 .. 86400 seconds");
  if (o.backend != "host" && o.backend != "cuda")
    throw sim::InputError(sim::Option{"backend"}, "",
                          fmt::format("unknown backend '{}'; valid: host, cuda", o.backend));
  sim::validate_plan(plan);
  sim::check_plan_order(plan);  // a cycle never runs: refuse it before starting anything
  if (plan.streams.size() > kMaxStreams)
    throw sim::InputError("plan", "/streams",
                          fmt::format("{} streams; the replay runs one thread per stream, valid: at most {}",
                                      plan.streams.size(), kMaxStreams));
}

/// The MPI transport, refused unless it has one process per node of the plan.
std::unique_ptr<Transport> node_transport(const Plan& plan) {
  std::unique_ptr<Transport> transport = make_mpi_transport();
  int nodes = 1;
  for (const auto& st : plan.streams)
    nodes = std::max(nodes, plan.devices[static_cast<std::size_t>(st.device)].node + 1);
  if (transport->ranks() != nodes)
    throw sim::InputError(sim::Option{"mpi"}, "",
                          fmt::format("{} processes for a plan on {} nodes; valid: mpirun -np {}",
                                      transport->ranks(), nodes, nodes));
  return transport;
}

/// Rank 0 collects every node's op times; the others are done.
void gather_op_times(const Plan& plan, const Placement& place, Transport& transport,
                     std::vector<sim::Timeline>& runs) {
  for (auto& tl : runs) {
    std::vector<std::int64_t> mine, all;
    for (std::size_t i = 0; i < plan.ops.size(); ++i)
      if (place.local(static_cast<std::size_t>(plan.ops[i].stream)))
        mine.insert(mine.end(), {static_cast<std::int64_t>(i), tl.start[i], tl.end[i]});
    transport.gather(mine, all);
    for (std::size_t k = 0; k + 2 < all.size(); k += 3) {
      tl.start[static_cast<std::size_t>(all[k])] = all[k + 1];
      tl.end[static_cast<std::size_t>(all[k])] = all[k + 2];
    }
  }
}

/// The host backend's measured iterations (after one warm-up); multi-node, only rank 0's are whole and
/// result.root says which this is.
std::vector<sim::Timeline> run_host_replay(const Plan& plan, const ReplayOptions& o, ReplayResult& result) {
  std::vector<sim::Timeline> runs;
  // Multi-node: the listener hands other nodes' messages to the run in progress (declared before the
  // transport, whose destructor stops the listener).
  std::mutex current_mutex;
  Run* current = nullptr;
  std::unique_ptr<Transport> transport;
  if (o.mpi) transport = node_transport(plan);
  Placement place = Placement::of(plan, transport.get());
  if (transport) {
    place.clock_offset_ns = transport->clock_offset_ns();
    transport->listen([&](Transport::Message kind, std::int64_t value) {
      std::lock_guard lock(current_mutex);
      if (current) current->on_message(kind, value);
    });
  }
  const std::unique_ptr<Backend> backend = make_host_backend(plan, o.work_scale, transport.get());
  backend->describe(result.environment);
  auto run_once = [&] {
    Run run(plan, *backend, o.timeout_s, place);
    {
      std::lock_guard lock(current_mutex);
      current = &run;
    }
    if (transport) transport->barrier();  // every node has its run before any message of it is sent
    sim::Timeline tl = run.execute();
    if (transport) transport->barrier();  // and every message of it was consumed before the next
    std::lock_guard lock(current_mutex);
    current = nullptr;
    return tl;
  };
  run_once();  // warm-up: first touches, thread start-up
  for (int k = 0; k < o.iterations; ++k) runs.push_back(run_once());
  if (transport) {
    gather_op_times(plan, place, *transport, runs);
    result.environment.backend = fmt::format("host, {} nodes over MPI", transport->ranks());
    result.root = transport->rank() == 0;
  }
  return runs;
}

}  // namespace

ReplayResult replay_plan(const Plan& plan, const ReplayOptions& o) {
  check_replay_inputs(plan, o);
  ReplayResult result;
  result.environment.backend = o.backend;
  result.environment.work_scale = o.work_scale;
  result.environment.threads = static_cast<int>(plan.streams.size());
  std::vector<sim::Timeline> runs;
  if (o.backend == "cuda") {
    if (o.mpi)
      throw sim::InputError(sim::Option{"mpi"}, "",
                            ("multi-node replay runs the host backend; valid: " +
                             sim::spelled(sim::Option{"backend"}) + " host"));
    runs = run_cuda_replay(plan, o, result.environment);
  } else {
    runs = run_host_replay(plan, o, result);
    if (!result.root) return result;
  }
  // Times from the first op's start.
  for (auto& tl : runs) {
    TimePoint origin = std::numeric_limits<TimePoint>::max();
    for (TimePoint t : tl.start) origin = std::min(origin, t);
    for (auto& t : tl.start) t -= origin;
    for (auto& t : tl.end) t -= origin;
  }
  for (const auto& tl : runs) {
    TimePoint end = 0;
    for (TimePoint t : tl.end) end = std::max(end, t);
    result.environment.iteration_s.push_back(static_cast<double>(end) / 1e9 / o.work_scale);
  }
  // The run with the median makespan stands for the measurement.
  std::vector<std::size_t> order(runs.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return result.environment.iteration_s[a] < result.environment.iteration_s[b];
  });
  result.timeline = std::move(runs[order[order.size() / 2]]);
  // Scaled-down work stands for the whole: times scale back up by 1 / work_scale.
  auto unscale = [&](TimePoint t) { return static_cast<TimePoint>(static_cast<double>(t) / o.work_scale); };
  for (auto& t : result.timeline.start) t = unscale(t);
  for (auto& t : result.timeline.end) t = unscale(t);
  // A backend that measured its GPUs' memory (the CUDA pools) reports that peak instead of the plan's
  // accounting in measured order.
  const std::vector<std::int64_t> measured_peak = result.timeline.peak_bytes;
  apply_memory(plan, result.timeline);
  for (std::size_t d = 0; d < measured_peak.size() && d < result.timeline.peak_bytes.size(); ++d)
    if (measured_peak[d] >= 0) result.timeline.peak_bytes[d] = measured_peak[d];
  result.timeline.source = "measured (" + result.environment.backend + ")";
  return result;
}

std::string environment_json(const ReplayEnvironment& e) {
  nlohmann::ordered_json j{
      {"backend", e.backend},       {"host", e.host},
      {"threads", e.threads},       {"compute_gflops_per_thread", e.compute_gflops_per_thread},
      {"work_scale", e.work_scale}, {"iteration_s", e.iteration_s}};
  if (!e.timing.empty()) j["timing"] = e.timing;
  return pipesim::sim::json_text(j);
}

}  // namespace pipesim::replay
