// Shared building blocks of the CPU-offload schedules (mobius, spipe, roundpipe): a plan with one host per
// node and, per GPU, the streams those systems use (compute, weight upload, activation upload, download,
// GPU-to-GPU receive), per-range costs of a layer range, and helpers that add compute and transfer ops with
// their memory effects. Weights, master weights and optimizer state live in pinned host memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/plan.hpp"
#include "pipesim/sim/plan_builder.hpp"

namespace pipesim::sim::detail {

inline constexpr OpId kNoOp = -1;

/// Costs of layers [begin, end) for one microbatch (no TP), as offload schedules run them: the backward
/// always recomputes the range from its input checkpoint.
struct RangeCost {
  std::int32_t begin = 0, end = 0;
  double fwd = 0, bwd = 0, recompute = 0, gemm = 0;
  std::int32_t kernels = 0;
  bool profiled = false;
  Duration fwd_ns = 0, bwd_ns = 0, recompute_ns = 0;
  std::int64_t params = 0;         ///< all weights of the range
  std::int64_t trainable = 0;      ///< parameters the optimizer updates
  std::int64_t input_bytes = 0;    ///< activation entering the range (its checkpoint)
  std::int64_t output_bytes = 0;   ///< activation leaving the range
  std::int64_t working_bytes = 0;  ///< activations re-materialized while the range runs its backward
  std::int64_t weight_bytes() const { return 2 * params; }   // bf16 weights streamed to the GPU
  std::int64_t grad_bytes() const { return 2 * trainable; }  // bf16 gradients downloaded
};

RangeCost range_cost(const std::vector<LayerCost>& layers, std::int32_t begin, std::int32_t end);

/// Index range of the transformer blocks: layers before `first` are the embedding, from `last + 1` the head.
struct BlockSpan {
  std::int32_t first = 0, last = -1, count = 0;
};
BlockSpan block_span(const std::vector<LayerCost>& layers);

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

  OpId compute(std::int32_t g, OpKind kind, const OpTags& tags, double flops, double gemm,
               std::int32_t kernels, Duration fixed, std::vector<OpId> deps, std::int64_t alloc = 0,
               std::int64_t free = 0);
  /// A transfer on `stream`; zero bytes take no time at all. Memory effects apply to the stream's device.
  OpId transfer(StreamId stream, OpKind kind, const OpTags& tags, DeviceId src, DeviceId dst,
                std::int64_t bytes, std::vector<OpId> deps, std::int32_t priority = 0, std::int64_t alloc = 0,
                std::int64_t free = 0);
  /// A CPU Adam step over `params` on `threads` cores.
  OpId cpu_adam(StreamId stream, const OpTags& tags, std::int64_t params, std::int32_t threads,
                std::vector<OpId> deps);
  void add_dep(OpId op, OpId dep);
  void add_free(OpId op, std::int64_t bytes) { plan_.ops[static_cast<std::size_t>(op)].free_bytes += bytes; }
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
};

/// Rank of the first idle slot policy shared by the offload schedules: the op that must finish before a
/// GPU may upload its `k`-th stage's weights (at most two stages' weights resident: current and prefetched).
OpId two_stage_limit(const std::vector<OpId>& stage_release, std::size_t k);

}  // namespace pipesim::sim::detail
