// Mobius: more stages than GPUs (v per GPU), stage weights prefetched from host memory (at most two stages'
// weights on a GPU), the same GPU runs forward and backward of its stages, all microbatches of a stage back
// to back, gradients downloaded after each backward stage, and one CPU optimizer step at the end of the
// iteration. Cross mapping places consecutive stages on GPUs under different PCIe switches to spread the
// uploads.
#include <algorithm>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/option.hpp"
#include "schedules/builtin.hpp"
#include "schedules/offload/offload_plan.hpp"

namespace pipesim::sim::detail {

namespace {

/// GPU order for stage placement: round-robin over PCIe switches when cross mapping, else 0..P-1.
std::vector<std::int32_t> stage_gpu_order(const ScheduleInput& in) {
  std::vector<std::int32_t> order;
  if (!in.parameters.flag("cross_mapping")) {
    for (std::int32_t g = 0; g < in.pp; ++g) order.push_back(g);
    return order;
  }
  const auto& sw = in.hw.node.pcie.switches;
  std::size_t widest = 0;
  for (const auto& s : sw) widest = std::max(widest, s.size());
  for (std::int32_t base = 0; base < in.pp; base += in.hw.node.gpus)
    for (std::size_t k = 0; k < widest; ++k)
      for (const auto& s : sw)
        if (k < s.size() && base + s[k] < in.pp) order.push_back(base + s[k]);
  return order;
}

/// Builds one Mobius plan: the hosts' share of the model, then per iteration and accumulation round a
/// forward sweep and a backward sweep over the stages, and one CPU optimizer step per node.
class MobiusBuilder {
 public:
  explicit MobiusBuilder(const ScheduleInput& in);
  Plan build();

 private:
  /// The stages' block counts, checked before the plan exists (its own input checks come after).
  std::vector<std::int32_t> checked_partition() const;
  std::int32_t gpu_of(std::int32_t c) const { return order_[static_cast<std::size_t>(c % P_)]; }
  std::size_t node_of_stage(std::int32_t c) const { return static_cast<std::size_t>(gpu_of(c) / gpn_); }
  RangeCost cost(std::int32_t c, std::int32_t m) const {
    return op_.stage_cost(range_[static_cast<std::size_t>(c)], m);
  }
  OpId upload(std::int32_t g, std::int32_t c, std::int32_t pass, const RangeCost& r);
  OpId input_from(std::int32_t g, std::int32_t from_gpu, OpId produced, std::int64_t bytes, const OpTags& t);

  void hold_model_on_hosts();
  void forward_sweep(std::int32_t first_mb);
  void backward_sweep(std::int32_t first_mb);
  void optimizer_step();

  const ScheduleInput& in_;
  const std::int32_t P_, S_, M_;
  const std::vector<LayerCost>& layers_;
  const BlockSpan blocks_;
  const std::vector<std::int32_t> part_;
  const std::vector<LayerRange> range_;
  const std::vector<std::int32_t> order_;
  OffloadPlan op_;
  const std::int32_t gpn_, nodes_;
  std::vector<std::int64_t> node_trainable_;  // per node
  std::vector<std::int32_t> resident_stage_;  // per GPU, -1 for none
  std::vector<OpId> previous_optimizer_;      // per node
  // The iteration being built: stage outputs per (stage, microbatch) and gradient downloads per node.
  std::int32_t it_ = 0;
  std::vector<OpId> fwd_out_, bwd_out_;
  std::vector<std::vector<OpId>> downloads_;
};

// Members initialize in declaration order: the stage checks precede the plan's own.
MobiusBuilder::MobiusBuilder(const ScheduleInput& in)
    : in_(in),
      P_(in.pp),
      S_(P_ * in.virtual_stages),
      M_(in.microbatches),
      layers_(in.costs.front()),
      blocks_(block_span(layers_)),
      part_(checked_partition()),
      range_(chunk_layer_ranges(blocks_, static_cast<std::int32_t>(layers_.size()), part_)),
      order_(stage_gpu_order(in)),
      op_(in, "mobius", P_),
      gpn_(in.hw.node.gpus),
      nodes_((P_ + gpn_ - 1) / gpn_) {}

std::vector<std::int32_t> MobiusBuilder::checked_partition() const {
  std::vector<std::int32_t> part =
      in_.partition.empty() ? balanced_partition(blocks_.count, S_) : in_.partition;
  if (static_cast<std::int32_t>(part.size()) != S_)
    throw InputError(Option{"partition"}, "",
                     fmt::format("has {} entries; mobius expects pp x virtual stages = {}", part.size(), S_));
  if (blocks_.count < S_ && in_.partition.empty())
    throw InputError(Option{"virtual_stages"}, "",
                     fmt::format("{} stages exceed the model's {} blocks", S_, blocks_.count));
  return part;
}

// Each node's host keeps the weights and optimizer state of the stages its GPUs run, and its cores step them.
void MobiusBuilder::hold_model_on_hosts() {
  std::vector<std::int64_t> node_params(static_cast<std::size_t>(nodes_), 0);
  node_trainable_ = node_params;
  for (std::int32_t c = 0; c < S_; ++c) {
    const RangeCost r = range_cost(layers_, range_[static_cast<std::size_t>(c)].first,
                                   range_[static_cast<std::size_t>(c)].second);
    node_params[node_of_stage(c)] += r.params;
    node_trainable_[node_of_stage(c)] += r.trainable;
  }
  for (std::int32_t n = 0; n < nodes_; ++n)
    op_.hold_model_on_host(n, node_params[static_cast<std::size_t>(n)],
                           node_trainable_[static_cast<std::size_t>(n)]);
}

OpId MobiusBuilder::upload(std::int32_t g, std::int32_t c, std::int32_t pass, const RangeCost& r) {
  auto gi = static_cast<std::size_t>(g);
  if (resident_stage_[gi] == c) return kNoOp;  // forward of the last stage flows straight into its backward
  resident_stage_[gi] = c;
  return op_.upload_weights(g, r, OpTags{c, pass, -1, r.begin, r.end, it_},
                            {previous_optimizer_[static_cast<std::size_t>(g / gpn_)]});
}

OpId MobiusBuilder::input_from(std::int32_t g, std::int32_t from_gpu, OpId produced, std::int64_t bytes,
                               const OpTags& t) {
  if (produced == kNoOp || from_gpu == g) return produced;
  return op_.transfer(op_.stream(g, OffloadPlan::kRecv), OpKind::kP2P, t, op_.gpu(from_gpu), op_.gpu(g),
                      bytes, {produced});
}

// Stage by stage, every microbatch back to back.
void MobiusBuilder::forward_sweep(std::int32_t first_mb) {
  for (std::int32_t c = 0; c < S_; ++c) {
    const std::int32_t g = gpu_of(c);
    RangeCost r0 = cost(c, 0);
    OpId up = upload(g, c, 0, r0);
    OpId last = kNoOp;
    for (std::int32_t m = 0; m < M_; ++m) {
      RangeCost r = cost(c, m);
      OpTags t{c, 0, first_mb + m, r.begin, r.end, it_};
      OpId in_op = c > 0 ? input_from(g, gpu_of(c - 1), fwd_out_[static_cast<std::size_t>((c - 1) * M_ + m)],
                                      cost(c - 1, m).output_bytes, t)
                         : kNoOp;
      last = op_.forward(g, t, r, {up, in_op}, r.input_bytes /* checkpoint kept for the backward */);
      fwd_out_[static_cast<std::size_t>(c * M_ + m)] = last;
    }
    if (c != S_ - 1) {  // the last stage's weights stay for its backward
      op_.drop_weights(g, r0, last);
      resident_stage_[static_cast<std::size_t>(g)] = -1;
    }
  }
}

// Reverse stage order, recomputing from the checkpoints.
void MobiusBuilder::backward_sweep(std::int32_t first_mb) {
  for (std::int32_t c = S_ - 1; c >= 0; --c) {
    const std::int32_t g = gpu_of(c);
    RangeCost r0 = cost(c, 0);
    OpId up = upload(g, c, 1, r0);
    OpId last = kNoOp;
    for (std::int32_t m = 0; m < M_; ++m) {
      RangeCost r = cost(c, m);
      OpTags t{c, 1, first_mb + m, r.begin, r.end, it_};
      OpId grad_in = c < S_ - 1
                         ? input_from(g, gpu_of(c + 1), bwd_out_[static_cast<std::size_t>((c + 1) * M_ + m)],
                                      r.output_bytes, t)
                         : kNoOp;
      OpId rc = op_.recompute(g, t, r, {up, grad_in}, r.working_bytes + (m == 0 ? r0.grad_bytes() : 0));
      last = op_.backward(g, t, r, {rc}, 0, r.working_bytes + r.input_bytes);
      bwd_out_[static_cast<std::size_t>(c * M_ + m)] = last;
    }
    OpId down = op_.download_gradients(g, r0, OpTags{c, 1, -1, r0.begin, r0.end, it_}, last);
    resident_stage_[static_cast<std::size_t>(g)] = -1;
    downloads_[node_of_stage(c)].push_back(down);
  }
}

// One optimizer step per node over its stages on all its cores once their gradients are on the host.
void MobiusBuilder::optimizer_step() {
  for (std::int32_t n = 0; n < nodes_; ++n)
    previous_optimizer_[static_cast<std::size_t>(n)] = op_.cpu_adam(
        op_.cpu_stream(n, 0), OpTags{-1, -1, -1, -1, -1, it_}, node_trainable_[static_cast<std::size_t>(n)],
        in_.optimizer_threads(in_.hw.host.cores), downloads_[static_cast<std::size_t>(n)]);
}

Plan MobiusBuilder::build() {
  hold_model_on_hosts();
  resident_stage_.assign(static_cast<std::size_t>(P_), -1);
  previous_optimizer_.assign(static_cast<std::size_t>(nodes_), kNoOp);
  for (it_ = 0; it_ < in_.iterations; ++it_) {
    fwd_out_.assign(static_cast<std::size_t>(S_) * static_cast<std::size_t>(M_), kNoOp);
    bwd_out_ = fwd_out_;
    downloads_.assign(static_cast<std::size_t>(nodes_), {});
    // Gradient accumulation: K flushes, each stage's gradients downloaded (and summed on the host) every
    // round.
    for (std::int32_t round = 0; round < in_.accum_steps; ++round) {
      const std::int32_t first_mb = (it_ * in_.accum_steps + round) * M_;
      forward_sweep(first_mb);
      backward_sweep(first_mb);
    }
    optimizer_step();
  }
  return op_.finish(part_, in_.parameters.flag("cross_mapping") ? "cross mapping of stages to GPUs" : "");
}

Plan build_mobius(const ScheduleInput& in) {
  return MobiusBuilder(in).build();
}

}  // namespace

ScheduleDescriptor describe_mobius() {
  ScheduleDescriptor d = offload_descriptor(
      "mobius", "Mobius (Feng et al., ASPLOS 2023); layout of SPipe's reimplementation",
      "more stages than GPUs, stage weights prefetched from host memory, same GPU runs F and B of a stage, "
      "CPU optimizer at the end of the iteration");
  d.parameters = {{"cross_mapping", "cross_mapping", ParameterType::kFlag,
                   "consecutive stages on GPUs under different PCIe switches", false, 0, 0, ""}};
  d.constraints.push_back(("v stages per GPU (" + spelled(Option{"virtual_stages"}) + ", default 2)"));
  d.multi_chunk = true;
  d.default_virtual_stages = 2;
  d.default_iterations = 2;
  d.default_microbatches_per_gpu = 2;
  d.planner.virtual_stages = {2, 3, 4};
  d.build = build_mobius;
  return d;
}

}  // namespace pipesim::sim::detail
