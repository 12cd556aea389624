// The issue loop shared by every backend: one thread per plan stream, ops in stream order, each started when
// its dependencies are done (collectives when all their members have arrived), a watchdog that names the
// stuck ops instead of hanging.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend.hpp"
#include "cuda_backend.hpp"
#include "pipesim/replay/replay.hpp"
#include "pipesim/sim/error.hpp"
#include "pipesim/sim/plan_check.hpp"

namespace pipesim::replay {

using sim::OpId;
using sim::Plan;
using sim::TimePoint;

namespace {

constexpr std::size_t kMaxStreams = 4096;  // one thread each

TimePoint now_ns(std::chrono::steady_clock::time_point origin) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin).count();
}

/// One replay of the whole plan.
class Run {
 public:
  Run(const Plan& plan, Backend& backend, double timeout_s)
      : plan_(plan), backend_(backend), timeout_(std::chrono::duration<double>(timeout_s)) {
    const std::size_t n = plan.ops.size();
    done_ = std::vector<char>(n, 0);
    stream_ops_.resize(plan.streams.size());
    for (std::size_t i = 0; i < n; ++i)
      stream_ops_[static_cast<std::size_t>(plan.ops[i].stream)].push_back(static_cast<OpId>(i));
    head_.assign(plan.streams.size(), 0);
    tl_.start.assign(n, -1);
    tl_.end.assign(n, -1);
  }

  sim::Timeline execute() {
    origin_ = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    threads.reserve(plan_.streams.size());
    for (std::size_t s = 0; s < plan_.streams.size(); ++s)
      if (!stream_ops_[s].empty()) threads.emplace_back([this, s] { run_stream(s); });
    // Watchdog: progress is a finished op; none for the timeout means the plan is stuck.
    {
      std::unique_lock lock(mutex_);
      std::size_t seen = finished_;
      auto last = std::chrono::steady_clock::now();
      while (finished_ < plan_.ops.size() && !abort_) {
        cv_.wait_for(lock, std::chrono::milliseconds(50));
        if (finished_ != seen) {
          seen = finished_;
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
          if (const auto* t = std::get_if<sim::TransferWork>(&op.payload); t && t->group >= 0 && t->group_size > 1) {
            std::int32_t& arrived = arrived_[t->group];
            if (++arrived == t->group_size) cv_.notify_all();
            cv_.wait(lock, [&] { return abort_ || arrived >= t->group_size; });
            if (abort_) return;
          }
          const TimePoint t0 = now_ns(origin_);
          tl_.start[i] = t0;
          ++running_;  // an op at work always finishes: the watchdog only counts idle time
        }
        backend_.execute(plan_, id);
        {
          std::lock_guard lock(mutex_);
          const TimePoint t1 = now_ns(origin_);
          tl_.end[i] = t1;
          done_[i] = 1;
          --running_;
          ++head_[s];
          ++finished_;
        }
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
      abort_ = true;
      cv_.notify_all();
    }
  }

  bool deps_done(const sim::Op& op) const {
    return std::all_of(op.deps.begin(), op.deps.end(), [&](OpId d) { return done_[static_cast<std::size_t>(d)] != 0; });
  }
  /// Each stream's waiting op and what it waits for (caller holds the lock).
  std::string describe_stuck() const {
    std::string out = fmt::format("replay made no progress for {:.0f} s; {} of {} ops never ran; stuck:",
                                  timeout_.count(), plan_.ops.size() - finished_, plan_.ops.size());
    int listed = 0;
    for (std::size_t s = 0; s < stream_ops_.size() && listed < 8; ++s) {
      if (head_[s] >= stream_ops_[s].size()) continue;
      const OpId id = stream_ops_[s][head_[s]];
      const sim::Op& op = plan_.ops[static_cast<std::size_t>(id)];
      std::string waits;
      for (OpId d : op.deps)
        if (!done_[static_cast<std::size_t>(d)]) waits += fmt::format(" op {}", d);
      if (waits.empty()) waits = " the other members of its collective";
      out += fmt::format(" [op {} {} on {} waits for{}]", id, sim::to_string(op.kind),
                         plan_.streams[s].name, waits);
      ++listed;
    }
    return out;
  }

  const Plan& plan_;
  Backend& backend_;
  std::chrono::duration<double> timeout_;
  std::chrono::steady_clock::time_point origin_;
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
    if (plan.ops[i].alloc_bytes != 0) changes.push_back({tl.start[i], 1, i});
    if (plan.ops[i].free_bytes != 0) changes.push_back({tl.end[i], 0, i});
  }
  std::stable_sort(changes.begin(), changes.end(),
                   [](const Change& a, const Change& b) { return a.at != b.at ? a.at < b.at : a.order < b.order; });
  for (const Change& c : changes) {
    const sim::Op& op = plan.ops[c.op];
    const auto d = static_cast<std::size_t>(plan.streams[static_cast<std::size_t>(op.stream)].device);
    adjust(d, c.order == 1 ? op.alloc_bytes : -op.free_bytes, c.at);
  }
}

ReplayResult replay_plan(const Plan& plan, const ReplayOptions& o) {
  if (o.iterations < 1 || o.iterations > 1000)
    throw sim::InputError("--iterations", "", fmt::format("{} asked; valid: 1 .. 1000", o.iterations));
  if (!(o.work_scale > 0 && o.work_scale <= 1))
    throw sim::InputError("--work-scale", "", "valid: greater than 0, at most 1");
  if (!(o.timeout_s >= 0.1 && o.timeout_s <= 86400))
    throw sim::InputError("--timeout-s", "", "valid: 0.1 .. 86400 seconds");
  if (o.backend != "host" && o.backend != "cuda")
    throw sim::InputError("--backend", "", fmt::format("unknown backend '{}'; valid: host, cuda", o.backend));
  sim::validate_plan(plan);
  sim::check_plan_order(plan);  // a cycle never runs: refuse it before starting anything
  if (plan.streams.size() > kMaxStreams)
    throw sim::InputError("plan", "/streams",
                          fmt::format("{} streams; the replay runs one thread per stream, valid: at most {}",
                                      plan.streams.size(), kMaxStreams));
  ReplayResult result;
  result.environment.backend = o.backend;
  result.environment.work_scale = o.work_scale;
  result.environment.threads = static_cast<int>(plan.streams.size());
  std::vector<sim::Timeline> runs;
  if (o.backend == "cuda") {
    runs = run_cuda_replay(plan, o, result.environment);
  } else {
    const std::unique_ptr<Backend> backend = make_host_backend(plan, o.work_scale);
    backend->describe(result.environment);
    Run(plan, *backend, o.timeout_s).execute();  // warm-up: first touches, thread start-up
    for (int k = 0; k < o.iterations; ++k) runs.push_back(Run(plan, *backend, o.timeout_s).execute());
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
  apply_memory(plan, result.timeline);
  result.timeline.source = "measured (" + o.backend + ")";
  return result;
}

std::string environment_json(const ReplayEnvironment& e) {
  nlohmann::ordered_json j{{"backend", e.backend},
                           {"host", e.host},
                           {"threads", e.threads},
                           {"compute_gflops_per_thread", e.compute_gflops_per_thread},
                           {"work_scale", e.work_scale},
                           {"iteration_s", e.iteration_s}};
  return j.dump();
}

}  // namespace pipesim::replay
