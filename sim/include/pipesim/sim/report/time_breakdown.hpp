// Where the GPUs' time goes: every nanosecond of every simulated GPU over the run, on its compute stream,
// either in an op (kernels, TP collectives, the optimizer step) or idle, and each idle gap charged to what
// the GPU was waiting for (the dependency of the next op that finished last): another stage's output
// (a pipeline bubble, and the part of it the p2p transfer itself took), a data-parallel or sharding
// collective, context parallelism's key/value exchange, or host work and transfers (offload). The shares sum
// to 1.
#pragma once

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::sim {

struct TimeBreakdown {
  double kernels = 0;    ///< forward, backward and recompute ops
  double tp_comm = 0;    ///< collectives on the compute stream (TP, boundary re-gathers, expert all-to-all)
                         ///< and waits for the TP collectives that overlap the backward (the tp stream)
  double optimizer = 0;  ///< optimizer steps on the GPU
  double pipeline_bubble = 0;  ///< idle, waiting for another stage's work
  double pp_comm = 0;          ///< idle while the awaited p2p transfer was on the wire
  double dp_comm = 0;          ///< idle, waiting for a data-parallel or sharding collective
  double cp_comm = 0;          ///< idle, waiting for context parallelism's key/value exchange
  double offload = 0;          ///< idle, waiting for host transfers, NVMe or the CPU optimizer
  double other = 0;            ///< idle with no dependency to blame (fill jobs, context switches)

  bool operator==(const TimeBreakdown&) const = default;
};

/// Shares of GPU time (simulated GPUs x run time) by cause; all zero for an empty run.
TimeBreakdown compute_time_breakdown(const Plan& plan, const Timeline& timeline);

}  // namespace pipesim::sim
