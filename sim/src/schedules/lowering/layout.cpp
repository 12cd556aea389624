// The lowering's layout: checks, model chunks per rank, sizes, and the devices of ranks.
#include "schedules/lowering/builder.hpp"

#include "pipesim/sim/core/option.hpp"

namespace pipesim::sim::lowering {

void Builder::validate_and_layout() {
  const auto& hw = in_.hw;
  auto bad = [](Option option, const std::string& msg) { throw InputError(option, "", msg); };
  if (in_.pp < 1) bad(Option{"pp"}, "must be >= 1");
  if (in_.tp < 1) bad(Option{"tp"}, "must be >= 1");
  if (in_.dp < 1) bad(Option{"dp"}, "must be >= 1");
  if (const std::string why = hw.tp_placement_error(in_.tp); !why.empty()) bad(Option{"tp"}, why);
  if (in_.microbatches < 1) bad(Option{"microbatches"}, "must be >= 1");
  if (!hw.gpu.peak_tflops.count(in_.dtype)) {
    std::string valid;
    for (const auto& [dtype, tflops] : hw.gpu.peak_tflops) valid += (valid.empty() ? "" : ", ") + dtype;
    bad(Option{"dtype"}, fmt::format("{} has no {} peak; valid: {}", hw.name, in_.dtype, valid));
  }
  if (in_.accum_steps < 1) bad(Option{"accum_steps"}, "must be >= 1");
  if (in_.virtual_stages < 1) bad(Option{"virtual_stages"}, "must be >= 1");
  if (!sched_.multi_chunk && in_.virtual_stages != 1)
    bad(Option{"virtual_stages"}, fmt::format("schedule {} uses one chunk per rank; valid: 1", sched_.name));
  if (std::string why = sched_.check({in_.pp, in_.microbatches, in_.virtual_stages}); !why.empty())
    bad(Option{"schedule"}, fmt::format("{}: {}", sched_.name, why));
  if (in_.cp < 1) bad(Option{"cp"}, "must be >= 1");
  const std::int64_t gpus = std::int64_t{in_.pp} * in_.tp * in_.cp * in_.dp;
  if (gpus > kMaxGpus)
    bad(Option{"pp/tp/cp/dp"}, fmt::format("pp*tp*cp*dp = {} GPUs; valid: at most {}", gpus, kMaxGpus));
  gpus_total_ = static_cast<std::int32_t>(gpus);
  // TP groups that do not divide an NVLink domain leave its remainder idle: the job spans more nodes.
  const std::int64_t last_slot = hw.gpu_slot(gpus_total_ - 1, in_.tp);
  std::int32_t need_nodes = static_cast<std::int32_t>(last_slot / hw.node.gpus + 1);
  if (in_.nodes > 0 && in_.nodes < need_nodes)
    bad(Option{"nodes"}, fmt::format("pp*tp*cp*dp = {} GPUs need {} nodes of {} GPUs; given {}", gpus_total_,
                                     need_nodes, hw.node.gpus, in_.nodes));
  plan_.nodes = need_nodes;  // nodes beyond the job's are idle: no links or devices are built for them
  if (in_.costs.empty()) bad(Option{"model"}, "no layers to simulate");
  if (static_cast<std::int32_t>(in_.cost_of_microbatch.size()) != in_.microbatches)
    bad(Option{"microbatches"}, "internal: one cost table index per microbatch expected");

  layout_chunks(checked_block_span());
}

BlockSpan Builder::checked_block_span() const {
  // Layer roles must read embedding*, block*, head*.
  const auto& layers = in_.costs.front();
  const BlockSpan span = block_span(layers);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    auto ii = static_cast<std::int32_t>(i);
    bool ok = layers[i].role == LayerRole::kBlock       ? (ii >= span.first && ii <= span.last)
              : layers[i].role == LayerRole::kEmbedding ? (span.count == 0 || ii < span.first)
                                                        : (ii > span.last);
    if (!ok)
      throw InputError(
          Option{"workload"}, fmt::format("/layers/{}", i),
          "layers must be ordered embedding, blocks, head (an embedding or head inside the blocks)");
  }
  if (span.count == 0)
    throw InputError(Option{"workload"}, "/layers", "needs at least one layer with role block");
  return span;
}

void Builder::layout_chunks(const BlockSpan& span) {
  auto bad = [](Option option, const std::string& msg) { throw InputError(option, "", msg); };
  const std::int32_t blocks = span.count;
  chunks_ = in_.pp * in_.virtual_stages;
  // Two copies of the model (DualPipe) split it into pp stages; the other placements into every chunk.
  const std::int32_t stages = model_stages(sched_.placement, in_.pp, in_.virtual_stages);
  const char* what = stages == chunks_ ? "pp x virtual stages" : "pp (each stage held twice)";
  std::vector<std::int32_t> part = in_.partition;
  if (part.empty()) {
    if (blocks < stages)
      bad(Option{"pp"},
          fmt::format("{} = {} chunks exceeds the model's {} transformer blocks", what, stages, blocks));
    // Two chunks per rank (a V, or two copies): the pairs even out the embedding and the output layer.
    if (sched_.placement != ChunkPlacement::kLoop)
      part = paired_partition(in_.costs.front(), span, in_.pp, sched_.placement);
    if (part.empty()) part = balanced_partition(blocks, stages);
  }
  if (static_cast<std::int32_t>(part.size()) != stages)
    bad(Option{"partition"}, fmt::format("has {} entries; expected {} = {}", part.size(), what, stages));
  if (std::accumulate(part.begin(), part.end(), 0) != blocks)
    bad(Option{"partition"}, fmt::format("sums to {}; the model has {} transformer blocks",
                                         std::accumulate(part.begin(), part.end(), 0), blocks));
  plan_.meta.partition = part;

  auto ranges = chunk_layer_ranges(span, static_cast<std::int32_t>(in_.costs.front().size()), part);
  if (stages != chunks_) {  // the second copy
    const auto first_copy = ranges;
    ranges.insert(ranges.end(), first_copy.begin(), first_copy.end());
  }
  for (std::size_t c = 0; c < ranges.size(); ++c)
    if (ranges[c].first == ranges[c].second)
      bad(Option{"partition"},
          fmt::format("chunk {} would hold no layer at all; every stage needs a layer", c));
  for (const auto& table : in_.costs) {
    std::vector<RangeCost> row;
    for (auto [b, e] : ranges) {
      max_chunk_layers_ = std::max(max_chunk_layers_, e - b);
      row.push_back(range_cost(table, b, e, in_.tp));
    }
    chunk_costs_.push_back(std::move(row));
    if (shards_params()) {
      std::vector<RangeCost> layers;
      for (std::int32_t i = 0; i < static_cast<std::int32_t>(table.size()); ++i)
        layers.push_back(range_cost(table, i, i + 1, in_.tp));
      layer_costs_.push_back(std::move(layers));
    }
  }
  size_plan();
}

void Builder::size_plan() {
  auto bad = [](Option option, const std::string& msg) { throw InputError(option, "", msg); };
  const std::int64_t gpus = gpus_total_;
  if (in_.iterations < 1 || in_.iterations > 10000) bad(Option{"iterations"}, "valid: 1 .. 10000");
  const std::int64_t rounds = std::int64_t{in_.microbatches} * in_.accum_steps * in_.iterations;
  const std::int64_t instantiated = explicit_ ? gpus : in_.pp;
  // About six ops per (GPU, chunk, microbatch), four per layer with sharded parameters, six more with context
  // parallelism (each pass's exchange and its sync ops), two more with the overlapped TP backward (its split
  // or fork, and its join): refuse plans that would not fit in memory rather than thrash. (In doubles: the
  // product of untrusted counts may exceed int64.)
  double estimate = static_cast<double>(instantiated) * in_.virtual_stages * static_cast<double>(rounds) *
                    static_cast<double>((shards_params() ? 4 * max_chunk_layers_ + 2 : 6) +
                                        (in_.cp > 1 ? 6 : 0) + (overlaps_tp() ? 2 : 0));
  const Option option = explicit_ ? Option{"replicas"} : Option{"microbatches"};
  const std::string fewer =
      fmt::format("use fewer microbatches or accumulation steps{}",
                  explicit_ ? (", or " + spelled(Option{"replicas"}) + " symmetric") : "");
  if (rounds > kMaxOps) estimate = static_cast<double>(rounds) * 6;  // beyond the ceiling either way
  detail::check_plan_size(estimate, in_.memory_budget_bytes, option, fewer);
  // Growing the op vector by doubling moves every op about twice: reserve the estimate with a margin (it
  // may fall a few per cent short; pages reserved beyond the ops emitted are never touched).
  plan_.ops.reserve(static_cast<std::size_t>(std::min(1.25 * estimate, static_cast<double>(kMaxOps))));
  // About a fifth of a plan's ops allocate or free memory (the forward and backward passes); reserving for
  // every op would take address space a search of many plans under a ulimit cannot spare.
  plan_.extras.reserve(plan_.ops.capacity() / 4);
  total_mb_ = static_cast<std::int32_t>(rounds);
  // Data-parallel collective ids follow the TP ones (one per replica, stage, chunk, microbatch and phase).
  dp_group_base_ = static_cast<std::int32_t>(std::min<std::int64_t>(
      std::int64_t{grad_replicas()} * in_.pp * in_.virtual_stages * total_mb_ * kTpPhases,
      kMaxOps * kTpPhases));
  // A ring is as slow as its slowest hop: where the group leaves rank 0's node (or NVLink domain), a member
  // there stands for the ring's neighbour.
  auto leaves_domain = [&](std::int32_t k) {
    return !in_.hw.nvlink_domain_shared(0, node_of_rank(global_rank(k, 0, 0)));
  };
  for (std::int32_t k = 1; k < grad_replicas(); ++k) {
    if (leaves_domain(k)) {
      dp_ring_offset_ = k;
      break;
    }
  }
  // Slower still is a hop up an oversubscribed spine: where the group spans leaves, a member under another
  // leaf stands for it in a symmetric plan, whose traffic then crosses the leaves' shared uplinks, so that
  // it is simulated explicitly, every member beside its own neighbour.
  const NetworkSpec& net = in_.hw.network;
  for (std::int32_t k = 1; !explicit_ && net.oversubscription > 1 && k < grad_replicas(); ++k) {
    if (net.crosses_spine(0, node_of_rank(global_rank(k, 0, 0)))) {
      dp_ring_offset_ = k;
      break;
    }
  }
  for (std::int32_t k = 1; k < in_.cp; ++k) {
    if (leaves_domain(k)) {
      cp_ring_offset_ = k;
      cp_ring_nodes_ = (in_.cp + k - 1) / k;
      break;
    }
  }
  for (std::int32_t k = 1; k < in_.ep; ++k) {
    if (leaves_domain(k)) {
      ep_ring_offset_ = k;
      ep_ring_nodes_ = (in_.ep + k - 1) / k;
      break;
    }
  }
  // NCCL runs a ring collective that leaves the node as several rings, one leaving through each member's NIC:
  // with k members of the ring in a node, each NIC carries 1/k of a member's ring bytes (the rest moves over
  // NVLink, beside it). Members in rank 0's domain, for the whole-group ring and for HSDP's ring between
  // shard groups (every shard-th rank).
  auto members_in_domain = [&](std::int32_t stride) {
    std::int32_t k = 0, n = 0;
    for (std::int32_t r = 0; r < grad_replicas(); r += stride, ++n) k += leaves_domain(r) ? 0 : 1;
    return k < n ? std::max(1, k) : 1;  // a ring that stays inside the domain keeps NVLink's pricing
  };
  auto domains = [&](std::int32_t stride) {  // how many domains the ring spans
    std::int32_t k = 0, n = 0;
    for (std::int32_t r = 0; r < grad_replicas(); r += stride, ++n) k += leaves_domain(r) ? 0 : 1;
    return k < n ? std::max(1, n / std::max(1, k)) : 1;
  };
  dp_ring_nics_ = members_in_domain(1);
  replicas_ring_nics_ = members_in_domain(std::max(1, in_.sharding.shard_group));
  dp_ring_nodes_ = domains(1);
  replicas_ring_nodes_ = domains(std::max(1, in_.sharding.shard_group));
  for (std::int32_t s = 0; s < in_.pp; ++s)
    orders_.push_back(sched_.order({in_.pp, in_.microbatches, in_.virtual_stages}, s));
}

DeviceId Builder::device_of_rank(std::int32_t rank) {
  auto& d = device_of_rank_[static_cast<std::size_t>(rank)];
  if (d == kNone) {
    Device dev;
    dev.name = fmt::format("gpu{}", rank);
    dev.kind = DeviceKind::kGpu;
    const std::int64_t position = in_.hw.gpu_slot(rank, in_.tp);
    dev.node = static_cast<std::int32_t>(position / in_.hw.node.gpus);
    dev.local_index = static_cast<std::int32_t>(position % in_.hw.node.gpus);
    plan_.devices.push_back(dev);
    d = static_cast<DeviceId>(plan_.devices.size() - 1);
  }
  return d;
}

void Builder::time_as_nccl(TransferWork& w, CollectiveKind kind, std::int32_t ranks, std::int32_t nodes,
                           std::int64_t message_bytes, std::int32_t count) const {
  if (in_.collective_latency == CollectiveLatency::kSteps || ranks < 2 || count <= 0) return;
  if (in_.collective_latency == CollectiveLatency::kNone) {
    set_latency_ns(w, 0);
    return;
  }
  const NcclMemo* hit = nullptr;
  for (const NcclMemo& m : nccl_memo_)
    if (m.bytes == message_bytes && m.kind == kind && m.ranks == ranks && m.nodes == nodes) hit = &m;
  if (hit == nullptr) {
    NcclMemo& m = nccl_memo_[nccl_memo_next_++ % nccl_memo_.size()];
    m = {kind, ranks, nodes, message_bytes,
         nccl_timing(in_.hw, kind, ranks, nodes, message_bytes, in_.network_shared ? plan_.nodes : 0)};
    hit = &m;
  }
  const NcclCollective c = hit->choice;
  w.bytes = static_cast<std::int64_t>(std::llround(static_cast<double>(w.bytes) * c.wire_factor));
  set_latency_ns(w, std::llround(c.latency_us * 1e3) * count);
}

OpId Builder::emit_tp_collective(StreamId stream, const GpuRank& g, const RangeCost& cc, OpTags tags,
                                 std::int32_t phase, std::int32_t halves) {
  TransferWork w;
  w.src = g.self;
  w.dst = tp_next_device(g);
  w.bytes = tp_ring_bytes(cc.tp_bus * halves / 2);
  w.latency_steps = (in_.tp - 1) * cc.tp_collectives * halves;
  // One collective's buffer: the bus bytes are 2(t-1)/t of it per collective.
  if (cc.tp_collectives > 0)
    w.message_bytes = cc.tp_bus * in_.tp / (2 * (in_.tp - 1) * std::int64_t{cc.tp_collectives});
  // Each collective is an all-reduce, or under sequence parallelism an all-gather and a reduce-scatter; an
  // op of one half (`halves` 1) carries half of them.
  const std::int32_t domain = in_.hw.tp_domain_gpus(), nodes = in_.tp > domain ? in_.tp / domain : 1;
  if (in_.sequence_parallel) {
    TransferWork rs = w;
    time_as_nccl(w, CollectiveKind::kAllGather, in_.tp, nodes, w.message_bytes, cc.tp_collectives);
    time_as_nccl(rs, CollectiveKind::kReduceScatter, in_.tp, nodes, rs.message_bytes, cc.tp_collectives);
    if (w.latency_ns >= 0) set_latency_ns(w, (std::int64_t{w.latency_ns} + rs.latency_ns) * halves / 2);
  } else {
    time_as_nccl(w, CollectiveKind::kAllReduce, in_.tp, nodes, w.message_bytes, cc.tp_collectives);
    if (w.latency_ns >= 0) set_latency_ns(w, std::int64_t{w.latency_ns} * halves / 2);
  }
  set_tp_group(w, g.d, g.stage, tags, phase);
  return add_op(stream, OpKind::kAllReduce, tags, w, -1);
}

OpId Builder::emit_tp_backward(const GpuRank& g, const RangeCost& cc, const OpTags& tags, OpId after,
                               const TpBackward& how) {
  // Phase 2 is the backward's; the exposed part under sequence parallelism takes the backward re-gather's
  // phase (4), which boundaries split by sequence parallelism never use.
  const OpId hidden = emit_tp_collective(g.stream(kTpStream), g, cc, tags, 2, how.hidden);
  plan_.ops[static_cast<std::size_t>(hidden)].deps.push_back(after);
  if (how.exposed > 0) emit_tp_collective(g.stream(kComputeStream), g, cc, tags, 4, how.exposed);
  const OpId join = add_marker(g.stream(kComputeStream), OpKind::kSync, tags);
  plan_.ops[static_cast<std::size_t>(join)].deps.push_back(hidden);
  return join;
}

void Builder::set_tp_group(TransferWork& w, std::int32_t d, std::int32_t stage, const OpTags& tags,
                           std::int32_t phase) const {
  if (!explicit_) return;
  // One collective per (replica, stage, chunk, microbatch, phase), shared by the tp ranks.
  const std::int64_t id =
      (((static_cast<std::int64_t>(d) * in_.pp + stage) * in_.virtual_stages + tags.virtual_stage) *
           total_mb_ +
       tags.microbatch) *
          kTpPhases +
      phase;
  w.group = static_cast<std::int32_t>(id);
  w.group_size = in_.tp;
}

void Builder::emit_boundary_regather(GpuRank& g, const Task& task, std::int32_t chunk, const RangeCost& cc,
                                     const OpTags& tags, MicrobatchOps& sl) {
  if (!in_.regather_boundaries || in_.tp == 1 || in_.pp == 1 || task.kind == TaskKind::kBackwardWeight)
    return;
  const bool fwd = task.kind == TaskKind::kForward;
  if (fwd ? takes_data(chunk) : takes_loss(chunk)) return;  // its input is the data or the loss
  // Each TP rank holds 1/t of the boundary (the p2p carried that piece); the all-gather brings the rest.
  const std::int64_t piece = fwd ? cc.input_bytes : cc.output_bytes;
  if (piece <= 0) return;
  TransferWork w;
  w.src = g.self;
  w.dst = tp_next_device(g);
  w.bytes = tp_ring_bytes((in_.tp - 1) * piece);
  w.latency_steps = in_.tp - 1;
  w.message_bytes = in_.tp * piece;
  const std::int32_t domain = in_.hw.tp_domain_gpus();
  time_as_nccl(w, CollectiveKind::kAllGather, in_.tp, in_.tp > domain ? in_.tp / domain : 1, w.message_bytes,
               1);
  set_tp_group(w, g.d, g.stage, tags, fwd ? 3 : 4);
  OpId gather = add_op(g.stream(kComputeStream), OpKind::kAllGather, tags, w, -1);
  // The pipeline receive lands before the gather: unless a bubble marker already waits for it, the gather
  // is the op the p2p transfer feeds.
  OpId& wait = fwd ? sl.fwd_wait : sl.bwd_wait;
  if (wait == kNone) wait = gather;
}

}  // namespace pipesim::sim::lowering
