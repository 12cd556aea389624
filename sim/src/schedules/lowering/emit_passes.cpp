// The lowering's passes: each stage's tasks on every replica's GPU, compute ops, TP collectives, ZeRO-3
// gathers, pipeline inputs.
#include "schedules/lowering/builder.hpp"

namespace pipesim::sim::lowering {

DeviceId Builder::tp_next_device(const GpuRank& g) {
  if (g.tp_next == kNone) g.tp_next = device_of_rank(global_rank(g.d, g.stage, tp_peer(g.t)));
  return g.tp_next;
}

Builder::GpuRank Builder::gpu_rank(std::size_t replica, std::int32_t stage) {
  const auto [d, t] = replicas_[replica];
  const std::size_t index = replica * static_cast<std::size_t>(in_.pp) + static_cast<std::size_t>(stage);
  GpuRank g{replica, stage, d, t, streams_[index], dp_ops_[index], kNone, 0, 0, {}, kNone};
  g.self = plan_.streams[static_cast<std::size_t>(g.stream(kComputeStream))].device;
  return g;
}

void Builder::emit_stage(std::int32_t stage, const std::vector<std::int64_t>& trainable) {
  // Each task is emitted on every replica's GPU before the next task: the ops that run at about the same
  // time sit together in the plan, so the engine's pass over them follows memory instead of jumping between
  // GPUs' blocks. Each GPU's own ops keep their order.
  std::vector<GpuRank> gpus;
  gpus.reserve(replicas_.size());
  for (std::size_t r = 0; r < replicas_.size(); ++r) {
    gpus.push_back(gpu_rank(r, stage));
    gpus.back().trainable = trainable[r * static_cast<std::size_t>(in_.pp) + static_cast<std::size_t>(stage)];
  }
  const auto& order = orders_[static_cast<std::size_t>(stage)];

  // The task that completes each chunk's weight gradients in the last accumulation round carries the DP
  // buckets.
  std::vector<std::int64_t> last_grad_task(static_cast<std::size_t>(in_.virtual_stages), -1);
  for (std::size_t k = 0; k < order.size(); ++k)
    if (order[k].kind == TaskKind::kBackward || order[k].kind == TaskKind::kBackwardWeight)
      last_grad_task[static_cast<std::size_t>(order[k].chunk)] = static_cast<std::int64_t>(k);

  // The op that made last iteration's weights available to each GPU.
  std::vector<OpId> previous_update(gpus.size(), kNone);
  for (std::int32_t iter = 0; iter < in_.iterations; ++iter) {
    for (GpuRank& g : gpus) {
      g.dp_ops.clear();
      first_in_iteration_[static_cast<std::size_t>(g.stream(kComputeStream))] = kNone;
    }
    for (std::int32_t round = 0; round < in_.accum_steps; ++round) {
      for (std::size_t k = 0; k < order.size(); ++k) {
        // ZeRO-2 keeps only its shard of the gradients, so every microbatch's gradients are reduce-scattered
        // as its backward produces them; otherwise the last flush's last backward of each chunk carries them.
        const bool grad_task =
            order[k].kind == TaskKind::kBackward || order[k].kind == TaskKind::kBackwardWeight;
        const bool carries_dp = grad_replicas() > 1 && in_.overlap_grad_sync &&
                                (in_.sharding.stage == ZeroStage::k2
                                     ? grad_task
                                     : round == in_.accum_steps - 1 &&
                                           static_cast<std::int64_t>(k) ==
                                               last_grad_task[static_cast<std::size_t>(order[k].chunk)]);
        for (GpuRank& g : gpus) {
          if (order[k].paired_with_next && k + 1 < order.size()) pair_inputs(g, order[k + 1], iter, round);
          if (shards_params())
            emit_layerwise_task(g, order[k], iter, round);
          else
            emit_task(g, order[k], iter, round, carries_dp);
        }
      }
    }
    for (std::size_t r = 0; r < gpus.size(); ++r) {
      GpuRank& g = gpus[r];
      const auto compute = static_cast<std::size_t>(g.stream(kComputeStream));
      // The next iteration's first compute waits for the weights this iteration's optimizer produces (the
      // compute stream orders it after a GPU optimizer anyway; an offloaded one returns them over PCIe).
      if (previous_update[r] != kNone && first_in_iteration_[compute] != kNone)
        plan_.ops[static_cast<std::size_t>(first_in_iteration_[compute])].deps.push_back(previous_update[r]);
      last_compute_op_ = last_on_stream_[compute];
      if (grad_replicas() > 1 && !in_.overlap_grad_sync) emit_grad_sync_after_backward(g, iter);
      previous_update[r] = g.weights_updated = emit_optimizer(g, iter);
      plan_.add_free(previous_update[r], g.step_grads);
      g.step_grads = 0;
    }
  }
}

std::int64_t Builder::place_weights(const GpuRank& g) {
  std::int64_t trainable = 0, weights = 0, resident = 0, buffers = 0, backward_only = 0;
  for (std::int32_t v = 0; v < in_.virtual_stages; ++v) {
    const RangeCost& cc = chunk_costs_[0][static_cast<std::size_t>(model_chunk(v, g.stage))];
    trainable += cc.trainable;
    weights += layer_weight_params(cc);
    backward_only += backward_only_gradients(cc);
    resident += cc.param_bytes - step_gradients(cc) - backward_only_gradients(cc);
    buffers += cc.grad_buffer_bytes + cc.fp8_weight_bytes;  // kept whole however the state is sharded
  }
  if (in_.sharding.stage != ZeroStage::k0 || offloads()) {
    // Sharded over the data-parallel group and/or offloaded: weights, gradients and Adam state by the ZeRO
    // paper's formulas; what is offloaded sits in the node's host memory.
    const ShardedStateBytes state = sharded_state_bytes(weights, trainable, in_.sharding);
    resident = state.gpu() + buffers - backward_only;
    if (state.host > 0) plan_.devices[static_cast<std::size_t>(host_of(g.self))].resident_bytes += state.host;
    if (state.nvme > 0) plan_.devices[static_cast<std::size_t>(nvme_of(g.self))].resident_bytes += state.nvme;
  }
  plan_.devices[static_cast<std::size_t>(g.self)].resident_bytes = resident + in_.tp_gather_buffer_bytes;
  return trainable;
}

void Builder::make_step_gradients(GpuRank& g, std::int32_t chunk, std::int32_t iter, const RangeCost& cc,
                                  const OpTags& tags) {
  if (const std::int64_t once = backward_only_gradients(cc); once > 0) {
    // Made by this backward and freed as soon as they are added into the fp32 buffers, beside the
    // activations still in flight.
    const OpId made = add_marker(g.stream(kComputeStream), OpKind::kSync, tags);
    plan_.add_alloc(made, once);
    plan_.add_free(made, once);
  }
  const std::int64_t grads = step_gradients(cc);
  if (grads == 0) return;
  if (g.grads_step.size() <= static_cast<std::size_t>(chunk))
    g.grads_step.resize(static_cast<std::size_t>(chunk) + 1, 0);
  auto& made = g.grads_step[static_cast<std::size_t>(chunk)];
  if (made == iter + 1) return;
  made = iter + 1;
  // As the backward frees its activations it makes the gradients: counted once it is over (a marker after
  // it), where they then stay beside the next microbatches' activations until the optimizer step.
  plan_.add_alloc(add_marker(g.stream(kComputeStream), OpKind::kSync, tags), grads);
  g.step_grads += grads;
}

void Builder::pair_inputs(const GpuRank& g, const Task& next, std::int32_t iter, std::int32_t round) {
  const std::int32_t mb = (iter * in_.accum_steps + round) * in_.microbatches + next.microbatch;
  const std::int32_t chunk = model_chunk(next.chunk, g.stage);
  MicrobatchOps& sl = ops_of(static_cast<std::int32_t>(g.replica), chunk, mb);
  const bool fwd = next.kind == TaskKind::kForward;
  if (next.kind == TaskKind::kBackwardWeight || (fwd ? takes_data(chunk) : takes_loss(chunk))) return;
  // The next task's input arrives at a marker ahead of this one, which runs after it.
  (fwd ? sl.fwd_wait : sl.bwd_wait) =
      add_marker(g.stream(kComputeStream), OpKind::kSync, OpTags{g.stage, next.chunk, mb, -1, -1, iter});
}

void Builder::mark_wait(const GpuRank& g, const Task& task, std::int32_t chunk, const OpTags& tags,
                        MicrobatchOps& sl) {
  if (!in_.bubble_markers || in_.pp == 1 || task.kind == TaskKind::kBackwardWeight) return;
  if ((task.kind == TaskKind::kForward ? sl.fwd_wait : sl.bwd_wait) != kNone) return;  // a pair's marker
  const bool fwd = task.kind == TaskKind::kForward;
  if (fwd ? takes_data(chunk) : takes_loss(chunk)) return;  // its input is the data or the loss: no wait
  const StreamId compute = g.stream(kComputeStream);
  add_marker(compute, OpKind::kBubble, tags);
  (fwd ? sl.fwd_wait : sl.bwd_wait) = add_marker(compute, OpKind::kBubble, tags);
}

void Builder::emit_task(GpuRank& g, const Task& task, std::int32_t iter, std::int32_t round,
                        bool carries_dp) {
  const StreamId compute = g.stream(kComputeStream);
  const bool tp_comm = in_.tp > 1;
  const std::int32_t mb = (iter * in_.accum_steps + round) * in_.microbatches + task.microbatch;
  const std::int32_t chunk = model_chunk(task.chunk, g.stage);
  const RangeCost& cc = chunk_costs_[static_cast<std::size_t>(
      in_.cost_of_microbatch[static_cast<std::size_t>(task.microbatch)])][static_cast<std::size_t>(chunk)];
  OpTags tags{g.stage, task.chunk, mb, cc.begin, cc.end, iter};
  MicrobatchOps& sl = ops_of(static_cast<std::int32_t>(g.replica), chunk, mb);
  mark_wait(g, task, chunk, tags, sl);
  emit_boundary_regather(g, task, chunk, cc, tags, sl);
  const OpId fork = fork_context_ring(g, task, cc, tags, sl);
  if (task.kind == TaskKind::kForward) {
    OpId f = add_op(
        compute, OpKind::kForward, tags, cc, kForwardPass, cc.kernels, cc.gemm,
        [&] { return forward_work(cc); }, forward_fixed(cc));
    plan_.add_alloc(f, cc.stored);
    sl.fwd_first = sl.fwd_done = f;
    if (OpId join = join_context_exchange(g, task, cc, tags, fork, f); join != kNone) sl.fwd_done = join;
    if (tp_comm && cc.tp_bus > 0) sl.fwd_done = emit_tp_collective(compute, g, cc, tags, 0);
    if (OpId a2a = emit_expert_alltoall(g, cc, tags); a2a != kNone) sl.fwd_done = a2a;
    return;
  }
  OpId first = kNone;
  if (task.kind == TaskKind::kBackward || task.kind == TaskKind::kBackwardInput) {
    if (cc.recompute > 0 || cc.recompute_ns > 0) {
      first = add_op(
          compute, OpKind::kRecompute, tags, cc, kRecomputePass, cc.kernels, cc.gemm,
          [&] { return recompute_work(cc); }, recompute_fixed(cc));
      plan_.add_alloc(first, cc.extra);
      if (tp_comm && in_.recompute == Recompute::kFull && cc.tp_bus > 0)
        emit_tp_collective(compute, g, cc, tags, 1);
      if (in_.recompute == Recompute::kFull) emit_expert_alltoall(g, cc, tags);
    }
  }
  const bool whole = task.kind == TaskKind::kBackward;
  const bool weight_only = task.kind == TaskKind::kBackwardWeight;
  // Split backward: B frees all but the inputs of the linear layers, W frees those.
  const std::int64_t frees = whole         ? cc.stored + cc.extra
                             : weight_only ? cc.weight_grad_share
                                           : cc.stored - cc.weight_grad_share + cc.extra;
  const TpBackward tp = tp_comm && cc.tp_bus > 0 ? tp_backward(task.kind) : TpBackward{};
  OpId tp_after = kNone;  // where the hidden TP collectives start
  std::pair<OpId, OpId> ops;
  if (tp.hidden > 0 && tp.after_input) {
    // The input gradients (with the row-parallel layers' weight gradients) first, then their all-reduce
    // beside the column-parallel layers' weight gradients.
    Task input = task, weight = task;
    input.kind = TaskKind::kBackwardInput;
    weight.kind = TaskKind::kBackwardWeight;
    tp_after = emit_backward(g, input, cc, tags, 1, true).first;
    ops = carries_dp ? emit_gradient_buckets(g, weight, cc, tags, 1, true)
                     : emit_backward(g, weight, cc, tags, 1, true);
    ops.first = tp_after;
  } else {
    if (tp.hidden > 0) tp_after = fork_tp(g, tags);
    ops = carries_dp ? emit_gradient_buckets(g, task, cc, tags) : emit_backward(g, task, cc, tags);
    if (tp_after != kNone) ops.first = tp_after;
  }
  auto [first_b, last] = ops;
  make_step_gradients(g, chunk, iter, cc, tags);
  // The working memory of a backward that recomputes nothing (a measured workload's: the loss's logit
  // gradients), taken as it starts; the recompute op takes it otherwise.
  if (first == kNone && !weight_only && cc.extra > 0) plan_.add_alloc(first_b, cc.extra);
  if (frees != 0 || plan_.ops[static_cast<std::size_t>(last)].extras >= 0)
    plan_.extras_of(last).free_bytes = frees;
  if (first == kNone) first = first_b;
  if (task.kind != TaskKind::kBackwardWeight) {
    sl.bwd_first = first;
    sl.bwd_done = last;
    if (OpId join = join_context_exchange(g, task, cc, tags, fork, last); join != kNone) sl.bwd_done = join;
    if (tp.hidden > 0)
      sl.bwd_done = emit_tp_backward(g, cc, tags, tp_after, tp);
    else if (tp.exposed > 0)
      sl.bwd_done = emit_tp_collective(compute, g, cc, tags, 2, tp.exposed);
    if (OpId a2a = emit_expert_alltoall(g, cc, tags); a2a != kNone) sl.bwd_done = a2a;
  }
}

std::pair<OpId, OpId> Builder::emit_backward(const GpuRank& g, const Task& task, const RangeCost& cc,
                                             const OpTags& tags, std::int32_t launch_share,
                                             bool rows_with_input) {
  const std::int32_t kernels = backward_launches(task.kind, cc, launch_share);
  OpId b = add_op(
      g.stream(kComputeStream), backward_kind(task.kind), tags, cc, backward_pass(task.kind, rows_with_input),
      kernels, cc.gemm, [&] { return backward_work(task.kind, cc, cc.gemm, kernels, rows_with_input); },
      backward_fixed(task.kind, cc));
  return {b, b};
}

std::pair<OpId, OpId> Builder::emit_gradient_buckets(GpuRank& g, const Task& task, const RangeCost& cc,
                                                     const OpTags& tags, std::int32_t launch_share,
                                                     bool rows_with_input) {
  // Split the chunk's last gradient pass into buckets (layers in reverse order) so each bucket's all-reduce
  // overlaps the rest of the backward.
  const auto table =
      static_cast<std::size_t>(in_.cost_of_microbatch[static_cast<std::size_t>(task.microbatch)]);
  OpId first = kNone, last = kNone;
  for (const Bucket& bucket : gradient_buckets(cc)) {
    const RangeCost& part = bucket_cost(table, bucket.lo, bucket.hi);
    const OpTags bt{tags.stage, tags.virtual_stage, tags.microbatch, bucket.lo, bucket.hi, tags.iteration};
    const std::int32_t kernels = backward_launches(task.kind, cc, launch_share) * (bucket.hi - bucket.lo) /
                                 std::max(1, cc.end - cc.begin);
    OpId b = add_op(
        g.stream(kComputeStream), backward_kind(task.kind), bt, part,
        backward_pass(task.kind, rows_with_input), kernels, cc.gemm,
        [&] { return backward_work(task.kind, part, cc.gemm, kernels, rows_with_input); },
        backward_fixed(task.kind, part));
    if (first == kNone) first = b;
    last = b;
    emit_gradient_reduction(g, bt, bucket.params, b, bucket.messages);
  }
  return {first, last};
}

OpId Builder::gather_layer(GpuRank& g, const RangeCost& layer, const OpTags& tags) {
  const std::int64_t full = kShardWeightBytes * layer_weight_params(layer);
  const std::int32_t n = shard_ranks();
  if (full == 0 || (n < 2 && !in_.sharding.offload_params)) return kNone;  // the whole layer is resident
  // Gathers run ahead of the compute by `prefetch_layers` layers: this one may start once the layer that many
  // places before the previous user has finished with its gathered weights (FSDP's limit on in-flight
  // all-gathers; DeepSpeed's prefetch bucket).
  const auto users = static_cast<std::int64_t>(g.weight_users.size());
  const std::int64_t gate = users - 1 - in_.sharding.prefetch_layers;
  const OpId released = gate >= 0 ? g.weight_users[static_cast<std::size_t>(gate)] : kNone;
  OpId first = kNone, gathered = kNone;
  // The next step's gathers read the shards the optimizer has just updated.
  auto after_update = [&](OpId op) {
    if (g.weights_updated != kNone) plan_.ops[static_cast<std::size_t>(op)].deps.push_back(g.weights_updated);
  };
  if (in_.sharding.offload_params) {
    // ZeRO-Infinity: this rank's shard of the layer comes up from host memory (read from NVMe first when
    // it lives there).
    const std::int64_t shard = (full + n - 1) / n;
    const OpId read =
        in_.sharding.offload_to_nvme ? emit_nvme(g, true, tags, shard, {released, g.weights_updated}) : kNone;
    first = gathered = emit_transfer(g.stream(kH2DStream), OpKind::kH2D, tags, host_of(g.self), g.self, shard,
                                     {released, g.weights_updated, read});
  }
  OpId ag = emit_dp_collective(g, OpKind::kAllGather, kGatherStream, tags, full, DpGroup::kShard,
                               first != kNone ? first : released);
  if (ag != kNone) {
    gathered = ag;
    if (first == kNone) {
      first = ag;
      after_update(ag);
    }
  }
  plan_.add_alloc(first, full);  // the unsharded weights' buffer
  return gathered;
}

void Builder::use_gathered(GpuRank& g, OpId user, OpId gather, const RangeCost& layer) {
  g.weight_users.push_back(user);
  if (gather == kNone) return;
  plan_.ops[static_cast<std::size_t>(user)].deps.push_back(gather);
  plan_.add_free(user, kShardWeightBytes * layer_weight_params(layer));  // resharded once the layer is done
}

void Builder::reduce_layer_gradients(GpuRank& g, const RangeCost& layer, const OpTags& tags, OpId after,
                                     bool last_round) {
  // The layer's full gradients exist from its backward until their reduce-scatter leaves this rank's shard.
  const std::int64_t grads = kShardGradBytes * layer.trainable;
  if (grads == 0) return;
  plan_.add_alloc(after, grads);
  OpId rs =
      emit_dp_collective(g, OpKind::kReduceScatter, kCollectiveStream, tags, grads, DpGroup::kShard, after);
  const OpId freed = rs != kNone ? rs : after;
  plan_.add_free(freed, grads);
  if (rs != kNone) g.dp_ops.push_back(rs);
  if (in_.sharding.hybrid && last_round) {
    // HSDP: the reduced shards of the replicas on other nodes are averaged once per optimizer step.
    const std::int32_t n = shard_ranks();
    OpId ar = emit_dp_collective(g, OpKind::kAllReduce, kCollectiveStream, tags, (grads + n - 1) / n,
                                 DpGroup::kReplicas, freed);
    if (ar != kNone) g.dp_ops.push_back(ar);
  }
}

void Builder::emit_layerwise_task(GpuRank& g, const Task& task, std::int32_t iter, std::int32_t round) {
  const StreamId compute = g.stream(kComputeStream);
  const std::int32_t mb = (iter * in_.accum_steps + round) * in_.microbatches + task.microbatch;
  const std::int32_t chunk = model_chunk(task.chunk, g.stage);
  const auto table =
      static_cast<std::size_t>(in_.cost_of_microbatch[static_cast<std::size_t>(task.microbatch)]);
  const RangeCost& cc = chunk_costs_[table][static_cast<std::size_t>(chunk)];
  const auto& layers = layer_costs_[table];
  MicrobatchOps& sl = ops_of(static_cast<std::int32_t>(g.replica), chunk, mb);
  mark_wait(g, task, chunk, OpTags{g.stage, task.chunk, mb, cc.begin, cc.end, iter}, sl);
  const OpId fork =
      fork_context_ring(g, task, cc, OpTags{g.stage, task.chunk, mb, cc.begin, cc.end, iter}, sl);
  const bool tp_comm = in_.tp > 1;
  const bool last_round = round == in_.accum_steps - 1;
  auto layer_tags = [&](std::int32_t i) { return OpTags{g.stage, task.chunk, mb, i, i + 1, iter}; };
  // The chunk's TP collectives follow its last layer: on the compute stream they take the same time there,
  // and keep one collective id per (chunk, microbatch, phase).
  const OpTags chunk_tags{g.stage, task.chunk, mb, cc.begin, cc.end, iter};
  auto emit_tp = [&](std::int32_t phase) { return emit_tp_collective(compute, g, cc, chunk_tags, phase); };
  if (task.kind == TaskKind::kForward) {
    for (std::int32_t i = cc.begin; i < cc.end; ++i) {
      const RangeCost& lc = layers[static_cast<std::size_t>(i)];
      const OpTags tags = layer_tags(i);
      const OpId gathered = gather_layer(g, lc, tags);
      const bool copy = copies_gathered(gathered);
      OpId f = add_op(
          compute, OpKind::kForward, tags, lc, kForwardPass.copying(copy), lc.kernels, lc.gemm,
          [&] { return with_gather_copy(forward_work(lc), lc, copy); },
          with_gather_copy(forward_fixed(lc), lc, copy));
      plan_.add_alloc(f, lc.stored);
      use_gathered(g, f, gathered, lc);
      if (sl.fwd_first == kNone) sl.fwd_first = f;
      sl.fwd_done = f;
    }
    if (OpId join = join_context_exchange(g, task, cc, chunk_tags, fork, sl.fwd_done); join != kNone)
      sl.fwd_done = join;
    if (tp_comm && cc.tp_bus > 0) sl.fwd_done = emit_tp(0);
    if (OpId a2a = emit_expert_alltoall(g, cc, chunk_tags); a2a != kNone) sl.fwd_done = a2a;
    return;
  }
  const bool whole = task.kind == TaskKind::kBackward, weight_only = task.kind == TaskKind::kBackwardWeight;
  for (std::int32_t i = cc.end - 1; i >= cc.begin; --i) {
    const RangeCost& lc = layers[static_cast<std::size_t>(i)];
    const OpTags tags = layer_tags(i);
    OpId first = kNone;
    // The input-gradient pass (and the recompute before it) needs the weights again; the weight-gradient pass
    // only activations and output gradients.
    const OpId gathered = weight_only ? kNone : gather_layer(g, lc, tags);
    bool copy = copies_gathered(gathered);  // into the first op that uses the weights
    if (!weight_only && (lc.recompute > 0 || lc.recompute_ns > 0)) {
      first = add_op(
          compute, OpKind::kRecompute, tags, lc, kRecomputePass.copying(copy), lc.kernels, lc.gemm,
          [&] { return with_gather_copy(recompute_work(lc), lc, copy); },
          with_gather_copy(recompute_fixed(lc), lc, copy));
      copy = false;
      plan_.add_alloc(first, lc.extra);
      if (gathered != kNone) plan_.ops[static_cast<std::size_t>(first)].deps.push_back(gathered);
    }
    const std::int32_t kernels = backward_launches(task.kind, lc);
    OpId b = add_op(
        compute, backward_kind(task.kind), tags, lc, backward_pass(task.kind, false).copying(copy), kernels,
        lc.gemm, [&] { return with_gather_copy(backward_work(task.kind, lc, lc.gemm, kernels), lc, copy); },
        with_gather_copy(backward_fixed(task.kind, lc), lc, copy));
    if (first == kNone && !weight_only && lc.extra > 0) plan_.add_alloc(b, lc.extra);
    plan_.add_free(b, whole         ? lc.stored + lc.extra
                      : weight_only ? lc.weight_grad_share
                                    : lc.stored - lc.weight_grad_share + lc.extra);
    if (!weight_only) use_gathered(g, b, gathered, lc);
    if (first == kNone) first = b;
    if (!weight_only) {
      if (sl.bwd_first == kNone) sl.bwd_first = first;
      sl.bwd_done = b;
    }
    if (task.kind != TaskKind::kBackwardInput) reduce_layer_gradients(g, lc, tags, b, last_round);
  }
  if (weight_only) return;
  if (OpId join = join_context_exchange(g, task, cc, chunk_tags, fork, sl.bwd_done); join != kNone)
    sl.bwd_done = join;
  const bool recomputed = in_.recompute == Recompute::kFull && (cc.recompute > 0 || cc.recompute_ns > 0);
  if (tp_comm && cc.tp_bus > 0) {
    if (recomputed) emit_tp(1);
    // ZeRO-3's layer-by-layer ops keep every TP collective on the compute stream (see tp_backward).
    sl.bwd_done = emit_tp_collective(compute, g, cc, chunk_tags, 2, tp_backward(task.kind).exposed);
  }
  if (recomputed) emit_expert_alltoall(g, cc, chunk_tags);
  if (OpId a2a = emit_expert_alltoall(g, cc, chunk_tags); a2a != kNone) sl.bwd_done = a2a;
}

OpId Builder::emit_dp_collective(GpuRank& g, OpKind kind, GpuStream on, const OpTags& tags,
                                 std::int64_t buffer_bytes, DpGroup group, OpId after, std::int32_t count) {
  const std::int32_t shard = shard_ranks();
  // Ring members and this GPU's neighbour: the shard group (the whole DP group unless HSDP), one rank of
  // every shard group for HSDP's all-reduce between nodes, or the expert-parallel group.
  const std::int32_t n = group == DpGroup::kReplicas  ? grad_replicas() / shard
                         : group == DpGroup::kContext ? in_.cp
                         : group == DpGroup::kExperts ? in_.ep
                                                      : shard;
  const std::int64_t sequence = g.dp_sequence++;
  if (n < 2 || buffer_bytes <= 0) return kNone;
  std::int32_t peer, group_index;
  if (group == DpGroup::kReplicas) {
    peer = (g.d + shard) % grad_replicas();
    group_index = g.d % shard;
  } else if (group == DpGroup::kContext) {
    peer = g.d / n * n + (g.d % n + cp_ring_offset_) % n;
    group_index = g.d / n;
  } else if (group == DpGroup::kExperts) {
    peer = g.d / n * n + (g.d % n + ep_ring_offset_) % n;
    group_index = g.d / n;
  } else {
    // The whole group's ring crosses nodes whenever the group does.
    peer = shard == grad_replicas() ? (g.d + dp_ring_offset_) % grad_replicas()
                                    : g.d / shard * shard + (g.d % shard + 1) % shard;
    group_index = g.d / shard;
  }
  TransferWork w;
  w.src = g.self;
  w.dst = device_of_rank(global_rank(peer, g.stage, g.t));
  // A ring all-reduce moves 2(n-1)/n of the buffer per GPU in 2(n-1) steps; all-gather and reduce-scatter
  // half of that; an all-to-all sends (n-1)/n of it to the other members at once, one latency each.
  const std::int32_t factor = kind == OpKind::kAllReduce ? 2 : 1;
  w.bytes = factor * (n - 1) * buffer_bytes / n;
  if (kind != OpKind::kAllToAll) {
    if (group == DpGroup::kShard && shard == grad_replicas()) w.bytes /= dp_ring_nics_;
    if (group == DpGroup::kReplicas) w.bytes /= replicas_ring_nics_;
  }
  w.latency_steps = kind == OpKind::kAllToAll ? count : factor * (n - 1) * count;
  w.message_bytes = buffer_bytes / count;
  // Ring attention passes its blocks by send and receive, one path latency a step, not as an NCCL collective.
  const bool ring_attention = group == DpGroup::kContext && in_.cp_attention == CpAttention::kRing;
  if (kind != OpKind::kAllToAll && !ring_attention) {
    // Nodes the ring spans, as laid out (an HSDP shard group stays inside its node).
    const std::int32_t nodes = group == DpGroup::kReplicas                            ? replicas_ring_nodes_
                               : group == DpGroup::kContext                           ? cp_ring_nodes_
                               : group == DpGroup::kExperts                           ? ep_ring_nodes_
                               : group == DpGroup::kShard && shard == grad_replicas() ? dp_ring_nodes_
                                                                                      : 1;
    time_as_nccl(w,
                 kind == OpKind::kAllReduce   ? CollectiveKind::kAllReduce
                 : kind == OpKind::kAllGather ? CollectiveKind::kAllGather
                                              : CollectiveKind::kReduceScatter,
                 n, nodes, w.message_bytes, count);
  }
  if (explicit_) {
    // The members of one group emit their collectives in the same order: (stage, tp rank, group, sequence)
    // names the collective they share.
    const std::array<std::int64_t, 5> key{g.stage, g.t, static_cast<std::int64_t>(group), group_index,
                                          sequence};
    auto [it, fresh] = dp_groups_.emplace(key, dp_group_base_ + static_cast<std::int32_t>(dp_groups_.size()));
    w.group = it->second;
    w.group_size = n;
  }
  OpId op = add_op(g.stream(on), kind, tags, w, -1);
  if (after != kNone) plan_.ops[static_cast<std::size_t>(op)].deps.push_back(after);
  return op;
}

}  // namespace pipesim::sim::lowering
