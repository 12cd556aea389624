// Shared building blocks of the CPU-offload schedules (mobius, spipe, roundpipe): a plan with one host per
// node and, per GPU, the streams those systems use (compute, weight upload, activation upload, download,
// GPU-to-GPU receive), stage costs per microbatch, and helpers that add compute and transfer ops with their
// memory effects: weight uploads that keep at most two stages' weights on a GPU, gradient downloads, CPU
// Adam. Weights, master weights and optimizer state live in pinned host memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/plan/plan.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/schedules/schedule.hpp"
#include "schedules/builtin.hpp"
#include "schedules/layer_ranges.hpp"
#include "schedules/range_cost.hpp"

namespace pipesim::sim::detail {

inline constexpr OpId kNoOp = -1;

class OffloadPlan {
 public:
  enum Slot : std::size_t { kCompute, kWeightUp, kActUp, kDown, kRecv, kSlots };

  OffloadPlan(const ScheduleInput& in, const std::string& schedule, std::int32_t gpus);

  std::int32_t gpus() const { return gpus_; }
  DeviceId gpu(std::int32_t g) const { return gpu_device_[static_cast<std::size_t>(g)]; }
  DeviceId host_of_gpu(std::int32_t g) const;
  StreamId stream(std::int32_t g, Slot s) const { return streams_[static_cast<std::size_t>(g)][s]; }
  /// A CPU stream on the host of `node` (one per optimizer task queue).
  StreamId cpu_stream(std::int32_t node, std::int32_t queue);
  Plan& plan() { return plan_; }
  /// Index of the GPU whose stream carries `op`.
  std::int32_t gpu_of_op(OpId op) const;

  /// The passes of stage `r` on GPU `g` for one microbatch (measured times of profiled layers replace the
  /// FLOP-based ones), with the bytes they allocate and free on the GPU. The recompute re-runs the blocks'
  /// forward from the stage-input checkpoint.
  OpId forward(std::int32_t g, const OpTags& tags, const RangeCost& r, std::vector<OpId> deps,
               std::int64_t alloc = 0, std::int64_t free = 0);
  OpId recompute(std::int32_t g, const OpTags& tags, const RangeCost& r, std::vector<OpId> deps,
                 std::int64_t alloc = 0, std::int64_t free = 0);
  OpId backward(std::int32_t g, const OpTags& tags, const RangeCost& r, std::vector<OpId> deps,
                std::int64_t alloc = 0, std::int64_t free = 0);
  /// A transfer on `stream`; zero bytes take no time at all. Memory effects apply to the stream's device.
  OpId transfer(StreamId stream, OpKind kind, const OpTags& tags, DeviceId src, DeviceId dst,
                std::int64_t bytes, std::vector<OpId> deps, std::int32_t priority = 0, std::int64_t alloc = 0,
                std::int64_t free = 0);
  /// Costs of layer range `range` for microbatch `m` (its cost table).
  RangeCost stage_cost(LayerRange range, std::int32_t m) const;
  /// Host memory of the model on `node`: bf16 weights the GPUs stream, fp32 master weights, Adam moments and
  /// gradient staging of the trained parameters, and `extra` bytes.
  void hold_model_on_host(std::int32_t node, std::int64_t params, std::int64_t trainable,
                          std::int64_t extra = 0);
  /// Uploads a stage's bf16 weights to GPU `g` once it holds at most one other stage's weights (the current
  /// and the prefetched one), after `deps`: one transfer, or background chunks of at most `chunk_bytes` at
  /// `priority`. Returns the last transfer.
  OpId upload_weights(std::int32_t g, const RangeCost& r, const OpTags& tags, std::vector<OpId> deps,
                      std::int32_t priority = 0, std::int64_t chunk_bytes = 0);
  /// The last uploaded stage's weights leave GPU `g` when `last` ends (a stage that keeps no gradients).
  void drop_weights(std::int32_t g, const RangeCost& r, OpId last);
  /// Downloads the last uploaded stage's gradients after `last`, freeing them and its weights.
  OpId download_gradients(std::int32_t g, const RangeCost& r, const OpTags& tags, OpId last);
  /// A CPU Adam step over `params` on `threads` cores.
  OpId cpu_adam(StreamId stream, const OpTags& tags, std::int64_t params, std::int32_t threads,
                std::vector<OpId> deps);
  void add_dep(OpId op, OpId dep);
  void add_free(OpId op, std::int64_t bytes) { plan_.add_free(op, bytes); }
  void add_host_resident(std::int32_t node, std::int64_t bytes);

  /// Fills the plan metadata (model FLOPs from `costs`) and returns the plan.
  Plan finish(const std::vector<std::int32_t>& partition, std::string note);

 private:
  const ScheduleInput& in_;
  Plan plan_;
  std::int32_t gpus_;
  std::vector<DeviceId> gpu_device_;
  std::vector<DeviceId> host_device_;
  std::vector<std::vector<StreamId>> streams_;
  std::vector<std::vector<StreamId>> cpu_streams_;  // [node][queue]
  std::vector<std::vector<OpId>> weight_release_;   // [gpu][k]: the op that frees its k-th stage's weights

  OpId compute(std::int32_t g, OpKind kind, const OpTags& tags, ComputeWork work, Duration fixed,
               std::vector<OpId> deps, std::int64_t alloc, std::int64_t free);
};

/// A whole-plan descriptor with what the offload schedules share: one pipeline over the GPUs of one node
/// (tp = dp = 1), full recompute from stage-input checkpoints, layers placed by the schedule's own rule, not
/// tried by the planner for profiled workloads (they build on FLOP costs).
inline ScheduleDescriptor offload_descriptor(std::string name, std::string source, std::string description) {
  ScheduleDescriptor d =
      named_descriptor(std::move(name), std::move(source), std::move(description), ScheduleKind::kWholePlan);
  d.check = [](const ScheduleShape&) { return std::string(); };
  d.constraints = {"tp = dp = 1: one pipeline over the GPUs"};
  d.planner.shape = ClusterShape::kOnePipelineNode;
  d.planner.takes_profiled_workloads = false;
  d.planner.recomputes = {Recompute::kFull};
  d.planner.with_optimizer_offload = false;
  d.partitioner.rule = PartitionRule::kOwnRule;
  return d;
}

}  // namespace pipesim::sim::detail
