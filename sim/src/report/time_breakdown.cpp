#include "pipesim/sim/time_breakdown.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "report/stream_roles.hpp"

namespace pipesim::sim {

namespace {

enum class Cause { kPipeline, kTensorParallel, kDataParallel, kContextParallel, kOffload, kOther };

/// Shares accumulated in nanoseconds, turned into fractions at the end.
struct Tally {
  Duration kernels = 0, tp = 0, optimizer = 0, bubble = 0, pp = 0, dp = 0, cp = 0, offload = 0, other = 0;
};

class Attribution {
 public:
  Attribution(const Plan& plan, const Timeline& tl) : plan_(plan), tl_(tl), roles_(stream_roles(plan)) {
    // Streams named for context or tensor parallelism, looked up once: a wait is charged per compute op.
    named_.reserve(plan.streams.size());
    for (const Stream& s : plan.streams)
      named_.push_back(s.name == kContextParallelStream  ? Cause::kContextParallel
                       : s.name == kTensorParallelStream ? Cause::kTensorParallel
                                                         : Cause::kOther);
  }

  /// The dependency of `op` that finished last, looking through zero-time markers; -1 when none.
  OpId critical_dep(OpId op) const {
    for (int depth = 0; depth < 8 && op >= 0; ++depth) {
      OpId best = -1;
      for (OpId d : plan_.ops[static_cast<std::size_t>(op)].deps)
        if (best < 0 || end(d) > end(best)) best = d;
      if (best < 0 || end(best) > start(best)) return best;
      op = best;  // a marker: what it waited for
    }
    return -1;
  }

  /// Charges the idle span [from, to) before an op whose last dependency is `dep`.
  void charge_wait(TimePoint from, TimePoint to, OpId dep, Tally& t) const {
    if (to <= from) return;
    const Duration span = to - from;
    switch (cause(dep)) {
      case Cause::kPipeline: {
        if (dep >= 0 && plan_.ops[static_cast<std::size_t>(dep)].kind == OpKind::kP2P) {
          const Duration wire = std::clamp<Duration>(to - start(dep), 0, span);
          t.pp += wire;
          t.bubble += span - wire;
        } else {
          t.bubble += span;
        }
        break;
      }
      case Cause::kTensorParallel:  // the exposed part of a TP collective that overlapped the backward
        t.tp += span;
        break;
      case Cause::kDataParallel:
        t.dp += span;
        break;
      case Cause::kContextParallel:
        t.cp += span;
        break;
      case Cause::kOffload:
        t.offload += span;
        break;
      case Cause::kOther:
        t.other += span;
        break;
    }
  }

  Cause cause(OpId dep) const {
    if (dep < 0) return Cause::kOther;
    const Op& op = plan_.ops[static_cast<std::size_t>(dep)];
    if (std::holds_alternative<CpuWork>(op.payload)) return Cause::kOffload;
    switch (op.kind) {
      case OpKind::kH2D:
      case OpKind::kD2H:
      case OpKind::kNvmeRead:
      case OpKind::kNvmeWrite:
        return Cause::kOffload;
      case OpKind::kFill:
      case OpKind::kContextSwitch:
        return Cause::kOther;
      default:
        break;
    }
    if (const Cause c = named_[static_cast<std::size_t>(op.stream)]; c != Cause::kOther) return c;
    if (is_collective(op.kind) && !roles_[static_cast<std::size_t>(op.stream)].compute)
      return Cause::kDataParallel;
    return Cause::kPipeline;  // another GPU's compute, its TP collectives, or a p2p transfer
  }

  TimePoint start(OpId i) const { return tl_.start[static_cast<std::size_t>(i)]; }
  TimePoint end(OpId i) const { return tl_.end[static_cast<std::size_t>(i)]; }
  const std::vector<StreamRole>& roles() const { return roles_; }

 private:
  const Plan& plan_;
  const Timeline& tl_;
  std::vector<Cause> named_;  // per stream: kContextParallel, kTensorParallel or kOther (no such name)
  std::vector<StreamRole> roles_;
};

}  // namespace

TimeBreakdown compute_time_breakdown(const Plan& plan, const Timeline& tl) {
  TimeBreakdown out;
  if (plan.ops.empty()) return out;
  TimePoint first = std::numeric_limits<TimePoint>::max(), last = 0;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    first = std::min(first, tl.start[i]);
    last = std::max(last, tl.end[i]);
  }
  const Attribution a(plan, tl);
  // Each GPU's compute-stream ops are charged in plan order, which is their stream's run order (a serial
  // FIFO), keeping where each GPU's accounted time has reached; the latest-ending of a GPU's other ops is
  // what the time after its last compute op waits for. Every share is a sum of integers: the order in which
  // the GPUs interleave does not change it.
  const std::size_t nd = plan.devices.size();
  std::vector<TimePoint> at(nd, first);
  std::vector<char> computes(nd, 0);
  std::vector<OpId> last_other(nd, -1);
  Tally t;
  const std::vector<StreamRole>& roles = a.roles();
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    const StreamRole& s = roles[static_cast<std::size_t>(op.stream)];
    const auto d = static_cast<std::size_t>(s.device);
    const auto id = static_cast<OpId>(i);
    if (!s.compute) {
      if (last_other[d] < 0 || tl.end[i] > a.end(last_other[d])) last_other[d] = id;
      continue;
    }
    if (!s.on_gpu) continue;
    computes[d] = 1;
    a.charge_wait(at[d], a.start(id), a.critical_dep(id), t);
    const Duration run = a.end(id) - a.start(id);
    if (op.kind == OpKind::kOptimizer)
      t.optimizer += run;
    else if (op.kind == OpKind::kP2P)
      t.pp += run;  // a blocking send holds the compute stream
    else if (is_collective(op.kind))
      t.tp += run;
    else
      t.kernels += run;
    at[d] = std::max(at[d], a.end(id));
  }
  std::int64_t gpus = 0;
  for (std::size_t d = 0; d < nd; ++d) {
    if (!computes[d]) continue;
    ++gpus;
    // After its last compute op the GPU waits for its own transfers and collectives to finish, then for the
    // other GPUs.
    const OpId tail = last_other[d];
    if (tail >= 0 && a.end(tail) > at[d]) {
      a.charge_wait(at[d], a.end(tail), tail, t);
      at[d] = a.end(tail);
    }
    t.bubble += last - at[d];
  }
  if (gpus == 0 || last <= first) return out;
  const double total = static_cast<double>(gpus) * static_cast<double>(last - first);
  auto share = [&](Duration v) { return static_cast<double>(v) / total; };
  out.kernels = share(t.kernels);
  out.tp_comm = share(t.tp);
  out.optimizer = share(t.optimizer);
  out.pipeline_bubble = share(t.bubble);
  out.pp_comm = share(t.pp);
  out.dp_comm = share(t.dp);
  out.cp_comm = share(t.cp);
  out.offload = share(t.offload);
  out.other = share(t.other);
  return out;
}

}  // namespace pipesim::sim
