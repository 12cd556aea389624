// The lowering's collectives and steps: expert all-to-all, data-parallel gradient reduction and parameter
// gathers, the optimizer (on the GPU or the host), pipeline p2p transfers.
#include "schedules/lowering/builder.hpp"

namespace pipesim::sim::lowering {

OpId Builder::emit_expert_alltoall(GpuRank& g, const RangeCost& cc, const OpTags& tags, OpId after) {
  if (cc.ep_alltoalls == 0) return kNone;
  return emit_dp_collective(g, OpKind::kAllToAll, kComputeStream, tags, cc.ep_alltoall, DpGroup::kExperts,
                            after, cc.ep_alltoalls);
}

OpId Builder::fork_context_ring(const GpuRank& g, const Task& task, const RangeCost& cc, const OpTags& tags,
                                MicrobatchOps& sl) {
  if (in_.cp < 2 || cc.cp_kv <= 0 || in_.cp_attention != CpAttention::kRing ||
      task.kind == TaskKind::kBackwardWeight)
    return kNone;
  const OpId fork = add_marker(g.stream(kComputeStream), OpKind::kSync, tags);
  OpId& wait = task.kind == TaskKind::kForward ? sl.fwd_wait : sl.bwd_wait;
  if (wait == kNone) wait = fork;  // the pass's pipeline input arrives before the ring starts
  return fork;
}

OpId Builder::join_context_exchange(GpuRank& g, const Task& task, const RangeCost& cc, const OpTags& tags,
                                    OpId fork, OpId last) {
  if (in_.cp < 2 || cc.cp_kv <= 0 || task.kind == TaskKind::kBackwardWeight) return kNone;
  // Each rank holds 1/cp of the keys and values (cc.cp_kv over the range's attention layers); a pass moves
  // the other cp - 1 shares of each layer's, one collective per layer.
  const std::int64_t kv = in_.cp * cc.cp_kv;
  const bool forward = task.kind == TaskKind::kForward;
  OpId exchanged = kNone;
  if (in_.cp_attention == CpAttention::kRing) {
    // Ring attention: cp - 1 steps per layer, each passing one key/value block to the next rank while the
    // attention runs on the block in hand. The backward passes the blocks again with their gradients, and
    // a full recompute's forward passes them once more.
    const std::int64_t passes =
        forward ? 1 : 2 + (in_.recompute == Recompute::kFull && cc.recompute > 0 ? 1 : 0);
    exchanged = emit_dp_collective(g, OpKind::kAllGather, kCpStream, tags, passes * kv, DpGroup::kContext,
                                   fork, cc.cp_layers);
  } else {
    // All-gather attention (Llama 3): keys and values gathered before the attention of each layer; the
    // backward gathers them again and reduce-scatters their gradients. Nothing overlaps them.
    exchanged =
        emit_dp_collective(g, OpKind::kAllGather, kCpStream, tags, kv, DpGroup::kContext, last, cc.cp_layers);
    if (!forward)
      exchanged = emit_dp_collective(g, OpKind::kReduceScatter, kCpStream, tags, kv, DpGroup::kContext,
                                     exchanged, cc.cp_layers);
  }
  const OpId join = add_marker(g.stream(kComputeStream), OpKind::kSync, tags);
  plan_.ops[static_cast<std::size_t>(join)].deps.push_back(exchanged);
  return join;
}

void Builder::emit_gradient_reduction(GpuRank& g, const OpTags& tags, std::int64_t params, OpId after,
                                      std::int32_t messages) {
  // Plain data parallelism all-reduces the gradients; ZeRO-1 and 2 reduce-scatter them, each rank keeping
  // the reduced shard its optimizer updates.
  const bool sharded = in_.sharding.stage != ZeroStage::k0;
  OpId op = emit_dp_collective(g, sharded ? OpKind::kReduceScatter : OpKind::kAllReduce, kCollectiveStream,
                               tags, params * in_.dp_grad_bytes_per_param, DpGroup::kShard, after, messages);
  if (op != kNone) g.dp_ops.push_back(op);
}

namespace {

/// Adds one layer's gradients, last tensor first, to a reducer's open bucket of `filling` parameters and
/// returns the buckets that close: torch DDP (torch/nn/parallel/distributed.py, the reducer's buckets from
/// dist._compute_bucket_assignment_by_size over the parameters in reverse) closes a bucket once it holds
/// `cap`, never splitting a tensor: one that reaches the cap closes the bucket it joins. A block's tensors
/// are its weight matrices (its GEMMs' weights on this TP rank); what pipesim holds no shapes for (norms,
/// routers, experts, adapters, a profiled layer's weights) fills the bucket as if divisible.
std::int32_t fill_reducer_buckets(const LayerCost& l, std::int64_t rank_params, std::int64_t cap,
                                  std::int64_t& filling) {
  std::int32_t closed = 0;
  std::int64_t shaped = 0;
  auto add_tensor = [&](std::int64_t params) {
    filling += params;
    if (filling >= cap) {
      ++closed;
      filling = 0;
    }
  };
  if (l.role == LayerRole::kBlock && l.trainable_params == l.params) {
    for (auto it = l.gemms.rbegin(); it != l.gemms.rend(); ++it) {
      const std::int64_t weight = it->n * it->k * std::max<std::int64_t>(1, it->count);
      if (shaped + weight > rank_params) break;
      shaped += weight;
      add_tensor(weight);
    }
  } else if (l.role != LayerRole::kBlock && l.trainable_params == l.params) {
    shaped = rank_params;  // an embedding or output layer: its table is one tensor
    add_tensor(rank_params);
  }
  filling += rank_params - shaped;
  closed += static_cast<std::int32_t>(filling / cap);
  filling %= cap;
  return closed;
}

}  // namespace

std::vector<Builder::Bucket> Builder::gradient_buckets(const RangeCost& cc) const {
  const auto& table = in_.costs.front();
  const std::int64_t cap = in_.dp_bucket_cap_params;
  std::vector<Bucket> out;
  std::int64_t filling = 0;  // the reducer's open bucket, carried from one group of layers to the next
  for (std::int32_t hi = cc.end; hi > cc.begin;) {
    std::int32_t lo = hi;
    std::int64_t params = 0, param_bytes = 0;
    std::int32_t messages = 0;
    while (lo > cc.begin && (params < in_.dp_bucket_params || lo == hi)) {
      const LayerCost& l = table[static_cast<std::size_t>(--lo)];
      const std::int64_t rank_params = (l.trainable_params + in_.tp - 1) / in_.tp;
      params += rank_params;
      param_bytes += l.param_bytes;
      if (cap > 0) messages += fill_reducer_buckets(l, rank_params, cap, filling);
    }
    // Profiled layers give bytes on the GPU, not parameter counts.
    if (params == 0 && param_bytes > 0) params = param_bytes / kGpuTrainingBytesPerParam;
    if (lo == cc.begin && filling > 0) ++messages;  // the last bucket goes out when the backward ends
    out.push_back({lo, hi, params, std::max(1, messages)});
    hi = lo;
  }
  return out;
}

void Builder::emit_grad_sync_after_backward(GpuRank& g, std::int32_t iter) {
  // Megatron-LM's local DDP: every chunk's gradients, bucket by bucket, once the GPU's backward is done.
  for (std::int32_t v = 0; v < in_.virtual_stages; ++v) {
    const RangeCost& cc = chunk_costs_[0][static_cast<std::size_t>(model_chunk(v, g.stage))];
    for (const Bucket& b : gradient_buckets(cc))
      emit_gradient_reduction(g, OpTags{g.stage, v, -1, b.lo, b.hi, iter}, b.params, last_compute_op_,
                              b.messages);
  }
}

OpId Builder::emit_param_allgather(GpuRank& g, std::int32_t iter, OpId after) {
  OpId first = kNone, last = after;
  for (std::int32_t v = 0; v < in_.virtual_stages; ++v) {
    const RangeCost& cc = chunk_costs_[0][static_cast<std::size_t>(model_chunk(v, g.stage))];
    for (const Bucket& b : gradient_buckets(cc)) {
      OpId ag = emit_dp_collective(g, OpKind::kAllGather, kCollectiveStream,
                                   OpTags{g.stage, v, -1, b.lo, b.hi, iter}, b.params * kShardWeightBytes,
                                   DpGroup::kShard, after);
      if (ag == kNone) continue;
      if (first == kNone) first = ag;
      last = ag;
    }
  }
  if (in_.param_gather_copies && first != kNone) {
    // Gathered through flattened copies (nanotron's all_gather_coalesced): the rank's shard and every
    // rank's part of the parameters in new 16-bit buffers, held from the first gather to the last.
    const std::int64_t copies =
        kShardWeightBytes * (g.trainable + (g.trainable + shard_ranks() - 1) / shard_ranks());
    plan_.add_alloc(first, copies);
    plan_.add_free(last, copies);
  }
  return last;
}

OpId Builder::emit_transfer(StreamId stream, OpKind kind, const OpTags& tags, DeviceId src, DeviceId dst,
                            std::int64_t bytes, std::vector<OpId> deps) {
  TransferWork w;
  w.src = src;
  w.dst = dst;
  w.bytes = bytes;
  OpId op = add_op(stream, kind, tags, w, -1);
  deps.erase(std::remove(deps.begin(), deps.end(), kNone), deps.end());
  plan_.ops[static_cast<std::size_t>(op)].deps = std::move(deps);
  return op;
}

OpId Builder::emit_nvme(const GpuRank& g, bool read, const OpTags& tags, std::int64_t bytes,
                        std::vector<OpId> deps) {
  const DeviceId host = host_of(g.self), nvme = nvme_of(g.self);
  return emit_transfer(g.stream(kNvmeStream), read ? OpKind::kNvmeRead : OpKind::kNvmeWrite, tags,
                       read ? nvme : host, read ? host : nvme, bytes, std::move(deps));
}

Duration Builder::measured_optimizer_ns(const GpuRank& g) const {
  if (in_.measured_optimizer_ns < 0) return -1;
  // The GPU's share of the parameters, where the workload states them; otherwise its layers' share of the
  // measured backward stands for it (a weight gradient's work is the parameters' times the tokens'). A
  // sharded optimizer updates 1/shard_ranks of it.
  Duration all = 0, mine = 0;
  std::int64_t params = 0;
  for (const LayerCost& l : in_.costs.front()) {
    all += l.bwd_input_ns + l.bwd_weight_ns;
    params += l.trainable_params;
  }
  for (std::int32_t v = 0; v < in_.virtual_stages; ++v)
    mine += chunk_costs_[0][static_cast<std::size_t>(model_chunk(v, g.stage))].bwd_ns;
  const double share = params > 0 ? static_cast<double>(g.trainable) / static_cast<double>(params)
                       : all > 0  ? static_cast<double>(mine) / static_cast<double>(all)
                                  : 1.0 / in_.pp;
  const std::int32_t shards = in_.sharding.stage == ZeroStage::k0 ? 1 : shard_ranks();
  return std::llround(static_cast<double>(in_.measured_optimizer_ns) * share / shards);
}

OpId Builder::emit_optimizer(GpuRank& g, std::int32_t iter) {
  const OpTags opt_tags{g.stage, -1, -1, -1, -1, iter};
  // ZeRO-1 and up: each rank updates its shard of the parameters only.
  const std::int64_t updated =
      in_.sharding.stage == ZeroStage::k0 ? g.trainable : (g.trainable + shard_ranks() - 1) / shard_ranks();
  const bool gather_after = in_.sharding.stage == ZeroStage::k1 || in_.sharding.stage == ZeroStage::k2;
  const bool nvme = in_.sharding.offload_to_nvme, params_away = in_.sharding.offload_params;
  const DeviceId host = host_of_if(g.self, offloads());
  if (!in_.sharding.offload_optimizer) {
    OpId opt = add_op(g.stream(kComputeStream), OpKind::kOptimizer, opt_tags,
                      MemoryWork{updated * in_.optimizer_bytes_per_param}, measured_optimizer_ns(g));
    plan_.ops[static_cast<std::size_t>(opt)].deps = g.dp_ops;
    if (gather_after) return emit_param_allgather(g, iter, opt);
    if (!params_away) return opt;
    // ZeRO-Infinity with the optimizer on the GPU: the updated 16-bit shard goes back where parameters live.
    OpId down = emit_transfer(g.stream(kD2HStream), OpKind::kD2H, opt_tags, g.self, host,
                              updated * kWeightBytesPerParam, {opt});
    return nvme ? emit_nvme(g, false, opt_tags, updated * kWeightBytesPerParam, {down}) : down;
  }
  // Offloaded: gradients down, CPU Adam on this GPU's share of the host cores, weights back up (parameters
  // offloaded with the optimizer stay off the GPU, where the next gathers fetch them). On NVMe, the Adam
  // state is read into host memory for the step and written back after it (DeepSpeed's default, without
  // pipelining the reads and writes).
  std::vector<OpId> grads_ready = g.dp_ops;
  grads_ready.push_back(last_compute_op_);
  OpId d2h = emit_transfer(g.stream(kD2HStream), OpKind::kD2H, opt_tags, g.self, host,
                           updated * kGradBytesPerParam, grads_ready);
  const OpId state_in =
      nvme ? emit_nvme(g, true, opt_tags, updated * kShardOptimizerBytes, grads_ready) : kNone;
  OpId adam =
      add_op(g.stream(kCpuStream), OpKind::kOptimizer, opt_tags, CpuWork{updated, cpu_threads_per_gpu_}, -1);
  plan_.ops[static_cast<std::size_t>(adam)].deps.push_back(d2h);
  if (state_in != kNone) plan_.ops[static_cast<std::size_t>(adam)].deps.push_back(state_in);
  const OpId state_out =
      nvme ? emit_nvme(g, false, opt_tags,
                       updated * (kShardOptimizerBytes + (params_away ? kShardWeightBytes : 0)), {adam})
           : kNone;
  if (params_away) return nvme ? state_out : adam;
  OpId h2d = emit_transfer(g.stream(kH2DStream), OpKind::kH2D, opt_tags, host, g.self,
                           updated * kWeightBytesPerParam, {adam});
  return gather_after ? emit_param_allgather(g, iter, h2d) : h2d;
}

void Builder::emit_p2p(std::int32_t stage) {
  const auto pp = static_cast<std::size_t>(in_.pp);
  auto device_of = [&](std::size_t replica, std::int32_t on_stage) {
    const auto& cs = streams_[replica * pp + static_cast<std::size_t>(on_stage)];
    return plan_.streams[static_cast<std::size_t>(cs[kComputeStream])].device;
  };
  for (std::int32_t round = 0; round < in_.accum_steps * in_.iterations; ++round) {
    // A round's hops are gathered first, each task's on every replica's GPU of the stage side by side: each
    // adds a dependency to an op of the peer stage, built long before, whose cache line is fetched while the
    // rest are gathered.
    hops_.clear();
    for (const Task& task : orders_[static_cast<std::size_t>(stage)]) {
      if (task.kind == TaskKind::kBackwardWeight) continue;
      const bool fwd = task.kind == TaskKind::kForward;
      const std::int32_t chunk = model_chunk(task.chunk, stage);
      if (fwd ? takes_loss(chunk) : takes_data(chunk)) continue;  // the path ends here
      const std::int32_t mb = round * in_.microbatches + task.microbatch;
      const std::int32_t peer = fwd ? chunk + 1 : chunk - 1;
      for (std::size_t r = 0; r < replicas_.size(); ++r) {
        const auto ri = static_cast<std::int32_t>(r);
        const MicrobatchOps& from = ops_of(ri, chunk, mb);
        const MicrobatchOps& to = ops_of(ri, peer, mb);
        const OpId wait = fwd ? to.fwd_wait : to.bwd_wait;
        const OpId consumer = wait != kNone ? wait : fwd ? to.fwd_first : to.bwd_first;
        __builtin_prefetch(&plan_.ops[static_cast<std::size_t>(consumer)].deps, 1);
        hops_.push_back({&task, r, fwd ? from.fwd_done : from.bwd_done, consumer, chunk, peer});
      }
    }
    for (const Hop& hop : hops_) {
      const Task& task = *hop.task;
      const bool fwd = task.kind == TaskKind::kForward;
      const std::int32_t mb = round * in_.microbatches + task.microbatch;
      const DeviceId self = device_of(hop.replica, stage);
      const DeviceId dst = device_of(hop.replica, stage_of_chunk(hop.peer));
      if (dst == self) {
        plan_.ops[static_cast<std::size_t>(hop.consumer)].deps.push_back(hop.produced);
        continue;
      }
      const RangeCost& boundary = chunk_costs_[static_cast<std::size_t>(
          in_.cost_of_microbatch[static_cast<std::size_t>(task.microbatch)])]
                                              [static_cast<std::size_t>(fwd ? hop.chunk : hop.peer)];
      TransferWork w;
      w.src = self;
      w.dst = dst;
      w.bytes = boundary.output_bytes;
      OpTags tags{stage, task.chunk, mb, -1, -1, round / in_.accum_steps};
      const StreamId send = streams_[hop.replica * pp + static_cast<std::size_t>(stage)][kP2PSendStream];
      OpId p = add_op(send, OpKind::kP2P, tags, w, in_.p2p_fixed_ns);
      plan_.ops[static_cast<std::size_t>(p)].deps.push_back(hop.produced);
      plan_.ops[static_cast<std::size_t>(hop.consumer)].deps.push_back(p);
      // A blocking send holds the sender's compute: its next op waits for the transfer.
      const OpId next = in_.blocking_p2p ? next_on_stream_[static_cast<std::size_t>(hop.produced)] : kNone;
      if (next != kNone) plan_.ops[static_cast<std::size_t>(next)].deps.push_back(p);
    }
  }
}

}  // namespace pipesim::sim::lowering
