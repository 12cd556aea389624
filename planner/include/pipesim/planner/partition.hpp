// Partition search: cut a model's layers into contiguous pipeline stages so that the slowest stage is as fast
// as possible, under each stage's memory limit. A graph problem: vertices are (cut position, stages used), an
// edge is a stage holding layers i..j weighted by its time; the answer is the min-max (bottleneck) path,
// found with Boost.Graph's dag_shortest_paths and a max-combine. Used by `pipesim partition` and the planner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/schedules/schedule.hpp"

namespace pipesim::planner {

/// Per-layer inputs of the search (for one microbatch) and the stage-position dependent memory rule.
struct PartitionProblem {
  std::vector<std::int64_t> time_ns;  ///< forward + backward (+ recompute) of the layer, incl. TP collectives
  std::vector<std::int64_t> boundary_ns;        ///< p2p of the layer's output to the next stage
  std::vector<std::int64_t> resident_bytes;     ///< weights, gradients, optimizer state
  std::vector<std::int64_t> activation_bytes;   ///< stored per microbatch in flight
  std::vector<std::int64_t> working_bytes;      ///< re-materialized during one backward (recompute)
  std::vector<std::int64_t> weight_grad_bytes;  ///< held by a deferred weight-gradient pass
  std::vector<std::int64_t> params;             ///< for DeepSpeed's `parameters` method
  std::vector<bool> is_block;
  std::int32_t stages = 1;
  std::vector<std::int64_t> inflight;  ///< microbatches of activations held by stage k (1F1B: min(m, p-k))
  std::vector<std::int64_t> deferred;  ///< weight-gradient passes stage k owes at that peak (ZB-H1)
  std::int64_t memory_cap = 0;         ///< bytes per stage; 0: unlimited
};

struct PartitionResult {
  bool feasible = false;
  std::vector<std::int32_t> blocks;  ///< transformer blocks per stage (the `--partition` form)
  std::vector<std::pair<std::int32_t, std::int32_t>> ranges;  ///< layer ranges [begin, end)
  std::vector<std::int64_t> stage_ns;
  std::vector<std::int64_t> stage_mem_bytes;
  std::int64_t bottleneck_ns = 0;
};

/// The optimal partition (minimum bottleneck stage time); ties go to the first path found, so the result is
/// deterministic. Stages may hold no block (an embedding- or head-only stage) but never no layer at all.
PartitionResult optimal_partition(const PartitionProblem& problem);
/// Stage times and memory of a given partition in blocks per stage (embedding first, head last).
PartitionResult evaluate_partition(const PartitionProblem& problem, const std::vector<std::int32_t>& blocks);
/// DeepSpeed's `parameters` method: balance parameter counts, ignoring time.
std::vector<std::int32_t> parameters_partition(const PartitionProblem& problem);

/// Builds the problem for a schedule input (its costs, hardware, pp x v chunks, TP) with a memory cap of
/// `mem_fraction` of GPU memory; what each stage position holds comes from the schedule's partitioner hints
/// (or its task order). Throws InputError for a schedule that places layers by its own rule.
PartitionProblem make_partition_problem(const sim::ScheduleInput& in, const sim::ScheduleDescriptor& schedule,
                                        double mem_fraction);

/// With the data-parallel state sharded or offloaded (`in.sharding`): each layer's resident bytes as the
/// simulator places them, the ZeRO formulas over its weights and trained parameters on one TP rank plus what
/// stays whole however the state is sharded (a framework's extra gradient buffer, the FP8 weight copies).
void shard_resident_bytes(PartitionProblem& problem, const sim::ScheduleInput& in);

}  // namespace pipesim::planner
