// RoundPipe: GPUs are a stateless pool. The model has separate forward and backward partitions; the first
// backward stage is fused (the last layers' forward, the loss and their backward in one job). Stage jobs are
// dispatched in the order F0..F(nf-1), FB, B1..B(nb-1) to GPU `counter mod G`, the counter continuing across
// iterations. A job uploads its weights (in chunks of at most 256 MB that only use the bandwidth activation
// uploads leave), runs all M microbatches, and (backward jobs) downloads its gradients. Every inter-GPU
// tensor goes through host memory: download on the producer, upload on the consumer. Backward stages
// recompute from checkpoints the forward stages downloaded. One CPU Adam step over all parameters follows
// each iteration; the next iteration trains on weights one step stale (or waits for it with
// --roundpipe-sync).
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/option.hpp"
#include "schedules/builtin.hpp"
#include "schedules/offload/offload_plan.hpp"
#include "schedules/offload/roundpipe_partition.hpp"

namespace pipesim::sim::detail {

namespace {
constexpr std::int64_t kWeightChunkBytes = std::int64_t{256} << 20;

/// Builds one RoundPipe plan in phases: the partition and host memory, then per iteration the forward jobs,
/// the fused job and the backward jobs, each dispatched to the next GPU of the pool, and the CPU Adam step.
class RoundPipeBuilder {
 public:
  explicit RoundPipeBuilder(const ScheduleInput& in);
  Plan build();

 private:
  RangeCost cost(LayerRange r, std::int32_t m) const { return op_.stage_cost(r, m); }
  LayerRange backward(std::int32_t b) const { return part_.backward[static_cast<std::size_t>(b)]; }
  /// True when backward job b's checkpoint (the input of its first layer) is produced inside `forward`.
  bool saves_checkpoint(LayerRange forward, std::int32_t b) const {
    const std::int32_t first = backward(b).first;
    return first > forward.first && first <= forward.second;
  }
  std::int32_t next_gpu() { return static_cast<std::int32_t>(counter_++ % G_); }
  std::size_t at(std::int32_t stage, std::int32_t m) const {
    return static_cast<std::size_t>(stage * M_ + m);
  }

  /// Weights in background chunks (priority 1): they fill the gaps between activation uploads.
  OpId upload_weights(std::int32_t g, const RangeCost& r, std::int32_t stage, std::int32_t pass) {
    return op_.upload_weights(g, r, OpTags{stage, pass, -1, r.begin, r.end, it_}, {weights_ready_}, 1,
                              kWeightChunkBytes);
  }
  /// A tensor parked in host memory comes back to GPU g (none when nothing was parked).
  OpId upload_activation(std::int32_t g, OpId parked, std::int64_t bytes, const OpTags& t) {
    if (parked == kNoOp) return kNoOp;
    return op_.transfer(op_.stream(g, OffloadPlan::kActUp), OpKind::kH2D, t, op_.host_of_gpu(g), op_.gpu(g),
                        bytes, {parked}, 0, bytes);
  }
  /// Every inter-GPU tensor goes through host memory: parked there after `after`.
  OpId download(std::int32_t g, OpId after, std::int64_t bytes, const OpTags& t) {
    return op_.transfer(op_.stream(g, OffloadPlan::kDown), OpKind::kD2H, t, op_.gpu(g), op_.host_of_gpu(g),
                        bytes, {after}, 0, 0, bytes);
  }

  void emit_forward_job(std::int32_t s);
  /// Backward job b: b = 0 is the fused job (the last layers' forward, the loss and their backward).
  void emit_backward_job(std::int32_t b);

  const ScheduleInput& in_;
  std::int32_t G_ = 0, M_ = 0, nf_ = 0, nb_ = 0;
  bool sync_optimizer_ = false;
  RoundPipePartition part_;
  OffloadPlan op_;
  RangeCost whole_;
  std::int64_t counter_ = 0;  // dispatch counter, continued across iterations
  std::vector<OpId> adam_;    // per iteration
  // The iteration being built, the op its weights wait for, and the tensors it parks in host memory.
  std::int32_t it_ = 0, round_ = 0;  // iteration, and accumulation round within it
  OpId weights_ready_ = kNoOp;
  std::vector<OpId> fwd_down_, bwd_down_, ckpt_down_, grad_downloads_;
};

RoundPipeBuilder::RoundPipeBuilder(const ScheduleInput& in) : in_(in), op_(in, "roundpipe", in.pp) {
  G_ = in.pp;
  M_ = in.microbatches;
  sync_optimizer_ = in.parameters.flag("sync_optimizer");
  const auto& layers = in.costs.front();
  if (!in.partition.empty() && in.partition_backward.empty())
    throw InputError(
        Option{"partition"}, "",
        "roundpipe takes forward and backward layer counts, F1,F2,.../B1,B2,... (the fused stage "
        "first), or partitions automatically when " +
            spelled(Option{"partition"}) + " is not given");
  part_ = in.partition.empty()
              ? roundpipe_partition(layers, in.hw, in.dtype, M_)
              : given_roundpipe_partition(layers, in.hw, in.dtype, in.partition, in.partition_backward);
  nf_ = static_cast<std::int32_t>(part_.forward.size());
  nb_ = static_cast<std::int32_t>(part_.backward.size());  // backward[0] is the fused stage
  whole_ = range_cost(layers, 0, static_cast<std::int32_t>(layers.size()));
  // Host: the model's weights and optimizer state, and every checkpoint of an iteration.
  std::int64_t checkpoints = 0;
  for (std::int32_t b = 1; b < nb_; ++b) checkpoints += cost(backward(b), 0).input_bytes;
  op_.hold_model_on_host(0, whole_.params, whole_.trainable, checkpoints * M_);
}

void RoundPipeBuilder::emit_forward_job(std::int32_t s) {
  const std::int32_t g = next_gpu();
  const LayerRange rg = part_.forward[static_cast<std::size_t>(s)];
  RangeCost r0 = cost(rg, 0);
  OpId up = upload_weights(g, r0, s, 0);
  OpId last = kNoOp;
  for (std::int32_t m = 0; m < M_; ++m) {
    RangeCost r = cost(rg, m);
    OpTags t{s, 0, (it_ * in_.accum_steps + round_) * M_ + m, r.begin, r.end, it_};
    OpId input = s > 0 ? upload_activation(g, fwd_down_[at(s - 1, m)], r.input_bytes, t) : kNoOp;
    // The forward holds its output (and the checkpoints it saves) until they are downloaded.
    std::int64_t saved = 0;
    for (std::int32_t b = 1; b < nb_; ++b)
      if (saves_checkpoint(rg, b)) saved += cost(backward(b), m).input_bytes;
    last = op_.forward(g, t, r, {up, input}, r.output_bytes + saved, r.input_bytes);
    fwd_down_[at(s, m)] = download(g, last, r.output_bytes, t);
    for (std::int32_t b = 1; b < nb_; ++b)
      if (saves_checkpoint(rg, b))
        ckpt_down_[at(b, m)] = download(g, last, cost(backward(b), m).input_bytes, t);
  }
  op_.drop_weights(g, r0, last);
}

void RoundPipeBuilder::emit_backward_job(std::int32_t b) {
  const std::int32_t g = next_gpu();
  const LayerRange rg = backward(b);
  RangeCost r0 = cost(rg, 0);
  OpId up = upload_weights(g, r0, nf_ + b, 1);
  OpId last = kNoOp;
  const bool sends_gradient = b + 1 < nb_;
  for (std::int32_t m = 0; m < M_; ++m) {
    RangeCost r = cost(rg, m);
    OpTags t{nf_ + b, 1, (it_ * in_.accum_steps + round_) * M_ + m, r.begin, r.end, it_};
    const std::int64_t grads = m == 0 ? r0.grad_bytes() : 0;
    if (b == 0) {
      // Fused stage: input from the last forward stage, forward + loss + backward without recompute.
      OpId input = upload_activation(g, fwd_down_[at(nf_ - 1, m)], r.input_bytes, t);
      OpId f = op_.forward(g, t, r, {up, input}, r.working_bytes + grads);
      last = op_.backward(g, t, r, {f}, sends_gradient ? r.input_bytes : 0, r.working_bytes + r.input_bytes);
    } else {
      OpId grad = upload_activation(g, bwd_down_[at(b - 1, m)], r.output_bytes, t);
      OpId ckpt = upload_activation(g, ckpt_down_[at(b, m)], r.input_bytes, t);
      OpId re = op_.recompute(g, t, r, {up, ckpt}, r.working_bytes + grads);
      last = op_.backward(g, t, r, {re, grad}, sends_gradient ? r.input_bytes : 0,
                          r.working_bytes + r.input_bytes + r.output_bytes);
    }
    if (sends_gradient) bwd_down_[at(b, m)] = download(g, last, r.input_bytes, t);
  }
  grad_downloads_.push_back(
      op_.download_gradients(g, r0, OpTags{nf_ + b, 1, -1, r0.begin, r0.end, it_}, last));
}

Plan RoundPipeBuilder::build() {
  for (it_ = 0; it_ < in_.iterations; ++it_) {
    // Weights of this iteration: one step stale (the optimizer of iteration it-2), or fresh when synchronous.
    const std::int32_t lag = sync_optimizer_ ? 1 : 2;
    weights_ready_ = it_ >= lag ? adam_[static_cast<std::size_t>(it_ - lag)] : kNoOp;
    grad_downloads_.clear();
    // Gradient accumulation: K flushes of M microbatches; each backward job's gradients go down to the host
    // every round, and one optimizer step follows the last.
    for (round_ = 0; round_ < in_.accum_steps; ++round_) {
      fwd_down_.assign(static_cast<std::size_t>(nf_ * M_), kNoOp);
      bwd_down_.assign(static_cast<std::size_t>(nb_ * M_), kNoOp);
      ckpt_down_.assign(static_cast<std::size_t>(nb_ * M_), kNoOp);
      for (std::int32_t s = 0; s < nf_; ++s) emit_forward_job(s);
      for (std::int32_t b = 0; b < nb_; ++b) emit_backward_job(b);  // FB, then B1..B(nb-1)
    }
    adam_.push_back(op_.cpu_adam(op_.cpu_stream(0, 0), OpTags{-1, -1, -1, -1, -1, it_}, whole_.trainable,
                                 in_.optimizer_threads(in_.hw.host.cores), grad_downloads_));
  }
  std::vector<std::int32_t> counts;
  for (auto [b, e] : part_.forward) counts.push_back(e - b);
  return op_.finish(
      counts, fmt::format("{} forward + {} backward stages (fused first), stage time target {:.3f} ms{}", nf_,
                          nb_, to_ms(part_.stage_time_ns), sync_optimizer_ ? ", synchronous optimizer" : ""));
}

Plan build_roundpipe(const ScheduleInput& in) {
  return RoundPipeBuilder(in).build();
}

OwnPartition own_partition(const ScheduleInput& in) {
  const RoundPipePartition p = roundpipe_partition(in.costs.front(), in.hw, in.dtype, in.microbatches);
  return {p.forward, p.backward, "(fused first)", p.stage_time_ns};
}

}  // namespace

ScheduleDescriptor describe_roundpipe() {
  ScheduleDescriptor d = offload_descriptor(
      "roundpipe", "RoundPipe (arXiv 2604.27085)",
      "stateless GPU pool: forward / fused / backward stage jobs dispatched round-robin across iterations, "
      "weights streamed per job behind activation uploads, all inter-GPU data through host memory, CPU Adam "
      "one step stale");
  d.parameters = {{"sync_optimizer", "roundpipe_sync", ParameterType::kFlag,
                   "wait for the optimizer (no stale weights)", false, 0, 0, ""}};
  d.constraints.push_back(
      ("microbatches default to G + 1; partitions automatically (RoundPipe's algorithm) unless " +
       spelled(Option{"partition"}) +
       " "
       "gives forward/backward layer counts"));
  d.default_iterations = 4;
  d.default_microbatches_per_gpu = 1;
  d.default_microbatches_extra = 1;
  d.partitioner.rule = PartitionRule::kSeparateForwardBackward;
  d.partitioner.own_partition = own_partition;
  d.build = build_roundpipe;
  return d;
}

}  // namespace pipesim::sim::detail
