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

Plan build_mobius(const ScheduleInput& in) {
  const std::int32_t P = in.pp, v = in.virtual_stages, S = P * v;
  const auto& layers = in.costs.front();
  const BlockSpan blocks = block_span(layers);
  std::vector<std::int32_t> part = in.partition.empty() ? balanced_partition(blocks.count, S) : in.partition;
  if (static_cast<std::int32_t>(part.size()) != S)
    throw InputError(Option{"partition"}, "",
                     fmt::format("has {} entries; mobius expects pp x virtual stages = {}", part.size(), S));
  if (blocks.count < S && in.partition.empty())
    throw InputError(Option{"virtual_stages"}, "",
                     fmt::format("{} stages exceed the model's {} blocks", S, blocks.count));
  const std::vector<LayerRange> range =
      chunk_layer_ranges(blocks, static_cast<std::int32_t>(layers.size()), part);
  const std::vector<std::int32_t> order = stage_gpu_order(in);
  auto gpu_of = [&](std::int32_t c) { return order[static_cast<std::size_t>(c % P)]; };

  OffloadPlan op(in, "mobius", P);
  // Each node's host keeps the weights and optimizer state of the stages its GPUs run, and its cores step
  // them.
  const std::int32_t gpn = in.hw.node.gpus, nodes = (P + gpn - 1) / gpn;
  auto node_of_stage = [&](std::int32_t c) { return static_cast<std::size_t>(gpu_of(c) / gpn); };
  std::vector<std::int64_t> node_params(static_cast<std::size_t>(nodes), 0), node_trainable = node_params;
  for (std::int32_t c = 0; c < S; ++c) {
    const RangeCost r = range_cost(layers, range[static_cast<std::size_t>(c)].first,
                                   range[static_cast<std::size_t>(c)].second);
    node_params[node_of_stage(c)] += r.params;
    node_trainable[node_of_stage(c)] += r.trainable;
  }
  for (std::int32_t n = 0; n < nodes; ++n)
    op.hold_model_on_host(n, node_params[static_cast<std::size_t>(n)],
                          node_trainable[static_cast<std::size_t>(n)]);

  const std::int32_t M = in.microbatches;
  std::vector<std::int32_t> resident_stage(static_cast<std::size_t>(P), -1);
  std::vector<OpId> previous_optimizer(static_cast<std::size_t>(nodes), kNoOp);  // per node
  for (std::int32_t it = 0; it < in.iterations; ++it) {
    std::vector<OpId> fwd_out(static_cast<std::size_t>(S) * static_cast<std::size_t>(M), kNoOp);
    std::vector<OpId> bwd_out = fwd_out;
    std::vector<std::vector<OpId>> downloads(static_cast<std::size_t>(nodes));  // per node
    auto cost = [&](std::int32_t c, std::int32_t m) {
      return op.stage_cost(range[static_cast<std::size_t>(c)], m);
    };
    auto upload = [&](std::int32_t g, std::int32_t c, std::int32_t pass, const RangeCost& r) -> OpId {
      auto gi = static_cast<std::size_t>(g);
      if (resident_stage[gi] == c)
        return kNoOp;  // forward of the last stage flows straight into its backward
      resident_stage[gi] = c;
      return op.upload_weights(g, r, OpTags{c, pass, -1, r.begin, r.end, it},
                               {previous_optimizer[static_cast<std::size_t>(g / gpn)]});
    };
    auto input_from = [&](std::int32_t g, std::int32_t from_gpu, OpId produced, std::int64_t bytes,
                          const OpTags& t) {
      if (produced == kNoOp || from_gpu == g) return produced;
      return op.transfer(op.stream(g, OffloadPlan::kRecv), OpKind::kP2P, t, op.gpu(from_gpu), op.gpu(g),
                         bytes, {produced});
    };
    // Gradient accumulation: K flushes, each stage's gradients downloaded (and summed on the host) every
    // round.
    for (std::int32_t round = 0; round < in.accum_steps; ++round) {
      const std::int32_t first_mb = (it * in.accum_steps + round) * M;
      for (std::int32_t c = 0; c < S; ++c) {  // forward: stage by stage, every microbatch back to back
        const std::int32_t g = gpu_of(c);
        RangeCost r0 = cost(c, 0);
        OpId up = upload(g, c, 0, r0);
        OpId last = kNoOp;
        for (std::int32_t m = 0; m < M; ++m) {
          RangeCost r = cost(c, m);
          OpTags t{c, 0, first_mb + m, r.begin, r.end, it};
          OpId in_op = c > 0
                           ? input_from(g, gpu_of(c - 1), fwd_out[static_cast<std::size_t>((c - 1) * M + m)],
                                        cost(c - 1, m).output_bytes, t)
                           : kNoOp;
          last = op.forward(g, t, r, {up, in_op}, r.input_bytes /* checkpoint kept for the backward */);
          fwd_out[static_cast<std::size_t>(c * M + m)] = last;
        }
        if (c != S - 1) {  // the last stage's weights stay for its backward
          op.drop_weights(g, r0, last);
          resident_stage[static_cast<std::size_t>(g)] = -1;
        }
      }
      for (std::int32_t c = S - 1; c >= 0;
           --c) {  // backward: reverse stage order, recompute from checkpoints
        const std::int32_t g = gpu_of(c);
        RangeCost r0 = cost(c, 0);
        OpId up = upload(g, c, 1, r0);
        OpId last = kNoOp;
        for (std::int32_t m = 0; m < M; ++m) {
          RangeCost r = cost(c, m);
          OpTags t{c, 1, first_mb + m, r.begin, r.end, it};
          OpId grad_in =
              c < S - 1 ? input_from(g, gpu_of(c + 1), bwd_out[static_cast<std::size_t>((c + 1) * M + m)],
                                     r.output_bytes, t)
                        : kNoOp;
          OpId rc = op.recompute(g, t, r, {up, grad_in}, r.working_bytes + (m == 0 ? r0.grad_bytes() : 0));
          last = op.backward(g, t, r, {rc}, 0, r.working_bytes + r.input_bytes);
          bwd_out[static_cast<std::size_t>(c * M + m)] = last;
        }
        OpId down = op.download_gradients(g, r0, OpTags{c, 1, -1, r0.begin, r0.end, it}, last);
        resident_stage[static_cast<std::size_t>(g)] = -1;
        downloads[node_of_stage(c)].push_back(down);
      }
    }
    // One optimizer step per node over its stages on all its cores once their gradients are on the host.
    for (std::int32_t n = 0; n < nodes; ++n)
      previous_optimizer[static_cast<std::size_t>(n)] = op.cpu_adam(
          op.cpu_stream(n, 0), OpTags{-1, -1, -1, -1, -1, it}, node_trainable[static_cast<std::size_t>(n)],
          in.optimizer_threads(in.hw.host.cores), downloads[static_cast<std::size_t>(n)]);
  }
  return op.finish(part, in.parameters.flag("cross_mapping") ? "cross mapping of stages to GPUs" : "");
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
