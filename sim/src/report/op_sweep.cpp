#include "report/op_sweep.hpp"

#include <algorithm>
#include <future>
#include <system_error>
#include <thread>

namespace pipesim::sim {

namespace {

/// From this many ops on, the plan is swept in two halves on two cores (below it a thread costs more than it
/// saves).
constexpr std::size_t kSplitOps = std::size_t{1} << 17;

/// Charges each GPU's idle time to what it waited for (see time_breakdown.hpp).
class Attribution {
 public:
  explicit Attribution(const SweepContext& ctx) : ctx_(ctx), plan_(ctx.plan) {}

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
  void charge_wait(TimePoint from, TimePoint to, OpId dep, BreakdownTally& t) const {
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
  /// Charges the wait before op `id`, whose GPU's accounted time has reached `from`.
  void charge_op(TimePoint from, OpId id, BreakdownTally& t) const {
    charge_wait(from, start(id), critical_dep(id), t);
  }

  TimePoint start(OpId i) const { return ctx_.tl.start[static_cast<std::size_t>(i)]; }
  TimePoint end(OpId i) const { return ctx_.tl.end[static_cast<std::size_t>(i)]; }

 private:
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
    if (const Cause c = ctx_.named[static_cast<std::size_t>(op.stream)]; c != Cause::kOther) return c;
    if (is_collective(op.kind) && !ctx_.roles[static_cast<std::size_t>(op.stream)].compute)
      return Cause::kDataParallel;
    return Cause::kPipeline;  // another GPU's compute, its TP collectives, or a p2p transfer
  }

  const SweepContext& ctx_;
  const Plan& plan_;
};

}  // namespace

OpSweep sweep_ops(const SweepContext& ctx, std::size_t begin, std::size_t end) {
  const Plan& plan = ctx.plan;
  const Timeline& tl = ctx.tl;
  const Attribution a(ctx);
  const std::size_t nd = plan.devices.size();
  OpSweep s;
  s.iteration_end.assign(static_cast<std::size_t>(ctx.iterations), 0);
  s.busy.assign(nd, 0);
  s.first_compute_start.assign(nd, std::numeric_limits<TimePoint>::max());
  s.last_compute_end.assign(nd, -1);
  s.first_compute.assign(nd, -1);
  s.at.assign(nd, 0);
  s.last_other.assign(nd, -1);
  BreakdownTally& t = s.tally;
  for (std::size_t i = begin; i < end; ++i) {
    const Op& op = plan.ops[i];
    const TimePoint op_start = tl.start[i], op_end = tl.end[i];
    s.first = std::min(s.first, op_start);
    s.last = std::max(s.last, op_end);
    const StreamRole& role = ctx.roles[static_cast<std::size_t>(op.stream)];
    // An iteration ends with the main job's last op of it: a fill chunk carries the iteration of the bubble
    // it fills, and one in a GPU's last bubble runs on to the end of the whole run.
    if (!role.fill) {
      const auto it = static_cast<std::size_t>(std::clamp(op.tags.iteration, 0, ctx.iterations - 1));
      s.iteration_end[it] = std::max(s.iteration_end[it], op_end);
    }
    if (std::holds_alternative<CpuWork>(op.payload)) s.cpu.push_back({op_start, op_end});
    const auto d = static_cast<std::size_t>(role.device);
    const auto id = static_cast<OpId>(i);
    if (!role.compute) {
      // What the time after the GPU's last compute op waits for.
      if (s.last_other[d] < 0 || op_end > a.end(s.last_other[d])) s.last_other[d] = id;
      continue;
    }
    s.busy[d] += op_end - op_start;
    s.first_compute_start[d] = std::min(s.first_compute_start[d], op_start);
    s.last_compute_end[d] = std::max(s.last_compute_end[d], op_end);
    if (!role.on_gpu) continue;
    // Each GPU's compute-stream ops are charged in plan order, which is their stream's run order (a serial
    // FIFO), keeping where the GPU's accounted time has reached. The wait before its first op in the range
    // is charged on merging, when the ranges before it are known.
    if (s.first_compute[d] < 0) {
      s.first_compute[d] = id;
      s.at[d] = op_end;
    } else {
      a.charge_op(s.at[d], id, t);
      s.at[d] = std::max(s.at[d], op_end);
    }
    const Duration run = op_end - op_start;
    if (op.kind == OpKind::kOptimizer)
      t.optimizer += run;
    else if (op.kind == OpKind::kP2P)
      t.pp += run;  // a blocking send holds the compute stream
    else if (is_collective(op.kind))
      t.tp += run;
    else
      t.kernels += run;
  }
  return s;
}

bool merge_sweeps(const SweepContext& ctx, OpSweep& into, const OpSweep& later) {
  const Attribution a(ctx);
  into.first = std::min(into.first, later.first);
  into.last = std::max(into.last, later.last);
  for (std::size_t i = 0; i < into.iteration_end.size(); ++i)
    into.iteration_end[i] = std::max(into.iteration_end[i], later.iteration_end[i]);
  into.cpu.insert(into.cpu.end(), later.cpu.begin(), later.cpu.end());
  BreakdownTally& t = into.tally;
  const BreakdownTally& u = later.tally;
  t.kernels += u.kernels, t.tp += u.tp, t.optimizer += u.optimizer, t.bubble += u.bubble, t.pp += u.pp;
  t.dp += u.dp, t.cp += u.cp, t.offload += u.offload, t.other += u.other;
  for (std::size_t d = 0; d < into.busy.size(); ++d) {
    into.busy[d] += later.busy[d];
    into.first_compute_start[d] = std::min(into.first_compute_start[d], later.first_compute_start[d]);
    into.last_compute_end[d] = std::max(into.last_compute_end[d], later.last_compute_end[d]);
    if (const OpId next = later.first_compute[d]; next >= 0) {
      if (into.first_compute[d] < 0) {
        into.first_compute[d] = next;
      } else {
        if (into.at[d] > a.end(next)) return false;
        a.charge_op(into.at[d], next, t);
      }
      into.at[d] = later.at[d];
    }
    const OpId other = later.last_other[d];
    if (other >= 0 && (into.last_other[d] < 0 || a.end(other) > a.end(into.last_other[d])))
      into.last_other[d] = other;
  }
  return true;
}

SweepContext::SweepContext(const Plan& p, const Timeline& timeline)
    : plan(p), tl(timeline), roles(stream_roles(p)), iterations(std::max(1, p.meta.iterations)) {
  named.reserve(p.streams.size());
  for (const Stream& s : p.streams)
    named.push_back(s.name == kContextParallelStream  ? Cause::kContextParallel
                    : s.name == kTensorParallelStream ? Cause::kTensorParallel
                                                      : Cause::kOther);
}

OpSweep sweep_plan(const SweepContext& ctx) {
  const std::size_t n = ctx.plan.ops.size();
  if (n < kSplitOps || std::thread::hardware_concurrency() < 2) return sweep_ops(ctx, 0, n);
  std::future<OpSweep> second;
  try {
    second = std::async(std::launch::async, [&ctx, n] { return sweep_ops(ctx, n / 2, n); });
  } catch (const std::system_error&) {
    return sweep_ops(ctx, 0, n);  // no thread to be had (a thread or memory limit)
  }
  OpSweep s = sweep_ops(ctx, 0, n / 2);
  if (!merge_sweeps(ctx, s, second.get())) return sweep_ops(ctx, 0, n);
  return s;
}

TimeBreakdown breakdown_of(const SweepContext& ctx, const OpSweep& s) {
  TimeBreakdown out;
  if (ctx.plan.ops.empty()) return out;
  const Attribution a(ctx);
  BreakdownTally t = s.tally;
  std::int64_t gpus = 0;
  for (std::size_t d = 0; d < s.first_compute.size(); ++d) {
    const OpId first_op = s.first_compute[d];
    if (first_op < 0) continue;
    ++gpus;
    // Each GPU's time is accounted from the run's start; its accounted time has reached at least there.
    a.charge_op(s.first, first_op, t);
    TimePoint at = std::max(s.at[d], s.first);
    // After its last compute op the GPU waits for its own transfers and collectives to finish, then for the
    // other GPUs.
    const OpId tail = s.last_other[d];
    if (tail >= 0 && a.end(tail) > at) {
      a.charge_wait(at, a.end(tail), tail, t);
      at = a.end(tail);
    }
    t.bubble += s.last - at;
  }
  if (gpus == 0 || s.last <= s.first) return out;
  const double total = static_cast<double>(gpus) * static_cast<double>(s.last - s.first);
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
