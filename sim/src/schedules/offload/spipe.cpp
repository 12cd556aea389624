// SPipe: decoupled pass assignment. P GPUs in a ring run F forward and B backward virtual stages each:
// forward stage (v, r) holds layers from v L/F + r L/(F P), backward stage (v, r) layers from
// v L/B + (P-1-r) L/(B P), so one layer's forward and backward usually run on different GPUs. Rank r runs all
// M microbatches of forward (0, r) .. (F-1, r), then recompute + backward of (B-1, r) .. (0, r). Checkpoints
// (inputs of backward stages, saved during the forward) go GPU to GPU, asynchronously (sent when produced) or
// synchronously (when their backward is next). After a backward stage's last microbatch its gradients go to
// the host and a CPU Adam step for that stage is queued, overlapping the backward stages that follow. At most
// two stages' weights sit on a GPU. Steps whose gradients overflow skip and roll back their updates: one
// extra optimizer pass, on a deterministic share `overflow_prob` of the iterations.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/option.hpp"
#include "schedules/builtin.hpp"
#include "schedules/offload/offload_plan.hpp"

namespace pipesim::sim::detail {

namespace {

/// Deterministic overflow pattern: iteration i overflows when frac((i + 1) x golden ratio) < p.
bool overflows(std::int32_t iteration, double p) {
  const double x = (iteration + 1) * 0.6180339887498949;
  return x - std::floor(x) < p;
}

/// Builds one SPipe plan in phases: layout (chunk layer ranges), then per iteration each rank's forward
/// stages and backward stages in its own order, the cross-rank inputs wired afterwards, and the rollback of
/// an overflowing step.
class SpipeBuilder {
 public:
  explicit SpipeBuilder(const ScheduleInput& in);
  Plan build();

 private:
  /// An input a compute op needs from another stage; wired once every rank's ops exist.
  enum class InputKind : std::uint8_t { kForwardActivation, kBackwardGradient, kCheckpoint };
  struct PendingInput {
    OpId consumer;
    InputKind kind;
    std::int32_t chunk, m;
  };

  LayerRange fwd_range(std::int32_t c) const { return forward_chunks_[static_cast<std::size_t>(c)]; }
  /// Backward chunk k (k = 0 holds the last layers) runs on rank k mod P; its layer chunk index is NB-1-k.
  LayerRange bwd_range(std::int32_t k) const {
    return backward_chunks_[static_cast<std::size_t>(NB_ - 1 - k)];
  }
  /// The forward chunk that computes the input of layer `first` (the checkpoint of a backward chunk); -1 for
  /// the model input.
  std::int32_t producer_of(std::int32_t first) const;
  RangeCost cost(LayerRange r, std::int32_t m) const { return op_.stage_cost(r, m); }

  void emit_forward_stages(std::int32_t rank, std::int32_t it, std::int32_t round);
  /// On the last accumulation round, a backward stage's download is followed by its optimizer step.
  void emit_backward_stages(std::int32_t rank, std::int32_t it, std::int32_t round);
  std::int32_t node_of_rank(std::int32_t r) const { return r / in_.hw.node.gpus; }
  void wire_inputs();
  void end_iteration(std::int32_t it);

  const ScheduleInput& in_;
  std::int32_t P_ = 0, F_ = 0, B_ = 0, NF_ = 0, NB_ = 0, M_ = 0, L_ = 0;
  std::string stages_note_;  // why the stages differ from the default, when the job could not hold it
  bool sync_checkpoints_ = false;
  double overflow_prob_ = 0;
  std::vector<LayerRange> forward_chunks_, backward_chunks_;
  OffloadPlan op_;
  std::int64_t all_trainable_ = 0;
  std::vector<std::int64_t> node_trainable_;
  std::int32_t threads_ = 1;
  // Optimizer steps of the previous iteration per backward chunk: the next forward of those layers waits.
  std::vector<OpId> prev_adam_;
  OpId prev_rollback_ = kNoOp;
  // This iteration's stage outputs per (chunk, microbatch), optimizer steps and inputs still to wire.
  std::vector<OpId> fwd_out_, bwd_out_, adam_;
  std::vector<std::vector<OpId>> downloads_;  // per backward chunk, over the accumulation rounds
  std::vector<PendingInput> pending_;
};

SpipeBuilder::SpipeBuilder(const ScheduleInput& in) : in_(in), op_(in, "spipe", in.pp) {
  const auto& stages = in.parameters.integers("stages");
  P_ = in.pp;
  F_ = static_cast<std::int32_t>(stages[0]);
  B_ = static_cast<std::int32_t>(stages[1]);
  sync_checkpoints_ = in.parameters.flag("sync_checkpoints");
  overflow_prob_ = in.parameters.real("overflow_prob");
  if (in.microbatches < P_)
    throw InputError(Option{"microbatches"}, "",
                     fmt::format("spipe needs at least pp = {} microbatches (paper: M = 2P)", P_));
  if (!in.partition.empty())
    throw InputError(
        Option{"partition"}, "",
        ("spipe splits layers by its own rule; give " + spelled(Option{"spipe_stages"}) + " F,B"));
  const auto& layers = in.costs.front();
  const BlockSpan blocks = block_span(layers);
  L_ = blocks.count;
  if (in.parameters.is_default("stages") && (L_ < P_ * F_ || L_ < P_ * B_) && L_ >= P_) {
    // The paper's 2,6 needs 6 blocks per GPU. Not given, the stages keep its B = 3F (a backward stage, with
    // its recompute, about as long as a forward one) with as many blocks as each GPU holds, or B = all of
    // them.
    const std::int32_t most = L_ / P_;
    stages_note_ =
        fmt::format(" (chosen for {} blocks: the default {},{} needs {})", L_, F_, B_, P_ * std::max(F_, B_));
    F_ = std::max(1, most / 3);
    B_ = std::min(3 * F_, most);
  }
  if (L_ < P_ * F_ || L_ < P_ * B_) {
    // Name the count that fails (each stage holds at least one block) and the largest values that fit.
    const bool forward = L_ < P_ * F_;
    const std::int32_t most = L_ / P_;
    if (most < 1)
      throw InputError(
          Option{"pp"}, "",
          fmt::format("spipe gives every GPU at least one block: {} blocks; valid: pp of 1 .. {}", L_, L_));
    throw InputError(
        Option{"spipe_stages"}, "",
        fmt::format("{} blocks cannot fill P x {} = {} x {} = {} {} stages (one block each at "
                    "least); valid: F and B of 1 .. {} (blocks / P), e.g. {},{}",
                    L_, forward ? "F" : "B", P_, forward ? F_ : B_, P_ * (forward ? F_ : B_),
                    forward ? "forward" : "backward", most, std::min(F_, most), std::min(B_, most)));
  }
  const auto nlayers = static_cast<std::int32_t>(layers.size());
  NF_ = P_ * F_;
  NB_ = P_ * B_;
  M_ = in.microbatches;
  // NF forward and NB backward block chunks as layer ranges (equal when the count divides the blocks, as the
  // paper requires; otherwise the first chunks take one more).
  forward_chunks_ = chunk_layer_ranges(blocks, nlayers, balanced_partition(L_, NF_));
  backward_chunks_ = chunk_layer_ranges(blocks, nlayers, balanced_partition(L_, NB_));
  const RangeCost whole = range_cost(layers, 0, nlayers);
  all_trainable_ = whole.trainable;
  // A backward chunk's weights and optimizer state live on the host of the rank that runs its backward (and
  // its optimizer step); the node's cores are shared by its ranks.
  const std::int32_t gpn = in.hw.node.gpus, nodes = (P_ + gpn - 1) / gpn;
  std::vector<std::int64_t> node_params(static_cast<std::size_t>(nodes), 0), node_trainable = node_params;
  for (std::int32_t k = 0; k < NB_; ++k) {
    const RangeCost r = range_cost(layers, bwd_range(k).first, bwd_range(k).second);
    node_params[static_cast<std::size_t>(node_of_rank(k % P_))] += r.params;
    node_trainable[static_cast<std::size_t>(node_of_rank(k % P_))] += r.trainable;
  }
  for (std::int32_t n = 0; n < nodes; ++n)
    op_.hold_model_on_host(n, node_params[static_cast<std::size_t>(n)],
                           node_trainable[static_cast<std::size_t>(n)]);
  node_trainable_ = node_trainable;
  threads_ = in.optimizer_threads(std::max(1, in.hw.host.cores / std::min(P_, gpn)));
  prev_adam_.assign(static_cast<std::size_t>(NB_), kNoOp);
}

std::int32_t SpipeBuilder::producer_of(std::int32_t first) const {
  for (std::int32_t c = 0; c < NF_; ++c) {
    auto [b, e] = fwd_range(c);
    if (first - 1 >= b && first - 1 < e) return c;
  }
  return -1;
}

void SpipeBuilder::emit_forward_stages(std::int32_t r, std::int32_t it, std::int32_t round) {
  const std::int32_t first_mb = (it * in_.accum_steps + round) * M_;
  for (std::int32_t v = 0; v < F_; ++v) {
    const std::int32_t fc = v * P_ + r;
    auto rg = fwd_range(fc);
    RangeCost r0 = cost(rg, 0);
    std::vector<OpId> wait_weights;
    for (std::int32_t k = 0; k < NB_; ++k) {  // this forward uses weights updated by last step's Adam
      auto [b, e] = bwd_range(k);
      if (b < rg.second && e > rg.first) wait_weights.push_back(prev_adam_[static_cast<std::size_t>(k)]);
    }
    wait_weights.push_back(prev_rollback_);
    OpId up = op_.upload_weights(r, r0, OpTags{fc, 0, -1, r0.begin, r0.end, it}, wait_weights);
    OpId last = kNoOp;
    for (std::int32_t m = 0; m < M_; ++m) {
      RangeCost rc = cost(rg, m);
      OpTags t{fc, 0, first_mb + m, rc.begin, rc.end, it};
      last = op_.forward(r, t, rc, {up});
      fwd_out_[static_cast<std::size_t>(fc * M_ + m)] = last;
      if (fc > 0) pending_.push_back({last, InputKind::kForwardActivation, fc, m});
    }
    op_.drop_weights(r, r0, last);
  }
}

void SpipeBuilder::emit_backward_stages(std::int32_t r, std::int32_t it, std::int32_t round) {
  const std::int32_t first_mb = (it * in_.accum_steps + round) * M_;
  for (std::int32_t v = B_ - 1; v >= 0; --v) {
    const std::int32_t k = (B_ - 1 - v) * P_ + r;
    auto rg = bwd_range(k);
    RangeCost r0 = cost(rg, 0);
    OpId up = op_.upload_weights(r, r0, OpTags{NF_ + k, 1, -1, r0.begin, r0.end, it}, {});
    OpId last = kNoOp;
    for (std::int32_t m = 0; m < M_; ++m) {
      RangeCost rc = cost(rg, m);
      OpTags t{NF_ + k, 1, first_mb + m, rc.begin, rc.end, it};
      // Recompute from the checkpoint (freed with the backward), then the backward of the stage.
      OpId re = op_.recompute(r, t, rc, {up}, rc.working_bytes + (m == 0 ? r0.grad_bytes() : 0));
      pending_.push_back({re, InputKind::kCheckpoint, k, m});
      if (k > 0) pending_.push_back({re, InputKind::kBackwardGradient, k, m});
      last = op_.backward(r, t, rc, {re}, 0, rc.working_bytes + rc.input_bytes);
      bwd_out_[static_cast<std::size_t>(k * M_ + m)] = last;
    }
    auto& downs = downloads_[static_cast<std::size_t>(k)];
    downs.push_back(op_.download_gradients(r, r0, OpTags{NF_ + k, 1, -1, r0.begin, r0.end, it}, last));
    if (round + 1 < in_.accum_steps) continue;
    // Asynchronous per-stage optimizer: runs on the host while this GPU goes on with its next stages.
    adam_[static_cast<std::size_t>(k)] =
        op_.cpu_adam(op_.cpu_stream(node_of_rank(r), r % in_.hw.node.gpus),
                     OpTags{NF_ + k, 1, -1, r0.begin, r0.end, it}, r0.trainable, threads_, downs);
  }
}

void SpipeBuilder::wire_inputs() {
  for (const PendingInput& p : pending_) {
    const std::int32_t g = op_.gpu_of_op(p.consumer);
    const Op& consumer = op_.plan().ops[static_cast<std::size_t>(p.consumer)];
    OpTags t = consumer.tags;
    OpId produced = kNoOp;
    std::int32_t from = 0;
    std::int64_t bytes = 0;
    std::vector<OpId> deps;
    switch (p.kind) {
      case InputKind::kForwardActivation:
        produced = fwd_out_[static_cast<std::size_t>((p.chunk - 1) * M_ + p.m)];
        from = (p.chunk - 1) % P_;
        bytes = cost(fwd_range(p.chunk - 1), p.m).output_bytes;
        break;
      case InputKind::kBackwardGradient:
        produced = bwd_out_[static_cast<std::size_t>((p.chunk - 1) * M_ + p.m)];
        from = (p.chunk - 1) % P_;
        bytes = cost(bwd_range(p.chunk), p.m).output_bytes;
        break;
      case InputKind::kCheckpoint: {
        auto rg = bwd_range(p.chunk);
        std::int32_t fc = producer_of(rg.first);
        if (fc < 0) continue;
        produced = fwd_out_[static_cast<std::size_t>(fc * M_ + p.m)];
        from = fc % P_;
        bytes = cost(rg, p.m).input_bytes;
        // Synchronous checkpoint communication starts only when the receiving GPU reaches this backward
        // stage.
        if (sync_checkpoints_ && p.m == 0)
          deps.push_back(consumer.deps.empty() ? kNoOp : consumer.deps.front());
        break;
      }
    }
    const bool checkpoint = p.kind == InputKind::kCheckpoint;
    if (from == g) {
      // A checkpoint that stays on its GPU is held from the forward that produced it.
      if (checkpoint) op_.plan().add_alloc(produced, bytes);
      op_.add_dep(p.consumer, produced);
      continue;
    }
    deps.push_back(produced);
    // The receiver holds checkpoints from arrival until the backward that uses them.
    OpId recv = op_.transfer(op_.stream(g, OffloadPlan::kRecv), OpKind::kP2P, t, op_.gpu(from), op_.gpu(g),
                             bytes, deps, 0, checkpoint ? bytes : 0);
    op_.add_dep(p.consumer, recv);
  }
  pending_.clear();
}

void SpipeBuilder::end_iteration(std::int32_t it) {
  prev_adam_ = adam_;
  prev_rollback_ = kNoOp;
  if (overflows(it, overflow_prob_)) {
    // Bypass and rollback: flags are all-reduced at the end; already-updated stages are rolled back by an
    // inverse Adam step over every stage.
    const auto nodes = static_cast<std::int32_t>(node_trainable_.size());
    std::vector<OpId> rollbacks;
    for (std::int32_t n = 0; n < nodes; ++n)
      rollbacks.push_back(op_.cpu_adam(
          op_.cpu_stream(n, std::min(P_, in_.hw.node.gpus)), OpTags{-1, -1, -1, -1, -1, it},
          node_trainable_[static_cast<std::size_t>(n)], in_.optimizer_threads(in_.hw.host.cores), adam_));
    prev_rollback_ = rollbacks.front();
    for (std::size_t n = 1; n < rollbacks.size(); ++n) op_.add_dep(prev_rollback_, rollbacks[n]);
  }
}

Plan SpipeBuilder::build() {
  for (std::int32_t it = 0; it < in_.iterations; ++it) {
    adam_.assign(static_cast<std::size_t>(NB_), kNoOp);
    downloads_.assign(static_cast<std::size_t>(NB_), {});
    // Gradient accumulation: K flushes; gradients go down every round, the optimizer follows the last.
    for (std::int32_t round = 0; round < in_.accum_steps; ++round) {
      fwd_out_.assign(static_cast<std::size_t>(NF_ * M_), kNoOp);
      bwd_out_.assign(static_cast<std::size_t>(NB_ * M_), kNoOp);
      // Ops are created per rank in that rank's order; cross-rank inputs are wired afterwards.
      for (std::int32_t r = 0; r < P_; ++r) {
        emit_forward_stages(r, it, round);
        emit_backward_stages(r, it, round);
      }
      wire_inputs();
    }
    end_iteration(it);
  }
  std::vector<std::int32_t> part = balanced_partition(L_, NB_);
  return op_.finish(
      part, fmt::format("F={} forward and B={} backward stages per GPU{}{}{}", F_, B_, stages_note_,
                        sync_checkpoints_ ? ", synchronous checkpoints" : "",
                        overflow_prob_ > 0 ? fmt::format(", overflow probability {}", overflow_prob_) : ""));
}

Plan build_spipe(const ScheduleInput& in) {
  return SpipeBuilder(in).build();
}

std::string check(const ScheduleShape& s) {
  return s.microbatches < s.pp ? fmt::format("needs microbatches >= pp ({} < {})", s.microbatches, s.pp)
                               : std::string();
}

}  // namespace

ScheduleDescriptor describe_spipe() {
  ScheduleDescriptor d = offload_descriptor(
      "spipe", "SPipe (PACT 2025)",
      "decoupled pass assignment: forward and backward of a layer on different GPUs around a ring, F forward "
      "and B backward stages per GPU, checkpoints GPU to GPU, asynchronous per-stage CPU optimizer");
  d.parameters = {
      {"stages", "spipe_stages", ParameterType::kIntegerPair,
       "forward and backward stages per GPU (blocks divisible by P x F and P x B)",
       std::vector<std::int64_t>{2, 6}, 1, 1 << 20, "F,B"},
      {"sync_checkpoints", "spipe_sync_checkpoints", ParameterType::kFlag,
       "send checkpoints only when their backward is next, not as soon as produced", false, 0, 0, ""},
      {"overflow_prob", "overflow_prob", ParameterType::kReal,
       "share of steps whose gradients overflow (bypass and rollback)", 0.0, 0, 1, "p"}};
  d.constraints.push_back("microbatches >= pp (default 2 pp)");
  d.check = check;
  d.default_iterations = 3;
  d.default_microbatches_per_gpu = 2;
  d.build = build_spipe;
  return d;
}

}  // namespace pipesim::sim::detail
