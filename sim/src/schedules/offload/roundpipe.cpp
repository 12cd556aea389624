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

#include "pipesim/sim/error.hpp"
#include "schedules/builtin.hpp"
#include "schedules/offload/offload_plan.hpp"
#include "schedules/offload/roundpipe_partition.hpp"

namespace pipesim::sim::detail {

namespace {
constexpr std::int64_t kWeightChunkBytes = std::int64_t{256} << 20;

Plan build_roundpipe(const ScheduleInput& in) {
  const std::int32_t G = in.pp, M = in.microbatches;
  if (in.tp != 1 || in.dp != 1)
    throw InputError("--tp/--dp", "", "roundpipe runs one GPU pool; valid: --tp 1 --dp 1");
  if (!in.partition.empty())
    throw InputError("--partition", "", "roundpipe partitions automatically (its own algorithm)");
  const auto& layers = in.costs.front();
  const RoundPipePartition part = roundpipe_partition(layers, in.hw, in.dtype, M);
  const auto nf = static_cast<std::int32_t>(part.forward.size());
  const auto nb = static_cast<std::int32_t>(part.backward.size());  // backward[0] is the fused stage

  OffloadPlan op(in, "roundpipe", G);
  auto cost = [&](LayerRange r, std::int32_t m) { return op.stage_cost(r, m); };
  RangeCost whole = range_cost(layers, 0, static_cast<std::int32_t>(layers.size()));
  // Host: bf16 weights, fp32 master + Adam state + gradient staging, and every checkpoint of an iteration.
  std::int64_t checkpoints = 0;
  for (std::int32_t b = 1; b < nb; ++b)
    checkpoints += cost(part.backward[static_cast<std::size_t>(b)], 0).input_bytes;
  op.hold_model_on_host(0, whole.params, whole.trainable, checkpoints * M);

  std::vector<OpId> adam;  // per iteration
  std::int64_t counter = 0;
  for (std::int32_t it = 0; it < in.iterations; ++it) {
    // Weights of this iteration: one step stale (the optimizer of iteration it-2), or fresh when synchronous.
    const std::int32_t lag = in.parameters.flag("sync_optimizer") ? 1 : 2;
    const OpId weights_ready = it >= lag ? adam[static_cast<std::size_t>(it - lag)] : kNoOp;
    // Tensors parked in host memory by this iteration: stage outputs and checkpoints, per microbatch.
    std::vector<OpId> fwd_down(static_cast<std::size_t>(nf * M), kNoOp);
    std::vector<OpId> bwd_down(static_cast<std::size_t>(nb * M), kNoOp);
    std::vector<OpId> ckpt_down(static_cast<std::size_t>(nb * M), kNoOp);
    std::vector<OpId> grad_downloads;
    auto upload_weights = [&](std::int32_t g, const RangeCost& r, std::int32_t stage, std::int32_t pass) {
      // Background chunks (priority 1): they fill the gaps between activation uploads.
      return op.upload_weights(g, r, OpTags{stage, pass, -1, r.begin, r.end, it}, {weights_ready}, 1,
                               kWeightChunkBytes);
    };
    auto upload_activation = [&](std::int32_t g, OpId parked, std::int64_t bytes, const OpTags& t) {
      if (parked == kNoOp) return kNoOp;
      return op.transfer(op.stream(g, OffloadPlan::kActUp), OpKind::kH2D, t, op.host_of_gpu(g), op.gpu(g),
                         bytes, {parked}, 0, bytes);
    };
    auto download = [&](std::int32_t g, OpId after, std::int64_t bytes, const OpTags& t) {
      return op.transfer(op.stream(g, OffloadPlan::kDown), OpKind::kD2H, t, op.gpu(g), op.host_of_gpu(g),
                         bytes, {after}, 0, 0, bytes);
    };
    for (std::int32_t s = 0; s < nf; ++s) {  // forward jobs
      const auto g = static_cast<std::int32_t>(counter++ % G);
      auto rg = part.forward[static_cast<std::size_t>(s)];
      RangeCost r0 = cost(rg, 0);
      OpId up = upload_weights(g, r0, s, 0);
      OpId last = kNoOp;
      for (std::int32_t m = 0; m < M; ++m) {
        RangeCost r = cost(rg, m);
        OpTags t{s, 0, it * M + m, r.begin, r.end, it};
        OpId input = s > 0 ? upload_activation(g, fwd_down[static_cast<std::size_t>((s - 1) * M + m)],
                                               r.input_bytes, t)
                           : kNoOp;
        // The forward holds its output (and the checkpoints it saves) until they are downloaded.
        std::int64_t saved = 0;
        for (std::int32_t b = 1; b < nb; ++b) {
          const std::int32_t first = part.backward[static_cast<std::size_t>(b)].first;
          if (first > rg.first && first <= rg.second)
            saved += cost(part.backward[static_cast<std::size_t>(b)], m).input_bytes;
        }
        last = op.compute(g, OpKind::kForward, t, r.fwd, r.gemm, r.kernels, r.profiled ? r.fwd_ns : -1,
                          {up, input}, r.output_bytes + saved, r.input_bytes);
        fwd_down[static_cast<std::size_t>(s * M + m)] = download(g, last, r.output_bytes, t);
        for (std::int32_t b = 1; b < nb; ++b) {
          const std::int32_t first = part.backward[static_cast<std::size_t>(b)].first;
          if (first > rg.first && first <= rg.second)
            ckpt_down[static_cast<std::size_t>(b * M + m)] =
                download(g, last, cost(part.backward[static_cast<std::size_t>(b)], m).input_bytes, t);
        }
      }
      op.drop_weights(g, r0, last);
    }
    for (std::int32_t b = 0; b < nb; ++b) {  // FB, then backward jobs B1..B(nb-1)
      const auto g = static_cast<std::int32_t>(counter++ % G);
      auto rg = part.backward[static_cast<std::size_t>(b)];
      RangeCost r0 = cost(rg, 0);
      OpId up = upload_weights(g, r0, nf + b, 1);
      OpId last = kNoOp;
      for (std::int32_t m = 0; m < M; ++m) {
        RangeCost r = cost(rg, m);
        OpTags t{nf + b, 1, it * M + m, r.begin, r.end, it};
        const std::int64_t grads = m == 0 ? r0.grad_bytes() : 0;
        if (b == 0) {
          // Fused stage: input from the last forward stage, forward + loss + backward without recompute.
          OpId input =
              upload_activation(g, fwd_down[static_cast<std::size_t>((nf - 1) * M + m)], r.input_bytes, t);
          OpId f = op.compute(g, OpKind::kForward, t, r.fwd, r.gemm, r.kernels, r.profiled ? r.fwd_ns : -1,
                              {up, input}, r.working_bytes + grads);
          last = op.compute(g, OpKind::kBackward, t, r.bwd, r.gemm, 2 * r.kernels, r.profiled ? r.bwd_ns : -1,
                            {f}, b + 1 < nb ? r.input_bytes : 0, r.working_bytes + r.input_bytes);
        } else {
          OpId grad =
              upload_activation(g, bwd_down[static_cast<std::size_t>((b - 1) * M + m)], r.output_bytes, t);
          OpId ckpt = upload_activation(g, ckpt_down[static_cast<std::size_t>(b * M + m)], r.input_bytes, t);
          OpId re =
              op.compute(g, OpKind::kRecompute, t, r.checkpoint_recompute, r.gemm, r.kernels,
                         r.profiled ? r.checkpoint_recompute_ns : -1, {up, ckpt}, r.working_bytes + grads);
          last = op.compute(g, OpKind::kBackward, t, r.bwd, r.gemm, 2 * r.kernels, r.profiled ? r.bwd_ns : -1,
                            {re, grad}, b + 1 < nb ? r.input_bytes : 0,
                            r.working_bytes + r.input_bytes + r.output_bytes);
        }
        if (b + 1 < nb) bwd_down[static_cast<std::size_t>(b * M + m)] = download(g, last, r.input_bytes, t);
      }
      OpId grads_down = op.download_gradients(g, r0, OpTags{nf + b, 1, -1, r0.begin, r0.end, it}, last);
      grad_downloads.push_back(grads_down);
    }
    adam.push_back(op.cpu_adam(op.cpu_stream(0, 0), OpTags{-1, -1, -1, -1, -1, it}, whole.trainable,
                               in.hw.host.cores, grad_downloads));
  }
  std::vector<std::int32_t> counts;
  for (auto [b, e] : part.forward) counts.push_back(e - b);
  return op.finish(
      counts, fmt::format("{} forward + {} backward stages (fused first), stage time target {:.3f} ms{}", nf,
                          nb, static_cast<double>(part.stage_time_ns) / 1e6,
                          in.parameters.flag("sync_optimizer") ? ", synchronous optimizer" : ""));
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
  d.parameters = {{"sync_optimizer", "--roundpipe-sync", ParameterType::kFlag,
                   "wait for the optimizer (no stale weights)", false, 0, 0, ""}};
  d.constraints.push_back("microbatches default to G + 1; partitions automatically (RoundPipe's algorithm)");
  d.default_iterations = 4;
  d.default_microbatches_per_gpu = 1;
  d.default_microbatches_extra = 1;
  d.partitioner.rule = PartitionRule::kSeparateForwardBackward;
  d.partitioner.own_partition = own_partition;
  d.build = build_roundpipe;
  return d;
}

}  // namespace pipesim::sim::detail
