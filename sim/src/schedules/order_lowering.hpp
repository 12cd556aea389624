// The shared lowering of order-based schedules: per-rank task orders become a Plan with compute ops, TP
// collectives, pipeline p2p transfers, bucketed DP gradient all-reduce overlapping the last backward, the
// optimizer step (on the GPU or offloaded to the host CPU) and memory effects.
#pragma once

#include "pipesim/sim/plan/plan.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/schedules/schedule.hpp"

namespace pipesim::sim {

/// Lowers an order-based schedule; simulates replicas explicitly by itself when identical replicas would
/// contend on a shared link or share host CPUs (and says so in the plan's note).
Plan lower_order_based(const ScheduleDescriptor& schedule, const ScheduleInput& input);

/// A lower bound on the step time of the plan lower_order_based builds (one iteration; 0 otherwise), proven
/// from the engine's rules: each GPU's compute ops run one at a time for exactly their time, all after its
/// first forward, which follows microbatch 0's forward through the stages before it. Transfers,
/// collectives and the optimizer count as free.
Duration order_based_lower_bound(const ScheduleDescriptor& schedule, const ScheduleInput& input);

}  // namespace pipesim::sim
