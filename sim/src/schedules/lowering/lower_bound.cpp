// A provable lower bound on an order-based plan's step time, from the same chunk costs and orders as the
// lowering, without building the plan (the planner prunes with it).
#include "schedules/lowering/builder.hpp"
#include "schedules/order_lowering.hpp"

namespace pipesim::sim::lowering {

/// The times lower_bound takes for tasks: each compute op's as the engine will take it, less its kernel
/// launches. The lowering splits a pass into gradient buckets or layers whose launch counts are rounded down,
/// and whose other terms (rounded-up FLOP, byte and fixed times, the longer of two floors) add up to at least
/// the whole pass's.
struct Builder::LowerBoundTimes {
  explicit LowerBoundTimes(const Builder& b)
      : b_(b),
        in_(b.in_),
        gpn_(in_.hw.node.gpus),
        topology_(in_.hw,
                  static_cast<int>(gpu_position(b.global_rank(0, in_.pp - 1, in_.tp - 1)) / gpn_ + 1)),
        known_(b.chunk_costs_.size() * b.chunk_costs_.front().size() * kKinds, -1) {}

  /// The time of a task depends only on its kind, chunk and cost table: each is computed once.
  Duration task_ns(const Task& task, std::int32_t stage) {
    const auto table =
        static_cast<std::size_t>(in_.cost_of_microbatch[static_cast<std::size_t>(task.microbatch)]);
    const auto chunk = static_cast<std::size_t>(b_.model_chunk(task.chunk, stage));
    Duration& memo = known_[(table * b_.chunk_costs_.front().size() + chunk) * kKinds +
                            static_cast<std::size_t>(task.kind)];
    if (memo < 0) memo = task_ns_uncached(task, stage, table, chunk);
    return memo;
  }

  /// A gradient task's input gradients alone, without recompute.
  Duration gradient_only(const Task& task, std::int32_t stage) const {
    const auto table =
        static_cast<std::size_t>(in_.cost_of_microbatch[static_cast<std::size_t>(task.microbatch)]);
    const RangeCost& cc = b_.chunk_costs_[table][static_cast<std::size_t>(b_.model_chunk(task.chunk, stage))];
    if (!b_.shards_params())
      return timed(backward_work(task.kind, cc, cc.gemm, 0), backward_fixed(task.kind, cc));
    Duration d = 0;
    for (std::int32_t i = cc.begin; i < cc.end; ++i) {
      const RangeCost& lc = b_.layer_costs_[table][static_cast<std::size_t>(i)];
      d += timed(backward_work(task.kind, lc, lc.gemm, 0), backward_fixed(task.kind, lc));
    }
    return d;
  }

  /// A GPU optimizer step runs on the compute stream after everything else of its stage (on the host when
  /// offloaded: free here).
  Duration optimizer(std::int32_t stage) const {
    if (in_.sharding.offload_optimizer) return 0;
    std::int64_t trainable = 0;
    for (std::int32_t v = 0; v < in_.virtual_stages; ++v)
      trainable += b_.chunk_costs_[0][static_cast<std::size_t>(b_.model_chunk(v, stage))].trainable;
    const std::int64_t updated = in_.sharding.stage == ZeroStage::k0
                                     ? trainable
                                     : (trainable + b_.shard_ranks() - 1) / b_.shard_ranks();
    return in_.hw.memory_ns(updated * in_.optimizer_bytes_per_param);
  }

 private:
  static constexpr std::size_t kKinds = 4;

  Duration timed(const ComputeWork& w, Duration fixed) const {  // launches left out: kernels ignored
    if (fixed >= 0) return fixed;
    return in_.hw.op_ns(w.flops, w.gemm_gflop, 0, in_.dtype, w.mem_bytes, w.expert_flops, w.expert_gemm_gflop,
                        w.expert_weight_bytes, w.attention_flops, w.attention_bytes, w.wide_flops,
                        w.score_bytes, w.rated_flops, w.rated_tflops);
  }
  std::int64_t gpu_position(std::int32_t rank) const { return in_.hw.gpu_slot(rank, in_.tp); }
  /// A TP collective on the compute stream lasts at least its path latency steps plus its bytes at the
  /// fastest rate its ring path allows (the slowest link on it, or the measured bus bandwidth cap): flows
  /// sharing links only go slower. Replica 0's TP rank 0 of each stage, as lowered.
  Duration tp_ns(std::int32_t stage, const RangeCost& c, std::int32_t halves) const {
    if (in_.tp <= 1 || c.tp_bus <= 0 || c.tp_collectives <= 0 || halves <= 0) return 0;
    const auto self = static_cast<std::int32_t>(gpu_position(b_.global_rank(0, stage, 0)));
    const auto next = static_cast<std::int32_t>(gpu_position(b_.global_rank(0, stage, b_.tp_peer(0))));
    const std::int64_t bytes = b_.tp_ring_bytes(c.tp_bus * halves / 2);
    const std::int64_t message = c.tp_bus * in_.tp / (2 * (in_.tp - 1) * std::int64_t{c.tp_collectives});
    const Path p =
        topology_.ring_path({self / gpn_, self % gpn_}, {next / gpn_, next % gpn_}, bytes, message);
    Duration d = p.latency * (in_.tp - 1) * c.tp_collectives * halves;
    if (p.links.empty() || bytes <= 0) return d;
    double rate = p.max_bytes_per_ns > 0 ? p.max_bytes_per_ns : std::numeric_limits<double>::infinity();
    for (LinkId l : p.links)
      rate = std::min(rate, topology_.links()[static_cast<std::size_t>(l)].bytes_per_ns);
    return d + static_cast<Duration>(std::floor(static_cast<double>(bytes) / rate));
  }
  Duration forward(const RangeCost& c) const { return timed(forward_work(c), forward_fixed(c)); }
  Duration backward(TaskKind kind, const RangeCost& c) const {
    Duration d = 0;
    if (kind != TaskKind::kBackwardWeight && (c.recompute > 0 || c.recompute_ns > 0))
      d += timed(b_.recompute_work(c), recompute_fixed(c));
    return d + timed(backward_work(kind, c, c.gemm, 0), backward_fixed(kind, c));
  }
  /// A task's compute ops: per chunk, or per layer when parameters are sharded (ZeRO-3/FSDP run one op per
  /// layer at the layer's own GEMM size).
  Duration compute_ns(const Task& task, std::size_t table, const RangeCost& cc) const {
    if (!b_.shards_params()) return task.kind == TaskKind::kForward ? forward(cc) : backward(task.kind, cc);
    Duration d = 0;
    for (std::int32_t i = cc.begin; i < cc.end; ++i) {
      const RangeCost& lc = b_.layer_costs_[table][static_cast<std::size_t>(i)];
      d += task.kind == TaskKind::kForward ? forward(lc) : backward(task.kind, lc);
    }
    return d;
  }
  Duration task_ns_uncached(const Task& task, std::int32_t stage, std::size_t table,
                            std::size_t chunk) const {
    const RangeCost& cc = b_.chunk_costs_[table][chunk];
    // The chunk's TP collectives on the compute stream: forward; recompute (full) and the backward's exposed
    // part.
    Duration collectives = 0;
    if (task.kind == TaskKind::kForward) {
      collectives = tp_ns(stage, cc, 2);
    } else if (task.kind != TaskKind::kBackwardWeight) {
      const bool recomputed = in_.recompute == Recompute::kFull && (cc.recompute > 0 || cc.recompute_ns > 0);
      collectives =
          (recomputed ? tp_ns(stage, cc, 2) : 0) + tp_ns(stage, cc, b_.tp_backward(task.kind).exposed);
    }
    return collectives + compute_ns(task, table, cc);
  }

  const Builder& b_;
  const ScheduleInput& in_;
  const std::int32_t gpn_;
  const Topology topology_;
  std::vector<Duration> known_;  // by (cost table, chunk, kind); -1 until computed
};

Duration Builder::lower_bound() {
  plan_.hw = in_.hw;
  validate_and_layout();
  if (in_.iterations != 1) return 0;  // a steady-state step is a difference of iteration ends: no bound here
  LowerBoundTimes times(*this);
  // Every GPU's compute stream runs its ops one at a time, all of them after its first forward, which waits
  // for microbatch 0's forward through every stage before it (`head`). And the last microbatch's gradient
  // leaves a stage's first chunk only to run the backward of every stage before it (`tail`: their input
  // gradients alone, without recompute): the step lasts at least head + the stage's compute up to that
  // backward + tail.
  const std::int32_t last_mb = in_.microbatches - 1;
  const Duration first_optimizer = times.optimizer(0);
  Duration bound = 0, head = 0, tail = 0;
  for (std::int32_t stage = 0; stage < in_.pp; ++stage) {
    const auto& order = orders_[static_cast<std::size_t>(stage)];
    Duration round = 0, until_last_gradient = -1;
    std::optional<Task> last_gradient;
    for (const Task& task : order) {
      round += times.task_ns(task, stage);
      if ((task.kind == TaskKind::kBackward || task.kind == TaskKind::kBackwardInput) &&
          task.microbatch == last_mb && task.chunk == 0) {
        until_last_gradient = round;
        last_gradient = task;
      }
    }
    // The chain through the stages (head, tail) follows the loop placement; under the others only each
    // rank's own serial compute bounds the step.
    const bool loop = sched_.placement == ChunkPlacement::kLoop;
    const bool starts_with_first_forward = loop && !order.empty() &&
                                           order.front().kind == TaskKind::kForward &&
                                           order.front().microbatch == 0 && order.front().chunk == 0;
    const Duration start = starts_with_first_forward ? head : 0;
    const Duration earlier_rounds = round * (in_.accum_steps - 1);
    bound = std::max(bound, start + earlier_rounds + round + times.optimizer(stage));
    if (!last_gradient || !loop) {
      tail = -1;  // the chain below needs every stage's last gradient task
    } else if (tail >= 0) {
      // The chain ends with stage 0's last gradient task, which its optimizer step follows.
      bound = std::max(bound, start + earlier_rounds + until_last_gradient + tail + first_optimizer);
      tail += times.gradient_only(*last_gradient, stage);
    }
    head += times.task_ns(Task{TaskKind::kForward, 0, 0}, stage);
  }
  return bound;
}

}  // namespace pipesim::sim::lowering

namespace pipesim::sim {

Duration order_based_lower_bound(const ScheduleDescriptor& schedule, const ScheduleInput& input) {
  // The chain of microbatch 0's forward down the stages is proven for the loop placement; under the V and
  // the two-copy placements the bound is each rank's own serial compute and optimizer step.
  return lowering::Builder(schedule, input).lower_bound();
}

}  // namespace pipesim::sim
