// One pass over a range of a plan's ops that gathers what the metrics and the time breakdown both read of
// each op. At thousands of GPUs the plan is hundreds of megabytes: it is read once, in two halves on two
// cores, instead of whole by two passes. Sweeps of consecutive ranges merge into exactly what one sweep of
// the whole plan gives: every total is a sum of integers, a minimum or a maximum, and each GPU's first
// compute op in a range is charged once the ranges before it are known.
#pragma once

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan.hpp"
#include "pipesim/sim/report/time_breakdown.hpp"
#include "report/stream_roles.hpp"

namespace pipesim::sim {

/// What a GPU's idle time is charged to.
enum class Cause : std::uint8_t {
  kPipeline,
  kTensorParallel,
  kDataParallel,
  kContextParallel,
  kOffload,
  kOther
};

/// What a sweep reads besides the ops, looked up once per plan.
struct SweepContext {
  SweepContext(const Plan& plan, const Timeline& timeline);

  const Plan& plan;
  const Timeline& tl;
  std::vector<StreamRole> roles;
  std::vector<Cause> named;     ///< per stream: kContextParallel, kTensorParallel or kOther (no such name)
  std::int32_t iterations = 1;  ///< the plan's iterations, at least 1
};

/// Idle time charged so far, in nanoseconds, by cause.
struct BreakdownTally {
  Duration kernels = 0, tp = 0, optimizer = 0, bubble = 0, pp = 0, dp = 0, cp = 0, offload = 0, other = 0;

  bool operator==(const BreakdownTally&) const = default;
};

struct OpSweep {
  TimePoint first = std::numeric_limits<TimePoint>::max(), last = 0;  ///< span of the ops swept
  std::vector<TimePoint> iteration_end;                               ///< per iteration: its last end
  // Per device, over its compute streams: busy time, first start (max: none) and last end (-1: none).
  std::vector<Duration> busy;
  std::vector<TimePoint> first_compute_start, last_compute_end;
  std::vector<std::pair<TimePoint, TimePoint>> cpu;  ///< the CPU ops' intervals, in plan order
  // The time breakdown, per GPU: its first compute op in the range (its wait is charged on merging; -1:
  // none), where its accounted time has reached after the range, and its latest-ending other op (-1: none).
  BreakdownTally tally;
  std::vector<OpId> first_compute;
  std::vector<TimePoint> at;
  std::vector<OpId> last_other;

  bool operator==(const OpSweep&) const = default;
};

/// Sweeps ops [begin, end).
OpSweep sweep_ops(const SweepContext& ctx, std::size_t begin, std::size_t end);
/// Adds the sweep of the ops after `into`'s to it. False when a GPU's first compute op in `later` ended
/// before the compute ops it follows in `into` (compute streams that overlap), which the later sweep's
/// accounting did not assume: the plan is then swept whole instead.
bool merge_sweeps(const SweepContext& ctx, OpSweep& into, const OpSweep& later);
/// Sweeps the whole plan: in two halves on two cores when it is large.
OpSweep sweep_plan(const SweepContext& ctx);

/// The time breakdown of a whole plan's sweep.
TimeBreakdown breakdown_of(const SweepContext& ctx, const OpSweep& sweep);

}  // namespace pipesim::sim
