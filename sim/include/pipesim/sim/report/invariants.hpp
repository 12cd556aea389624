// Physical invariants every result holds before it is printed: what no correct simulation can break, whatever
// the job. Each check throws InvariantError naming the invariant and the values that break it; the command
// line turns that into one line and exit code 3, so a wrong number is never shown as an answer.
//
// The invariants, by name (docs/invariants.md says why each must hold):
//   finite                      every reported time, rate and share is a finite number, none negative
//   step-positive               a run with work has a step longer than zero
//   mfu-le-hfu                  MFU <= HFU (model FLOPs are hardware FLOPs less recomputation)
//   hfu-le-1                    HFU <= 1 at the dtype's peak
//   bubble-in-range             0 <= bubble <= 1
//   bubble-parts-sum            warm-up + intra + drain = bubble, each in [0, 1]
//   time-shares-sum-to-1        the time breakdown's shares are >= 0 and sum to 1 (when some GPU computes)
//   tokens-per-step             tokens/s x step = global batch x sequence length
//   steps-within-run            first step + (iterations - 1) x step <= run time
//   gpu-time-adds-up            each GPU's busy + warm-up + intra + drain = run time
//   run-covers-busiest-gpu      run time >= each GPU's compute-stream busy time (a serial stream)
//   step-covers-gpu-work        (iterations - 1) x step >= each GPU's compute work of later iterations
//                               that starts after the first iteration ends
//   op-times                    every op ends at or after it starts, and starts at or after 0
//   step-covers-critical-path   every op starts after its dependencies and its stream's previous op end,
//                               so the run is at least the plan's critical path
//   peak-memory-covers-resident each GPU's peak memory is at least what it holds for the whole run
//   oom-reported                a GPU whose peak exceeds its capacity is reported out of memory
//   bubbles-within-idle         the bubbles found on a GPU add up to no more than its idle time
//   fill-in-bubbles             no fill chunk runs beside the main job's compute on its GPU
//   fill-slowdown-within-limit  the kept fill run slows the main job by no more than its limit
//   fill-utilization            compute-busy shares without and with fill in [0, 1], fill GPU-equivalents
//                               at most the GPUs
//   fill-units                  no job reports more units done than it has, nor a finish after the run
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan.hpp"
#include "pipesim/sim/report/bubbles.hpp"
#include "pipesim/sim/report/metrics.hpp"

namespace pipesim::sim {

/// The invariants of the metrics alone (planner candidates and buy rows carry no timeline).
/// `global_batch` x `seq` are the tokens of one step. `against_peak` false leaves out hfu-le-1: for a
/// measured run, the profile's peak bounds the model, not the machine (the host replay backend's peak is
/// itself a measurement, which a later run on a quieter machine beats).
void check_metrics(const Metrics& m, std::int64_t global_batch, std::int32_t seq, bool against_peak = true);

/// The invariants of a timeline against its plan and the metrics computed from them: op times, the order
/// the plan imposes, memory, and fill chunks kept out of the main job's compute.
void check_timeline(const Plan& plan, const Timeline& timeline, const Metrics& m);

/// Both of the above: what every simulated or replayed run is checked against before it is reported.
void check_run(const Plan& plan, const Timeline& timeline, const Metrics& m);

/// The bubbles found in a run (pipesim bubbles) add up, on each GPU, to no more than its idle time.
void check_bubbles(const Plan& plan, const std::vector<Bubble>& bubbles, const Metrics& m);

/// What a fill run claims about itself (simulate --fill-jobs, and its JSON).
struct FillClaims {
  struct Job {
    std::string name;
    std::int64_t units_done = 0, units = 0;
    double completed_s = -1;  ///< -1: not finished
  };
  double main_slowdown = 0;
  double max_slowdown = 0;  ///< the limit the run was kept within
  double utilization_before = 0, utilization_after = 0;
  double fill_gpu_equivalents = 0;
  std::int32_t num_gpus = 0;
  double run_time_s = 0;  ///< of the run with fill
  std::vector<Job> jobs;
};

void check_fill(const FillClaims& fill);

}  // namespace pipesim::sim
