#include "pipesim/trace_import/host_wait.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace pipesim::trace_import {

namespace {

/// Events of `starts` (sorted) that start in (from, to].
double count_between(const std::vector<double>& starts, double from, double to) {
  const auto a = std::upper_bound(starts.begin(), starts.end(), from);
  const auto b = std::upper_bound(starts.begin(), starts.end(), to);
  return static_cast<double>(b - a);
}

/// The time a set of spans covers (overlaps counted once), asked of one stretch after another: the spans
/// merged and sorted, with the time each one's start has behind it.
class Coverage {
 public:
  explicit Coverage(const std::vector<CpuSpan>& spans) {
    std::vector<std::pair<double, double>> v;
    for (const CpuSpan& s : spans) v.emplace_back(s.ts, s.ts + s.dur);
    std::sort(v.begin(), v.end());
    for (const auto& [b, e] : v) {
      if (!merged_.empty() && b <= merged_.back().second) {
        merged_.back().second = std::max(merged_.back().second, e);
      } else {
        merged_.emplace_back(b, e);
      }
    }
    before_.reserve(merged_.size());
    double total = 0;
    for (const auto& [b, e] : merged_) {
      before_.push_back(total);
      total += e - b;
    }
  }
  /// The covered time inside [from, to].
  double inside(double from, double to) const { return upto(to) - upto(from); }

 private:
  double upto(double t) const {
    const auto it =
        std::upper_bound(merged_.begin(), merged_.end(), t,
                         [](double x, const std::pair<double, double>& s) { return x < s.first; });
    if (it == merged_.begin()) return 0;
    const auto i = static_cast<std::size_t>(it - merged_.begin()) - 1;
    return before_[i] + std::min(t, merged_[i].second) - merged_[i].first;
  }
  std::vector<std::pair<double, double>> merged_;
  std::vector<double> before_;
};

}  // namespace

HostWait replay_host(const KinetoTrace& trace, const ProfilerCost& cost) {
  HostWait out;
  out.before.assign(trace.gpu.size(), 0.0);
  // The GPU work of each launch, in the order it ran.
  std::unordered_map<std::int64_t, std::vector<const GpuActivity*>> work_of;
  for (const GpuActivity& a : trace.gpu) work_of[a.correlation].push_back(&a);
  for (auto& [correlation, work] : work_of)
    std::sort(work.begin(), work.end(),
              [](const GpuActivity* a, const GpuActivity* b) { return a->ts < b->ts; });
  // The calls the replay follows: the launches of that work, and the waits for the GPU made on the threads
  // that launch (another thread's wait holds up no launch).
  std::unordered_set<std::int64_t> launching;
  std::vector<const Launch*> calls;
  for (const Launch& l : trace.launches)
    if (work_of.count(l.correlation) > 0) {
      calls.push_back(&l);
      launching.insert(l.tid);
    }
  for (const Launch& l : trace.launches)
    if (l.sync && work_of.count(l.correlation) == 0 && launching.count(l.tid) > 0) calls.push_back(&l);
  if (calls.empty()) return out;
  std::stable_sort(calls.begin(), calls.end(),
                   [](const Launch* a, const Launch* b) { return a->ts < b->ts; });
  // What the profiler recorded on those threads, by start.
  std::vector<double> ops, frames;
  for (const CpuMark& m : trace.marks)
    if (launching.count(trace.threads[static_cast<std::size_t>(m.thread)]) > 0)
      (m.kind == CpuMark::Kind::kPythonFrame ? frames : ops).push_back(m.ts);
  std::sort(ops.begin(), ops.end());
  std::sort(frames.begin(), frames.end());
  const Coverage profiler_work(trace.overhead);

  constexpr double kNever = -std::numeric_limits<double>::infinity();
  double cpu = 0;                       // the replayed CPU's clock
  double traced = calls.front()->ts;    // the trace's clock, as far as the replay has read it
  double gpu_free = kNever, first = 0;  // when the GPU has finished all it was given; its first start
  std::unordered_map<std::int64_t, double> stream_free;
  for (const Launch* l : calls) {
    if (l->ts > traced) {
      const double own = (l->ts - traced) - cost.op_us * count_between(ops, traced, l->ts) -
                         cost.python_us * count_between(frames, traced, l->ts) -
                         profiler_work.inside(traced, l->ts);
      cpu += std::max(0.0, own);
      out.cpu_us += std::max(0.0, own);
      traced = l->ts;
    }
    if (l->sync) {  // the CPU goes on when the GPU is done; the call's traced time was the wait
      cpu = std::max(cpu, gpu_free);
      traced = std::max(traced, l->ts + l->dur);
      continue;
    }
    ++out.launches;
    for (const GpuActivity* a : work_of[l->correlation]) {
      double& free = stream_free.try_emplace(a->stream, kNever).first->second;
      const double start = std::max(cpu, free);
      if (gpu_free == kNever) {
        first = start;
      } else if (start > gpu_free) {
        out.before[static_cast<std::size_t>(a - trace.gpu.data())] = start - gpu_free;
        out.wait_us += start - gpu_free;
      }
      free = start + a->dur;
      gpu_free = std::max(gpu_free, free);
    }
  }
  out.step_us = gpu_free - first;
  return out;
}

}  // namespace pipesim::trace_import
