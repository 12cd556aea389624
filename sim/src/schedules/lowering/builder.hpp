// The lowering of order-based schedules, shared by its files: the Builder that turns per-rank task orders
// into a Plan (compute ops, TP collectives, pipeline p2p transfers, data-parallel and ZeRO collectives, the
// optimizer step, memory effects), and the small pieces its passes share. Private to schedules/lowering/.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "hardware/topology.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/hardware/nccl_tuning.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/schedules/schedule.hpp"
#include "plan/endpoints.hpp"
#include "schedules/layer_ranges.hpp"
#include "schedules/paired_partition.hpp"
#include "schedules/plan_metadata.hpp"
#include "schedules/plan_size_guard.hpp"
#include "schedules/range_cost.hpp"

namespace pipesim::sim::lowering {

constexpr std::int32_t kNone = -1;
constexpr std::int64_t kMaxGpus = std::int64_t{1} << 20;
constexpr std::int64_t kMaxOps = std::int64_t{1} << 26;

/// The streams of one simulated GPU: collective only with dp > 1; allgather (parameter gathers ahead of the
/// compute, as FSDP runs them beside its reduce-scatters) only with sharded parameters; d2h, h2d and the host
/// CPU's optimizer queue only with something offloaded.
enum GpuStream : std::size_t {
  kComputeStream,
  kP2PSendStream,
  kCollectiveStream,
  kGatherStream,
  kD2HStream,
  kH2DStream,
  kCpuStream,
  kNvmeStream,
  kCpStream,  ///< context parallelism's key/value exchange
  kTpStream,  ///< the backward's TP collectives that overlap its GEMMs (ScheduleInput::overlap_tp_backward)
  kGpuStreams
};

inline OpKind backward_kind(TaskKind k) {
  return k == TaskKind::kBackward         ? OpKind::kBackward
         : k == TaskKind::kBackwardWeight ? OpKind::kBackwardWeight
                                          : OpKind::kBackwardInput;
}

/// The GPU work of a backward-kind pass over `part` (a chunk, a gradient bucket or one layer). With
/// `rows_with_input` (a backward the lowering splits around its overlapped TP all-reduce) the row-parallel
/// layers' weight gradients belong to the input-gradient part: they run before the column-parallel layers'
/// all-reduce, which only those layers' own weight gradients hide.
/// Kernel launches of a backward-kind pass per forward kernel: a whole backward launches two (input and
/// weight gradients); a zero-bubble schedule's B and W passes one each, so that B + W launch what the whole
/// backward does.
inline std::int32_t launch_share_of(TaskKind kind) {
  return kind == TaskKind::kBackward ? 2 : 1;
}

/// Launches of a backward-kind pass over `part`: the forward's `launch_share` times (0: the task's own
/// share), and the input gradient's own beyond them where the pass computes it.
inline std::int32_t backward_launches(TaskKind kind, const RangeCost& part, std::int32_t launch_share = 0) {
  const std::int32_t extra = kind == TaskKind::kBackwardWeight ? 0 : part.input_grad_extra_kernels;
  return std::max(0, part.kernels * (launch_share > 0 ? launch_share : launch_share_of(kind)) + extra);
}

inline ComputeWork backward_work(TaskKind kind, const RangeCost& part, double gemm, std::int32_t kernels,
                                 bool rows_with_input = false) {
  const bool whole = kind == TaskKind::kBackward, weight_only = kind == TaskKind::kBackwardWeight;
  const double rows = rows_with_input && !whole ? part.bwd_w_row : 0;
  const RatedWork rated = whole         ? part.rated_bwd_in + part.rated_bwd_w
                          : weight_only ? part.rated_bwd_w
                                        : part.rated_bwd_in;
  return ComputeWork{whole         ? part.bwd_in + part.bwd_w
                     : weight_only ? part.bwd_w - rows
                                   : part.bwd_in + rows,
                     gemm,
                     kernels,
                     whole         ? part.bwd_mem + part.grad_accum_mem
                     : weight_only ? part.grad_accum_mem
                                   : part.bwd_mem,
                     whole         ? part.expert_bwd_in + part.expert_bwd_w
                     : weight_only ? part.expert_bwd_w
                                   : part.expert_bwd_in,
                     part.expert_gemm,
                     (whole ? 2 : 1) * part.expert_weight_bytes,
                     weight_only ? 0 : part.attn_bwd_in,
                     weight_only ? 0 : part.attn_bwd_bytes,
                     whole         ? part.bwd_gemms
                     : weight_only ? part.bwd_weight_gemms
                                   : part.bwd_input_gemms,
                     whole         ? part.wide_bwd_in + part.wide_bwd_w
                     : weight_only ? part.wide_bwd_w
                                   : part.wide_bwd_in,
                     weight_only ? 0 : part.bwd_score_mem,
                     rated.flops,
                     rated.tflops(),
                     part.host_ns * launch_share_of(kind)};
}

/// A profiled pass's measured time, or -1 to time it from its work.
inline Duration backward_fixed(TaskKind kind, const RangeCost& part) {
  if (!part.profiled) return -1;
  return kind == TaskKind::kBackward         ? part.bwd_in_ns + part.bwd_w_ns
         : kind == TaskKind::kBackwardWeight ? part.bwd_w_ns
                                             : part.bwd_in_ns;
}

/// The pass a compute work belongs to, which tells apart the works of one range: the forward, its
/// recompute, or a backward kind with the rows of its weight gradient run beside the input gradient or not,
/// each with or without the copy of the layer's all-gathered weights into its parameters before it.
struct WorkPass {
  enum class Kind : std::uint8_t { kForward, kRecompute, kBackward };
  Kind kind = Kind::kForward;
  TaskKind task = TaskKind::kForward;
  bool rows_with_input = false;
  bool copies_gathered = false;
  bool operator==(const WorkPass&) const = default;
  std::size_t code() const {
    return ((static_cast<std::size_t>(kind) * 4 + static_cast<std::size_t>(task)) * 2 +
            (rows_with_input ? 1 : 0)) *
               2 +
           (copies_gathered ? 1 : 0);
  }
  WorkPass copying(bool copy) const {
    WorkPass p = *this;
    p.copies_gathered = copy;
    return p;
  }
};
inline constexpr WorkPass kForwardPass{WorkPass::Kind::kForward};
inline constexpr WorkPass kRecomputePass{WorkPass::Kind::kRecompute};
inline WorkPass backward_pass(TaskKind task, bool rows_with_input) {
  return {WorkPass::Kind::kBackward, task, rows_with_input};
}

struct MicrobatchOps {  // ops of one (replica, chunk, microbatch)
  OpId fwd_first = kNone, fwd_done = kNone, bwd_first = kNone, bwd_done = kNone;
  OpId fwd_wait = kNone, bwd_wait = kNone;  // the bubble marker that waits for the other stage's output
};

class Builder {
 public:
  Builder(const ScheduleDescriptor& s, const ScheduleInput& in) : sched_(s), in_(in) {}
  Plan build(bool explicit_replicas);
  /// A provable lower bound on the built plan's step time, from the same chunk costs and orders, without
  /// building it (see order_based_lower_bound).
  Duration lower_bound();

 private:
  /// The task times lower_bound works with (lower_bound.cpp).
  struct LowerBoundTimes;
  // Layout phases: checks of the configuration, the layer roles, chunk layer ranges and their costs, then
  // the size of the plan and each rank's task order.
  void validate_and_layout();
  BlockSpan checked_block_span() const;
  void layout_chunks(const BlockSpan& span);
  void size_plan();
  /// Every op of the plan is appended here: each stream's first op since emit_stage's iteration began and
  /// its last op are kept, so that no GPU searches the plan for its own ops.
  OpId append(StreamId stream, OpKind kind, const OpTags& tags, Payload&& payload, Duration fixed) {
    const OpId id = append_op(plan_, stream, kind, tags, std::move(payload), fixed);
    const auto s = static_cast<std::size_t>(stream);
    if (first_in_iteration_[s] == kNone) first_in_iteration_[s] = id;
    last_on_stream_[s] = id;
    return id;
  }
  OpId add_op(StreamId stream, OpKind kind, const OpTags& tags, Payload&& payload, Duration fixed) {
    return append(stream, kind, tags, std::move(payload), fixed);
  }
  /// A compute op: ops of equal work (every microbatch and replica of a chunk) share one ComputeWork.
  OpId add_op(StreamId stream, OpKind kind, const OpTags& tags, const ComputeWork& work, Duration fixed) {
    auto it = works_.find(work);
    if (it == works_.end()) it = works_.emplace(work, SharedCompute(work)).first;
    return append(stream, kind, tags, it->second, fixed);
  }
  /// The same for a work made by `make` from `range` (a pass: forward, recompute or a backward kind, with its
  /// launches and GEMM size): ops of every microbatch and replica ask for the same few, so each is remembered
  /// by where its costs live and found without making, hashing and comparing a ComputeWork. The ranges stay
  /// put while the plan is built (chunk and layer tables are filled before, bucket costs sit in a map).
  template <class Make>
  OpId add_op(StreamId stream, OpKind kind, const OpTags& tags, const RangeCost& range, WorkPass pass,
              std::int32_t kernels, double gemm, Make make, Duration fixed) {
    const WorkKey key{&range, std::bit_cast<std::uint64_t>(gemm), kernels, pass};
    const std::size_t entry =
        (std::hash<const void*>{}(&range) ^ pass.code() * 0x9e3779b9u) % kWorkMemoEntries;
    WorkMemo& m = work_memo_[entry];
    if (!(m.key == key)) {  // an empty entry's key names no range
      const ComputeWork work = make();
      auto it = works_.find(work);
      if (it == works_.end()) it = works_.emplace(work, SharedCompute(work)).first;
      m.key = key;
      m.work = it->second;
    }
    return append(stream, kind, tags, *m.work, fixed);
  }
  /// A zero-time marker (sync, bubble): its empty work is interned once, not hashed and compared per op.
  OpId add_marker(StreamId stream, OpKind kind, const OpTags& tags) {
    if (!empty_work_) empty_work_ = works_.emplace(ComputeWork{}, SharedCompute(ComputeWork{})).first->second;
    return append(stream, kind, tags, *empty_work_, 0);
  }
  DeviceId device_of_rank(std::int32_t rank);
  /// A TP ring member's neighbour in the ring: the next rank, or where the group spans several NVLink
  /// domains (nodes), the same place in the next domain, so that every member is priced on the ring's
  /// slowest hop (the network), in symmetric and explicit plans alike.
  std::int32_t tp_peer(std::int32_t t) const {
    const std::int32_t domain = in_.hw.tp_domain_gpus();
    return (t + (in_.tp > domain ? domain : 1)) % in_.tp;
  }
  /// A member's bytes of a TP ring collective that leaves the node (or NVLink domain): NCCL runs it as
  /// several rings, one leaving through each member's NIC, so with a domain's `domain` members each NIC
  /// carries 1/domain of a member's ring bytes (the rest moves over NVLink beside it), as for DP rings
  /// (dp_ring_nics_).
  std::int64_t tp_ring_bytes(std::int64_t bytes) const {
    const std::int32_t domain = in_.hw.tp_domain_gpus();
    return in_.tp > domain ? bytes / domain : bytes;
  }
  /// Times `w` as NCCL runs `count` collectives of `kind`, each of `message_bytes`, over `ranks` GPUs on
  /// `nodes` nodes: their latency by NCCL's model, and the bytes on the wire scaled by the chosen protocol's
  /// and algorithm's overhead (PlanInputs::collective_latency: steps keeps `w`'s per-step latency, none
  /// leaves it none).
  void time_as_nccl(TransferWork& w, CollectiveKind kind, std::int32_t ranks, std::int32_t nodes,
                    std::int64_t message_bytes, std::int32_t count) const;
  /// The model chunk a rank's local chunk holds, and the rank (stage) of a model chunk (ChunkPlacement).
  std::int32_t model_chunk(std::int32_t local, std::int32_t stage) const {
    // V and two copies alike: the second chunk of rank r is 2pp-1-r (up the ranks).
    if (sched_.placement != ChunkPlacement::kLoop) return local == 0 ? stage : 2 * in_.pp - 1 - stage;
    return local * in_.pp + stage;
  }
  std::int32_t stage_of_chunk(std::int32_t chunk) const {
    if (sched_.placement != ChunkPlacement::kLoop) return chunk < in_.pp ? chunk : 2 * in_.pp - 1 - chunk;
    return chunk % in_.pp;
  }
  /// A microbatch's path starts at a chunk that takes the data and ends at one that computes the loss: the
  /// first and last of all chunks, or with two copies of the model (kDual) those of each copy.
  bool takes_data(std::int32_t chunk) const {
    return sched_.placement == ChunkPlacement::kDual ? chunk % in_.pp == 0 : chunk == 0;
  }
  bool takes_loss(std::int32_t chunk) const {
    return sched_.placement == ChunkPlacement::kDual ? chunk % in_.pp == in_.pp - 1 : chunk == chunks_ - 1;
  }
  std::int32_t node_of_rank(std::int32_t rank) const {
    return static_cast<std::int32_t>(in_.hw.gpu_slot(rank, in_.tp) / in_.hw.node.gpus);
  }
  /// Ranks are ordered tp, cp, then pp, dp (or dp, pp: ScheduleInput::dp_inside_pp). `d` indexes the
  /// gradient replicas (cp x dp): cp rank d % cp of data-parallel rank d / cp.
  std::int32_t global_rank(std::int32_t d, std::int32_t stage, std::int32_t t) const {
    const std::int32_t outer = in_.dp_inside_pp ? d / in_.cp + in_.dp * stage : stage + in_.pp * (d / in_.cp);
    return t + in_.tp * (d % in_.cp + in_.cp * outer);
  }
  /// GPUs that hold the same weights and reduce their gradients together: cp x dp.
  std::int32_t grad_replicas() const { return in_.cp * in_.dp; }
  MicrobatchOps& ops_of(std::int32_t replica, std::int32_t chunk, std::int32_t mb) {
    return microbatch_ops_[(static_cast<std::size_t>(replica) * static_cast<std::size_t>(chunks_) +
                            static_cast<std::size_t>(chunk)) *
                               static_cast<std::size_t>(total_mb_) +
                           static_cast<std::size_t>(mb)];
  }
  struct GpuRank;
  /// A pass's TP collectives on `stream`: `halves` halves of the forward's volume (the forward's two
  /// all-reduces, or all-gather + reduce-scatter pairs, are 2).
  OpId emit_tp_collective(StreamId stream, const GpuRank& g, const RangeCost& cc, OpTags tags,
                          std::int32_t phase, std::int32_t halves = 2);
  /// The TP ring of (replica, stage) as an engine group: one per chunk, microbatch and `phase`.
  void set_tp_group(TransferWork& w, std::int32_t d, std::int32_t stage, const OpTags& tags,
                    std::int32_t phase) const;
  /// The device of g's next rank on its TP ring.
  DeviceId tp_next_device(const GpuRank& g);
  /// The GPU of (replica, stage) whose ops are being emitted.
  struct GpuRank {
    std::size_t replica;
    std::int32_t stage, d, t;  // pipeline stage, dp index, tp rank
    const std::vector<StreamId>& streams;
    std::vector<OpId>& dp_ops;  // this iteration's gradient all-reduce buckets
    DeviceId self = kNone;
    std::int64_t trainable = 0;      // parameters its optimizer updates
    std::int64_t dp_sequence = 0;    // data-parallel collectives emitted so far: their group key
    std::vector<OpId> weight_users;  // ZeRO-3: compute ops that used gathered weights, in order
    OpId weights_updated = kNone;    // the op that last updated this GPU's weights (its optimizer step)
    std::int64_t step_grads = 0;     // bytes of gradients this step's backward made, freed by its optimizer
    std::vector<std::int32_t> grads_step{};  // per chunk: 1 + the iteration whose gradients it made
    // Its TP ring neighbour's device, looked up at its first TP collective (devices are numbered as first
    // used), then kept: a stage's collectives all go there.
    mutable DeviceId tp_next = kNone;
    StreamId stream(GpuStream s) const { return streams[s]; }
  };
  /// The backward's TP collectives in halves of the forward's volume: `exposed` on the compute stream after
  /// the pass, `hidden` on the TP stream beside its GEMMs. Without sequence parallelism the backward
  /// all-reduces the input gradient of each column-parallel layer (the forward's volume); with it, it also
  /// all-gathers again the inputs that only the weight gradient needs (Megatron-LM keeps them split): 1.5x.
  /// Overlapped (Megatron-LM's asynchronous TP communication), the all-reduce runs beside the
  /// weight-gradient GEMMs (`after_input`); with sequence parallelism the re-gather runs beside the
  /// input-gradient GEMMs and the reduce-scatter beside the weight-gradient ones, and only the all-gathers
  /// of the row-parallel layers' output gradients stay exposed. A split backward (zero-bubble B and W) has no
  /// weight-gradient GEMMs beside its B: nothing hides there. Nor under ZeRO-3/FSDP, whose frameworks run
  /// TP collectives synchronously (PyTorch's FSDP with TP, unless its experimental async TP is on).
  struct TpBackward {
    std::int32_t exposed = 0, hidden = 0;
    bool after_input = false;
  };
  TpBackward tp_backward(TaskKind kind) const {
    const bool sp = in_.sequence_parallel;
    if (!overlaps_tp() || kind != TaskKind::kBackward) return {sp ? 3 : 2, 0, false};
    return sp ? TpBackward{1, 2, false} : TpBackward{0, 2, true};
  }
  /// A zero-time sync op on the compute stream for the hidden TP collectives to start from.
  OpId fork_tp(const GpuRank& g, const OpTags& tags) {
    return add_marker(g.stream(kComputeStream), OpKind::kSync, tags);
  }
  /// The hidden TP collectives of a backward (`how.hidden` halves) on the TP stream after `after`, the
  /// exposed ones (`how.exposed`, if any) on the compute stream, then a sync op joining both: the pass's end.
  OpId emit_tp_backward(const GpuRank& g, const RangeCost& cc, const OpTags& tags, OpId after,
                        const TpBackward& how);
  /// Scatter/gather pipeline boundaries: a chunk whose input (forward) or output gradient (backward)
  /// arrived from another stage split over the TP ranks re-gathers it over NVLink before it runs.
  void emit_boundary_regather(GpuRank& g, const Task& task, std::int32_t chunk, const RangeCost& cc,
                              const OpTags& tags, MicrobatchOps& sl);
  /// The GEMMs a recompute pass re-runs: the blocks' forward under full recompute; none under selective.
  GemmList full_recompute_gemms(const RangeCost& r) const {
    return in_.recompute == Recompute::kFull ? r.block_gemms : GemmList{};
  }
  /// The GPU work of the forward and of the recompute pass over `r` (a chunk or one layer), as lowered and as
  /// the lower bound times them; a profiled range's measured times, or -1.
  static ComputeWork forward_work(const RangeCost& r) {
    return ComputeWork{r.fwd,
                       r.gemm,
                       r.kernels,
                       r.fwd_mem,
                       r.expert_fwd,
                       r.expert_gemm,
                       r.expert_weight_bytes,
                       r.attn_fwd,
                       r.attn_fwd_bytes,
                       r.gemms,
                       r.wide_fwd,
                       r.fwd_score_mem,
                       r.rated_fwd.flops,
                       r.rated_fwd.tflops(),
                       r.host_ns};
  }
  ComputeWork recompute_work(const RangeCost& r) const {
    return ComputeWork{r.recompute,
                       r.gemm,
                       r.kernels,
                       r.recompute_mem,
                       r.expert_recompute,
                       r.expert_gemm,
                       r.expert_weight_bytes,
                       r.attn_recompute,
                       r.attn_recompute_bytes,
                       full_recompute_gemms(r),
                       r.wide_recompute,
                       r.recompute_score_mem,
                       r.rated_recompute.flops,
                       r.rated_recompute.tflops(),
                       r.host_ns};
  }
  static Duration forward_fixed(const RangeCost& r) { return r.profiled ? r.fwd_ns : Duration{-1}; }
  static Duration recompute_fixed(const RangeCost& r) { return r.profiled ? r.recompute_ns : Duration{-1}; }
  // Sharded data parallelism.
  bool shards_params() const { return in_.sharding.stage == ZeroStage::k3; }
  bool overlaps_tp() const { return in_.tp > 1 && in_.overlap_tp_backward && !shards_params(); }
  std::int32_t shard_ranks() const { return std::max(1, in_.sharding.shard_group); }
  bool offloads() const { return in_.sharding.offload_optimizer || in_.sharding.offload_params; }
  /// The gradients of chunk `cc` that its first backward of a step makes and the optimizer step frees
  /// (LayerCost::step_grad_bytes); kept whole by plain data parallelism only (sharded and offloaded state
  /// follows the ZeRO formulas).
  std::int64_t step_gradients(const RangeCost& cc) const {
    return in_.sharding.stage == ZeroStage::k0 && !offloads() ? cc.step_grad_bytes : 0;
  }
  /// The 16-bit gradients of chunk `cc` that live one backward only: with the framework's gradients in DDP's
  /// buckets and no DDP (one data-parallel rank), each backward's are freed once added into the fp32
  /// buffers, so the weights' resident bytes hold none. (A profiled workload's step gradients give their own
  /// lifetime.)
  std::int64_t backward_only_gradients(const RangeCost& cc) const {
    return in_.grads_in_ddp_buckets && in_.dp == 1 && !offloads() && cc.step_grad_bytes == 0
               ? kGradBytesPerParam * cc.trainable
               : 0;
  }
  /// Allocates chunk `chunk`'s step gradients after its first backward of iteration `iter`.
  void make_step_gradients(GpuRank& g, std::int32_t chunk, std::int32_t iter, const RangeCost& cc,
                           const OpTags& tags);
  /// The data-parallel rings a collective can run over: the shard group (the whole DP group unless HSDP),
  /// HSDP's replicas of a shard on other nodes, or the expert-parallel group.
  /// (kContext: the context-parallel group, for the attention's key/value exchange.)
  enum class DpGroup : std::uint8_t { kShard, kReplicas, kExperts, kContext };
  /// `count` collectives of `buffer_bytes` buffers in all over one of this GPU's data-parallel groups, on
  /// `on` after `after`; kNone when the group is one GPU.
  OpId emit_dp_collective(GpuRank& g, OpKind kind, GpuStream on, const OpTags& tags,
                          std::int64_t buffer_bytes, DpGroup group, OpId after, std::int32_t count = 1);
  /// Expert parallelism: the chunk's token dispatch and combine all-to-alls of one pass, on the compute
  /// stream after `after` (Megatron-LM runs them between the router and the experts, not overlapped).
  OpId emit_expert_alltoall(GpuRank& g, const RangeCost& cc, const OpTags& tags, OpId after = kNone);
  /// Context parallelism, ring attention: a marker before a pass (its pipeline input feeds it) that the ring
  /// starts after, so that the ring runs beside the pass; kNone without a ring.
  OpId fork_context_ring(const GpuRank& g, const Task& task, const RangeCost& cc, const OpTags& tags,
                         MicrobatchOps& sl);
  /// The pass's key/value exchange over the context-parallel group, after `fork` (ring) or after the pass's
  /// last op `last` (all-gather), and the marker that holds the compute stream until it is done; kNone
  /// without one.
  OpId join_context_exchange(GpuRank& g, const Task& task, const RangeCost& cc, const OpTags& tags, OpId fork,
                             OpId last);
  /// Layers [lo, hi) of a chunk in gradient buckets of about dp_bucket_params, last layer first, and the
  /// collectives the framework's reducer reduces their gradients in (ScheduleInput::dp_bucket_cap_params).
  struct Bucket {
    std::int32_t lo, hi;
    std::int64_t params;
    std::int32_t messages = 1;
  };
  std::vector<Bucket> gradient_buckets(const RangeCost& cc) const;
  /// ZeRO-1/2: after the optimizer updated this GPU's shard, every bucket's weights are gathered back.
  OpId emit_param_allgather(GpuRank& g, std::int32_t iter, OpId after);
  // ZeRO-3: each layer is its own op, its weights gathered (fetched from the host when offloaded) just before
  // it runs, its gradients reduce-scattered right after.
  void emit_layerwise_task(GpuRank& g, const Task& task, std::int32_t iter, std::int32_t round);
  OpId gather_layer(GpuRank& g, const RangeCost& layer, const OpTags& tags);
  void use_gathered(GpuRank& g, OpId user, OpId gather, const RangeCost& layer);
  void reduce_layer_gradients(GpuRank& g, const RangeCost& layer, const OpTags& tags, OpId after,
                              bool last_round);
  std::int64_t layer_weight_params(const RangeCost& layer) const {
    return in_.lora_rank > 0 ? layer.params + layer.trainable : layer.params;
  }
  /// Whether the first op to use a layer's gathered weights copies them into the parameters first (FSDP2's
  /// copy-out: the all-gather's one buffer split into each parameter on the compute stream).
  bool copies_gathered(OpId gathered) const {
    return gathered != kNone && shard_ranks() > 1 && in_.gather_copy_bytes_per_param > 0;
  }
  std::int64_t gather_copy_bytes(const RangeCost& layer) const {
    return in_.gather_copy_bytes_per_param * layer_weight_params(layer);
  }
  /// `w` with that copy folded in: its bytes and its launch.
  ComputeWork with_gather_copy(ComputeWork w, const RangeCost& layer, bool copy) const {
    if (copy) {
      w.mem_bytes += gather_copy_bytes(layer);
      ++w.kernels;
    }
    return w;
  }
  /// A profiled layer's measured time (fixed >= 0) with the copy's streaming time added; -1 stays -1.
  Duration with_gather_copy(Duration fixed, const RangeCost& layer, bool copy) const {
    return copy && fixed >= 0 ? fixed + in_.hw.memory_ns(gather_copy_bytes(layer)) : fixed;
  }
  /// The GPU of (replica, stage), before any of its ops.
  GpuRank gpu_rank(std::size_t replica, std::int32_t stage);
  // Emission phases of one stage: each task of its order and each iteration's optimizer, on every replica's
  // GPU of the stage side by side (place_weights has placed their resident weights before).
  void emit_stage(std::int32_t stage, const std::vector<std::int64_t>& trainable);
  std::int64_t place_weights(const GpuRank& g);
  void emit_task(GpuRank& g, const Task& task, std::int32_t iter, std::int32_t round, bool carries_dp);
  /// With bubble markers: the start and end markers before a task whose input comes from another stage;
  /// returns the end marker (what that input's transfer gates), or kNone.
  void mark_wait(const GpuRank& g, const Task& task, std::int32_t chunk, const OpTags& tags,
                 MicrobatchOps& sl);
  /// A task paired with the one before it (Task::paired_with_next): a marker ahead of the pair that its
  /// input arrives at, so the pair starts only when both inputs are there.
  void pair_inputs(const GpuRank& g, const Task& next, std::int32_t iter, std::int32_t round);
  /// A backward pass as one op, or split into gradient buckets each followed by its DP all-reduce; returns
  /// the first and last compute op.
  /// A backward-kind pass over the chunk as one op; `launch_share` of the whole backward's two launches per
  /// forward kernel (0: the task's own share, launch_share_of).
  std::pair<OpId, OpId> emit_backward(const GpuRank& g, const Task& task, const RangeCost& cc,
                                      const OpTags& tags, std::int32_t launch_share = 0,
                                      bool rows_with_input = false);
  std::pair<OpId, OpId> emit_gradient_buckets(GpuRank& g, const Task& task, const RangeCost& cc,
                                              const OpTags& tags, std::int32_t launch_share = 0,
                                              bool rows_with_input = false);
  /// One bucket's gradient reduction of `params` after op `after`, on the collective stream.
  void emit_gradient_reduction(GpuRank& g, const OpTags& tags, std::int64_t params, OpId after,
                               std::int32_t messages = 1);
  void emit_grad_sync_after_backward(GpuRank& g, std::int32_t iter);
  /// The optimizer step after the iteration's last gradients; returns the op after which this GPU's weights
  /// are updated (the step itself, the copy back from an offloaded optimizer, or the gathers of ZeRO-1/2).
  OpId emit_optimizer(GpuRank& g, std::int32_t iter);
  /// A profiled workload's measured optimizer step for this GPU's layers, or -1
  /// (Input::measured_optimizer_ns).
  Duration measured_optimizer_ns(const GpuRank& g) const;
  OpId emit_transfer(StreamId stream, OpKind kind, const OpTags& tags, DeviceId src, DeviceId dst,
                     std::int64_t bytes, std::vector<OpId> deps);
  /// A read from (or write to) the node's NVMe volume into (from) host memory, on the GPU's NVMe queue.
  OpId emit_nvme(const GpuRank& g, bool read, const OpTags& tags, std::int64_t bytes, std::vector<OpId> deps);
  /// The pipeline sends of a stage's GPUs, task by task, every replica's side by side.
  void emit_p2p(std::int32_t stage);

  const ScheduleDescriptor& sched_;
  const ScheduleInput& in_;
  Plan plan_;
  bool explicit_ = false;
  std::int32_t chunks_ = 0, total_mb_ = 0, gpus_total_ = 0, max_chunk_layers_ = 1;
  std::int32_t dp_ring_offset_ = 1;  // DP ring neighbour distance: crosses nodes whenever the group does
  std::int32_t ep_ring_offset_ = 1;  // the same inside an expert-parallel group
  std::int32_t cp_ring_offset_ = 1;  // and inside a context-parallel group
  /// NICs a member's share of a node-leaving DP ring is spread over (see size_plan); 1 inside a domain.
  std::int32_t dp_ring_nics_ = 1, replicas_ring_nics_ = 1;
  /// Nodes (NVLink domains) the whole-group DP ring and HSDP's ring between shard groups span.
  std::int32_t dp_ring_nodes_ = 1, replicas_ring_nodes_ = 1, cp_ring_nodes_ = 1, ep_ring_nodes_ = 1;
  /// time_as_nccl's latest choices: the ops of a plan repeat a few collective shapes millions of times.
  struct NcclMemo {
    CollectiveKind kind = CollectiveKind::kAllReduce;
    std::int32_t ranks = 0, nodes = 0;
    std::int64_t bytes = -1;
    NcclCollective choice;
  };
  mutable std::array<NcclMemo, 4> nccl_memo_{};
  mutable std::size_t nccl_memo_next_ = 0;
  std::vector<std::vector<RangeCost>> chunk_costs_;  // [cost table][chunk]
  /// Gradient buckets' costs by (cost table, first layer, end layer): the same for every replica and
  /// microbatch, so computed once (and their GEMM lists shared by every op).
  std::map<std::tuple<std::size_t, std::int32_t, std::int32_t>, RangeCost> bucket_costs_;
  const RangeCost& bucket_cost(std::size_t table, std::int32_t lo, std::int32_t hi) {
    auto [it, added] = bucket_costs_.try_emplace({table, lo, hi});
    if (added) it->second = range_cost(in_.costs[table], lo, hi, in_.tp);
    return it->second;
  }
  struct WorkHash {
    // Mixes the fields' bits: std::hash<double> runs a byte hash per field, once per op built.
    static std::uint64_t bits(double x) { return x == 0 ? 0 : std::bit_cast<std::uint64_t>(x); }  // -0 == 0
    std::size_t operator()(const ComputeWork& w) const {
      std::uint64_t h = bits(w.flops);
      for (double x :
           {w.gemm_gflop, w.expert_flops, w.attention_flops, w.wide_flops, w.rated_flops, w.rated_tflops})
        h = (h ^ bits(x)) * 0x9e3779b97f4a7c15ULL;
      for (std::int64_t x : {w.mem_bytes, w.score_bytes, w.attention_bytes, w.expert_weight_bytes,
                             std::int64_t{w.kernels}, static_cast<std::int64_t>(w.gemms.size()), w.host_ns})
        h = (h ^ static_cast<std::uint64_t>(x)) * 0x9e3779b97f4a7c15ULL;
      return static_cast<std::size_t>(h ^ (h >> 29));
    }
  };
  /// Every distinct ComputeWork of the plan, once (add_op's interning).
  std::unordered_map<ComputeWork, SharedCompute, WorkHash> works_;
  /// add_op's memory of the works it made lately, by their costs' address and pass.
  struct WorkKey {
    const RangeCost* range = nullptr;
    std::uint64_t gemm = 0;  // the GEMM size's bits
    std::int32_t kernels = 0;
    WorkPass pass;
    bool operator==(const WorkKey&) const = default;
  };
  struct WorkMemo {
    WorkKey key;
    std::optional<SharedCompute> work;
  };
  static constexpr std::size_t kWorkMemoEntries = 64;
  std::array<WorkMemo, kWorkMemoEntries> work_memo_;
  std::optional<SharedCompute> empty_work_;          // works_'s empty work, once a marker asked for it
  std::vector<std::vector<RangeCost>> layer_costs_;  // ZeRO-3: [cost table][layer]
  std::map<std::array<std::int64_t, 5>, std::int32_t> dp_groups_;  // explicit replicas: collective ids
  std::int32_t dp_group_base_ = 0;
  /// TP collectives per chunk and microbatch: forward, recompute, backward, forward and backward re-gathers.
  static constexpr std::int64_t kTpPhases = 5;
  std::vector<std::pair<std::int32_t, std::int32_t>> replicas_;  // (dp index, tp rank)
  std::vector<DeviceId> device_of_rank_;
  std::vector<std::vector<StreamId>> streams_;  // [replica*pp + stage] -> compute, p2p_send, collective
  std::vector<std::vector<Task>> orders_;       // [stage]
  HugeVector<MicrobatchOps>
      microbatch_ops_;  // megabytes at thousands of GPUs: on huge pages, filled without a fault per page
  std::vector<std::vector<OpId>> dp_ops_;  // [replica*pp + stage]
  std::vector<DeviceId> host_of_node_;     // host device per node, created on demand
  std::vector<DeviceId> nvme_of_node_;     // NVMe volume per node, created on demand
  std::vector<OpId> next_on_stream_;       // blocking p2p: each op's successor on its stream
  /// One send (or same-device handoff) of emit_p2p's round: the task and replica, what it waits for and who
  /// consumes it.
  struct Hop {
    const Task* task;
    std::size_t replica;
    OpId produced, consumer;
    std::int32_t chunk, peer;
  };
  std::vector<Hop> hops_;  // emit_p2p's round (kept: its buffer serves every round)
  OpId last_compute_op_ = kNone;
  std::vector<OpId> first_in_iteration_, last_on_stream_;  // per stream (see append)
  std::int32_t cpu_threads_per_gpu_ = 1;

  /// The node-level device (host memory, NVMe volume) of `gpu`'s node, created on first use.
  DeviceId node_device(std::vector<DeviceId>& per_node, DeviceId gpu, DeviceKind kind) {
    const auto node = static_cast<std::size_t>(plan_.devices[static_cast<std::size_t>(gpu)].node);
    if (per_node[node] == kNone) {
      plan_.devices.push_back(
          {fmt::format("{}{}", to_string(kind), node), kind, static_cast<std::int32_t>(node), 0, 0});
      per_node[node] = static_cast<DeviceId>(plan_.devices.size() - 1);
    }
    return per_node[node];
  }
  DeviceId host_of(DeviceId gpu) { return node_device(host_of_node_, gpu, DeviceKind::kHost); }
  DeviceId host_of_if(DeviceId gpu, bool needed) { return needed ? host_of(gpu) : kNone; }
  DeviceId nvme_of(DeviceId gpu) { return node_device(nvme_of_node_, gpu, DeviceKind::kNvme); }
};

}  // namespace pipesim::sim::lowering
