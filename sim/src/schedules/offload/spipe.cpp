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

#include "pipesim/sim/error.hpp"
#include "schedules/builtin.hpp"
#include "schedules/offload/offload_plan.hpp"

namespace pipesim::sim::detail {

namespace {

/// Deterministic overflow pattern: iteration i overflows when frac((i + 1) x golden ratio) < p.
bool overflows(std::int32_t iteration, double p) {
  const double x = (iteration + 1) * 0.6180339887498949;
  return x - std::floor(x) < p;
}

Plan build_spipe(const ScheduleInput& in) {
  const auto& stages = in.parameters.integers("stages");
  const std::int32_t P = in.pp, F = static_cast<std::int32_t>(stages[0]),
                     B = static_cast<std::int32_t>(stages[1]);
  const bool sync_checkpoints = in.parameters.flag("sync_checkpoints");
  const double overflow_prob = in.parameters.real("overflow_prob");
  if (in.tp != 1 || in.dp != 1)
    throw InputError("--tp/--dp", "", "spipe runs one ring over the GPUs; valid: --tp 1 --dp 1");
  if (F < 1 || B < 1) throw InputError("--spipe-stages", "", "F and B must be >= 1");
  if (in.microbatches < P)
    throw InputError("--microbatches", "",
                     fmt::format("spipe needs at least pp = {} microbatches (paper: M = 2P)", P));
  if (!in.partition.empty())
    throw InputError("--partition", "", "spipe splits layers by its own rule; give --spipe-stages F,B");
  const auto& layers = in.costs.front();
  const BlockSpan blocks = block_span(layers);
  const std::int32_t L = blocks.count;
  if (L < P * F || L < P * B)
    throw InputError(
        "--spipe-stages", "",
        fmt::format("{} blocks are fewer than P x F = {} or P x B = {} stages", L, P * F, P * B));
  const std::int32_t nlayers = static_cast<std::int32_t>(layers.size());
  const std::int32_t NF = P * F, NB = P * B, M = in.microbatches;
  // NF forward and NB backward block chunks as layer ranges (equal when the count divides the blocks, as the
  // paper requires; otherwise the first chunks take one more).
  const std::vector<LayerRange> forward_chunks =
      chunk_layer_ranges(blocks, nlayers, balanced_partition(L, NF));
  const std::vector<LayerRange> backward_chunks =
      chunk_layer_ranges(blocks, nlayers, balanced_partition(L, NB));
  auto fwd_range = [&](std::int32_t c) { return forward_chunks[static_cast<std::size_t>(c)]; };
  // Backward chunk k (k = 0 holds the last layers) runs on rank k mod P; its layer chunk index is NB-1-k.
  auto bwd_range = [&](std::int32_t k) { return backward_chunks[static_cast<std::size_t>(NB - 1 - k)]; };
  // The forward chunk that computes the input of layer `first` (the checkpoint of a backward chunk).
  auto producer_of = [&](std::int32_t first) {
    for (std::int32_t c = 0; c < NF; ++c) {
      auto [b, e] = fwd_range(c);
      if (first - 1 >= b && first - 1 < e) return c;
    }
    return -1;  // the model input: no checkpoint to send
  };

  OffloadPlan op(in, "spipe", P);
  auto cost = [&](LayerRange r, std::int32_t m) { return op.stage_cost(r, m); };
  const std::int64_t all_trainable = range_cost(layers, 0, nlayers).trainable;
  op.hold_model_on_host(0, range_cost(layers, 0, nlayers).params, all_trainable);

  std::vector<OpId> last_compute(static_cast<std::size_t>(P), kNoOp);
  // Optimizer steps of the previous iteration per backward chunk: the next forward of those layers waits.
  std::vector<OpId> prev_adam(static_cast<std::size_t>(NB), kNoOp);
  OpId prev_rollback = kNoOp;
  const std::int32_t threads = std::max(1, in.hw.host.cores / P);
  for (std::int32_t it = 0; it < in.iterations; ++it) {
    std::vector<OpId> fwd_out(static_cast<std::size_t>(NF * M), kNoOp),
        bwd_out(static_cast<std::size_t>(NB * M), kNoOp);
    std::vector<OpId> ckpt(static_cast<std::size_t>(NB * M), kNoOp);
    std::vector<OpId> adam(static_cast<std::size_t>(NB), kNoOp);
    auto upload = [&](std::int32_t g, const RangeCost& r, std::vector<OpId> deps, std::int32_t stage,
                      std::int32_t pass) {
      return op.upload_weights(g, r, OpTags{stage, pass, -1, r.begin, r.end, it}, std::move(deps));
    };
    // Ops are created per rank in that rank's order; cross-rank inputs are wired afterwards.
    struct Pending {
      OpId consumer;
      std::int32_t kind;  // 0: forward input, 1: gradient input, 2: checkpoint
      std::int32_t chunk, m;
    };
    std::vector<Pending> pending;
    for (std::int32_t r = 0; r < P; ++r) {
      for (std::int32_t v = 0; v < F; ++v) {
        const std::int32_t fc = v * P + r;
        auto rg = fwd_range(fc);
        RangeCost r0 = cost(rg, 0);
        std::vector<OpId> wait_weights;
        for (std::int32_t k = 0; k < NB; ++k) {  // this forward uses weights updated by last step's Adam
          auto [b, e] = bwd_range(k);
          if (b < rg.second && e > rg.first) wait_weights.push_back(prev_adam[static_cast<std::size_t>(k)]);
        }
        wait_weights.push_back(prev_rollback);
        OpId up = upload(r, r0, wait_weights, fc, 0);
        OpId last = kNoOp;
        for (std::int32_t m = 0; m < M; ++m) {
          RangeCost rc = cost(rg, m);
          OpTags t{fc, 0, it * M + m, rc.begin, rc.end, it};
          last = op.compute(r, OpKind::kForward, t, rc.fwd, rc.gemm, rc.kernels, rc.profiled ? rc.fwd_ns : -1,
                            {up});
          fwd_out[static_cast<std::size_t>(fc * M + m)] = last;
          if (fc > 0) pending.push_back({last, 0, fc, m});
        }
        op.drop_weights(r, r0, last);
      }
      for (std::int32_t v = B - 1; v >= 0; --v) {
        const std::int32_t k = (B - 1 - v) * P + r;
        auto rg = bwd_range(k);
        RangeCost r0 = cost(rg, 0);
        OpId up = upload(r, r0, {}, NF + k, 1);
        OpId last = kNoOp;
        for (std::int32_t m = 0; m < M; ++m) {
          RangeCost rc = cost(rg, m);
          OpTags t{NF + k, 1, it * M + m, rc.begin, rc.end, it};
          // Recompute from the checkpoint (freed with the backward), then the backward of the stage.
          OpId re = op.compute(r, OpKind::kRecompute, t, rc.checkpoint_recompute, rc.gemm, rc.kernels,
                               rc.profiled ? rc.checkpoint_recompute_ns : -1, {up},
                               rc.working_bytes + (m == 0 ? r0.grad_bytes() : 0));
          pending.push_back({re, 2, k, m});
          if (k > 0) pending.push_back({re, 1, k, m});
          last = op.compute(r, OpKind::kBackward, t, rc.bwd, rc.gemm, 2 * rc.kernels,
                            rc.profiled ? rc.bwd_ns : -1, {re}, 0, rc.working_bytes + rc.input_bytes);
          bwd_out[static_cast<std::size_t>(k * M + m)] = last;
        }
        OpId down = op.download_gradients(r, r0, OpTags{NF + k, 1, -1, r0.begin, r0.end, it}, last);
        // Asynchronous per-stage optimizer: runs on the host while this GPU goes on with its next stages.
        adam[static_cast<std::size_t>(k)] = op.cpu_adam(
            op.cpu_stream(0, r), OpTags{NF + k, 1, -1, r0.begin, r0.end, it}, r0.trainable, threads, {down});
      }
    }
    for (const Pending& p : pending) {
      const std::int32_t g = op.gpu_of_op(p.consumer);
      OpTags t = op.plan().ops[static_cast<std::size_t>(p.consumer)].tags;
      OpId produced = kNoOp;
      std::int32_t from = 0;
      std::int64_t bytes = 0;
      std::vector<OpId> deps;
      if (p.kind == 0) {
        produced = fwd_out[static_cast<std::size_t>((p.chunk - 1) * M + p.m)];
        from = (p.chunk - 1) % P;
        bytes = cost(fwd_range(p.chunk - 1), p.m).output_bytes;
      } else if (p.kind == 1) {
        produced = bwd_out[static_cast<std::size_t>((p.chunk - 1) * M + p.m)];
        from = (p.chunk - 1) % P;
        bytes = cost(bwd_range(p.chunk), p.m).output_bytes;
      } else {
        auto rg = bwd_range(p.chunk);
        std::int32_t fc = producer_of(rg.first);
        if (fc < 0) continue;
        produced = fwd_out[static_cast<std::size_t>(fc * M + p.m)];
        from = fc % P;
        bytes = cost(rg, p.m).input_bytes;
        // Synchronous checkpoint communication starts only when the receiving GPU reaches this backward
        // stage.
        if (sync_checkpoints && p.m == 0)
          deps.push_back(op.plan().ops[static_cast<std::size_t>(p.consumer)].deps.empty()
                             ? kNoOp
                             : op.plan().ops[static_cast<std::size_t>(p.consumer)].deps.front());
      }
      if (from == g) {
        // A checkpoint that stays on its GPU is held from the forward that produced it.
        if (p.kind == 2) op.plan().ops[static_cast<std::size_t>(produced)].alloc_bytes += bytes;
        op.add_dep(p.consumer, produced);
        continue;
      }
      deps.push_back(produced);
      // The receiver holds checkpoints from arrival until the backward that uses them.
      OpId recv = op.transfer(op.stream(g, OffloadPlan::kRecv), OpKind::kP2P, t, op.gpu(from), op.gpu(g),
                              bytes, deps, 0, p.kind == 2 ? bytes : 0);
      op.add_dep(p.consumer, recv);
    }
    prev_adam = adam;
    prev_rollback = kNoOp;
    if (overflows(it, overflow_prob)) {
      // Bypass and rollback: flags are all-reduced at the end; already-updated stages are rolled back by an
      // inverse Adam step over every stage.
      prev_rollback = op.cpu_adam(op.cpu_stream(0, P), OpTags{-1, -1, -1, -1, -1, it}, all_trainable,
                                  in.hw.host.cores, adam);
    }
  }
  std::vector<std::int32_t> part;
  for (std::int32_t c = 0; c < NB; ++c) part.push_back(L / NB + (c < L % NB ? 1 : 0));
  return op.finish(
      part, fmt::format("F={} forward and B={} backward stages per GPU{}{}", F, B,
                        sync_checkpoints ? ", synchronous checkpoints" : "",
                        overflow_prob > 0 ? fmt::format(", overflow probability {}", overflow_prob) : ""));
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
      {"stages", "--spipe-stages", ParameterType::kIntegerPair,
       "forward and backward stages per GPU, F,B (blocks divisible by P F and P B)",
       std::vector<std::int64_t>{2, 6}, 1, 1 << 20, "F,B"},
      {"sync_checkpoints", "--spipe-sync-checkpoints", ParameterType::kFlag,
       "send checkpoints only when their backward is next (default: as soon as produced)", false, 0, 0, ""},
      {"overflow_prob", "--overflow-prob", ParameterType::kReal,
       "share of steps whose gradients overflow (bypass and rollback)", 0.0, 0, 1, "p"}};
  d.constraints.push_back("microbatches >= pp (default 2 pp)");
  d.check = check;
  d.default_iterations = 3;
  d.default_microbatches_per_gpu = 2;
  d.build = build_spipe;
  return d;
}

}  // namespace pipesim::sim::detail
