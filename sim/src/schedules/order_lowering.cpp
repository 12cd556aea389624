#include "schedules/order_lowering.hpp"

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
#include "plan/endpoints.hpp"
#include "schedules/layer_ranges.hpp"
#include "schedules/paired_partition.hpp"
#include "schedules/plan_metadata.hpp"
#include "schedules/plan_size_guard.hpp"
#include "schedules/range_cost.hpp"

namespace pipesim::sim {

namespace {

constexpr std::int32_t kNone = -1;
constexpr std::int64_t kMaxGpus = std::int64_t{1} << 20;
constexpr std::int64_t kMaxOps = std::int64_t{1} << 26;

/// The streams of one simulated GPU: collective only with dp > 1; allgather (parameter gathers ahead of the
/// compute, as FSDP runs them beside its reduce-scatters) only with sharded parameters; d2h, h2d and the host
/// CPU's optimizer queue only with something offloaded.
enum StreamSlot : std::size_t {
  kComputeSlot,
  kP2PSendSlot,
  kCollectiveSlot,
  kGatherSlot,
  kD2HSlot,
  kH2DSlot,
  kCpuSlot,
  kNvmeSlot,
  kCpSlot,  ///< context parallelism's key/value exchange
  kTpSlot,  ///< the backward's TP collectives that overlap its GEMMs (ScheduleInput::overlap_tp_backward)
  kStreamSlots
};

OpKind backward_kind(TaskKind k) {
  return k == TaskKind::kBackward         ? OpKind::kBackward
         : k == TaskKind::kBackwardWeight ? OpKind::kBackwardWeight
                                          : OpKind::kBackwardInput;
}

/// The GPU work of a backward-kind pass over `part` (a chunk, a gradient bucket or one layer). With
/// `rows_with_input` (a backward the lowering splits around its overlapped TP all-reduce) the row-parallel
/// layers' weight gradients belong to the input-gradient part: they run before the column-parallel layers'
/// all-reduce, which only those layers' own weight gradients hide.
ComputeWork backward_work(TaskKind kind, const RangeCost& part, double gemm, std::int32_t kernels,
                          bool rows_with_input = false) {
  const bool whole = kind == TaskKind::kBackward, weight_only = kind == TaskKind::kBackwardWeight;
  const double rows = rows_with_input && !whole ? part.bwd_w_row : 0;
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
                     weight_only ? 0 : part.bwd_score_mem};
}

/// A profiled pass's measured time, or -1 to time it from its work.
Duration backward_fixed(TaskKind kind, const RangeCost& part) {
  if (!part.profiled) return -1;
  return kind == TaskKind::kBackward         ? part.bwd_in_ns + part.bwd_w_ns
         : kind == TaskKind::kBackwardWeight ? part.bwd_w_ns
                                             : part.bwd_in_ns;
}

struct Slot {  // ops of one (replica, chunk, microbatch)
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
  OpId add_op(StreamId stream, OpKind kind, const OpTags& tags, const RangeCost& range, std::int32_t pass,
              std::int32_t kernels, double gemm, Make make, Duration fixed) {
    const WorkKey key{&range, std::bit_cast<std::uint64_t>(gemm), kernels, pass};
    const std::size_t slot =
        (std::hash<const void*>{}(&range) ^ static_cast<std::size_t>(pass) * 0x9e3779b9u) % kWorkSlots;
    WorkMemo& m = work_memo_[slot];
    if (!(m.key == key)) {  // an empty slot's key names no range
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
  static std::int32_t backward_pass(TaskKind kind, bool rows_with_input) {
    return kBackwardPass + static_cast<std::int32_t>(kind) + (rows_with_input ? 8 : 0);
  }
  DeviceId device_of_rank(std::int32_t rank);
  /// A TP ring member's neighbour in the ring: the next rank, or where the group spans several NVLink
  /// domains (nodes), the same place in the next domain, so that every member is priced on the ring's
  /// slowest hop (the network), in symmetric and explicit plans alike.
  std::int32_t tp_peer(std::int32_t t) const {
    const std::int32_t domain = in_.hw.tp_domain_gpus();
    return (t + (in_.tp > domain ? domain : 1)) % in_.tp;
  }
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
  Slot& slot(std::int32_t replica, std::int32_t chunk, std::int32_t mb) {
    return slots_[(static_cast<std::size_t>(replica) * static_cast<std::size_t>(chunks_) +
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
    // Its TP ring neighbour's device, looked up at its first TP collective (devices are numbered as first
    // used), then kept: a stage's collectives all go there.
    mutable DeviceId tp_next = kNone;
    StreamId stream(StreamSlot s) const { return streams[s]; }
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
    return add_marker(g.stream(kComputeSlot), OpKind::kSync, tags);
  }
  /// The hidden TP collectives of a backward (`how.hidden` halves) on the TP stream after `after`, the
  /// exposed ones (`how.exposed`, if any) on the compute stream, then a sync op joining both: the pass's end.
  OpId emit_tp_backward(const GpuRank& g, const RangeCost& cc, const OpTags& tags, OpId after,
                        const TpBackward& how);
  /// Scatter/gather pipeline boundaries: a chunk whose input (forward) or output gradient (backward)
  /// arrived from another stage split over the TP ranks re-gathers it over NVLink before it runs.
  void emit_boundary_regather(GpuRank& g, const Task& task, std::int32_t chunk, const RangeCost& cc,
                              const OpTags& tags, Slot& sl);
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
                       r.fwd_score_mem};
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
                       r.recompute_score_mem};
  }
  static Duration forward_fixed(const RangeCost& r) { return r.profiled ? r.fwd_ns : Duration{-1}; }
  static Duration recompute_fixed(const RangeCost& r) { return r.profiled ? r.recompute_ns : Duration{-1}; }
  // Sharded data parallelism.
  bool shards_params() const { return in_.sharding.stage == ZeroStage::k3; }
  bool overlaps_tp() const { return in_.tp > 1 && in_.overlap_tp_backward && !shards_params(); }
  std::int32_t shard_ranks() const { return std::max(1, in_.sharding.shard_group); }
  bool offloads() const { return in_.sharding.offload_optimizer || in_.sharding.offload_params; }
  /// The data-parallel rings a collective can run over: the shard group (the whole DP group unless HSDP),
  /// HSDP's replicas of a shard on other nodes, or the expert-parallel group.
  /// (kContext: the context-parallel group, for the attention's key/value exchange.)
  enum class DpGroup : std::uint8_t { kShard, kReplicas, kExperts, kContext };
  /// `count` collectives of `buffer_bytes` buffers in all over one of this GPU's data-parallel groups, on
  /// `slot` after `after`; kNone when the group is one GPU.
  OpId emit_dp_collective(GpuRank& g, OpKind kind, StreamSlot slot, const OpTags& tags,
                          std::int64_t buffer_bytes, DpGroup group, OpId after, std::int32_t count = 1);
  /// Expert parallelism: the chunk's token dispatch and combine all-to-alls of one pass, on the compute
  /// stream after `after` (Megatron-LM runs them between the router and the experts, not overlapped).
  OpId emit_expert_alltoall(GpuRank& g, const RangeCost& cc, const OpTags& tags, OpId after = kNone);
  /// Context parallelism, ring attention: a marker before a pass (its pipeline input feeds it) that the ring
  /// starts after, so that the ring runs beside the pass; kNone without a ring.
  OpId fork_context_ring(const GpuRank& g, const Task& task, const RangeCost& cc, const OpTags& tags,
                         Slot& sl);
  /// The pass's key/value exchange over the context-parallel group, after `fork` (ring) or after the pass's
  /// last op `last` (all-gather), and the marker that holds the compute stream until it is done; kNone
  /// without one.
  OpId join_context_exchange(GpuRank& g, const Task& task, const RangeCost& cc, const OpTags& tags, OpId fork,
                             OpId last);
  /// Layers [lo, hi) of a chunk in gradient buckets of about dp_bucket_params, last layer first.
  struct Bucket {
    std::int32_t lo, hi;
    std::int64_t params;
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
  /// The GPU of (replica, stage), before any of its ops.
  GpuRank gpu_rank(std::size_t replica, std::int32_t stage);
  // Emission phases of one stage: each task of its order and each iteration's optimizer, on every replica's
  // GPU of the stage side by side (place_weights has placed their resident weights before).
  void emit_stage(std::int32_t stage, const std::vector<std::int64_t>& trainable);
  std::int64_t place_weights(const GpuRank& g);
  void emit_task(GpuRank& g, const Task& task, std::int32_t iter, std::int32_t round, bool carries_dp);
  /// With bubble markers: the start and end markers before a task whose input comes from another stage;
  /// returns the end marker (what that input's transfer gates), or kNone.
  void mark_wait(const GpuRank& g, const Task& task, std::int32_t chunk, const OpTags& tags, Slot& sl);
  /// A task paired with the one before it (Task::paired_with_next): a marker ahead of the pair that its
  /// input arrives at, so the pair starts only when both inputs are there.
  void pair_inputs(const GpuRank& g, const Task& next, std::int32_t iter, std::int32_t round);
  /// A backward pass as one op, or split into gradient buckets each followed by its DP all-reduce; returns
  /// the first and last compute op.
  /// A backward-kind pass over the chunk as one op; `launch_share` of the whole backward's two launches per
  /// kernel (1 each for a backward split in two by the lowering itself).
  std::pair<OpId, OpId> emit_backward(const GpuRank& g, const Task& task, const RangeCost& cc,
                                      const OpTags& tags, std::int32_t launch_share = 2,
                                      bool rows_with_input = false);
  std::pair<OpId, OpId> emit_gradient_buckets(GpuRank& g, const Task& task, const RangeCost& cc,
                                              const OpTags& tags, std::int32_t launch_share = 2,
                                              bool rows_with_input = false);
  /// One bucket's gradient reduction of `params` after op `after`, on the collective stream.
  void emit_gradient_reduction(GpuRank& g, const OpTags& tags, std::int64_t params, OpId after);
  void emit_grad_sync_after_backward(GpuRank& g, std::int32_t iter);
  /// The optimizer step after the iteration's last gradients; returns the op after which this GPU's weights
  /// are updated (the step itself, the copy back from an offloaded optimizer, or the gathers of ZeRO-1/2).
  OpId emit_optimizer(GpuRank& g, std::int32_t iter);
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
      for (double x : {w.gemm_gflop, w.expert_flops, w.attention_flops, w.wide_flops})
        h = (h ^ bits(x)) * 0x9e3779b97f4a7c15ULL;
      for (std::int64_t x : {w.mem_bytes, w.score_bytes, w.attention_bytes, w.expert_weight_bytes,
                             std::int64_t{w.kernels}, static_cast<std::int64_t>(w.gemms.size())})
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
    std::int32_t pass = 0;  // kForwardPass, kRecomputePass or kBackwardPass + the TaskKind, + 8 with rows
    bool operator==(const WorkKey&) const = default;
  };
  struct WorkMemo {
    WorkKey key;
    std::optional<SharedCompute> work;
  };
  static constexpr std::size_t kWorkSlots = 64;
  static constexpr std::int32_t kForwardPass = 0, kRecomputePass = 1, kBackwardPass = 2;
  std::array<WorkMemo, kWorkSlots> work_memo_;
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
  HugeVector<Slot> slots_;  // megabytes at thousands of GPUs: on huge pages, filled without a fault per page
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

void Builder::validate_and_layout() {
  const auto& hw = in_.hw;
  auto bad = [](const std::string& flag, const std::string& msg) { throw InputError(flag, "", msg); };
  if (in_.pp < 1) bad("--pp", "must be >= 1");
  if (in_.tp < 1) bad("--tp", "must be >= 1");
  if (in_.dp < 1) bad("--dp", "must be >= 1");
  if (const std::string why = hw.tp_placement_error(in_.tp); !why.empty()) bad("--tp", why);
  if (in_.microbatches < 1) bad("--microbatches", "must be >= 1");
  if (!hw.gpu.peak_tflops.count(in_.dtype)) {
    std::string valid;
    for (const auto& [dtype, tflops] : hw.gpu.peak_tflops) valid += (valid.empty() ? "" : ", ") + dtype;
    bad("--dtype", fmt::format("{} has no {} peak; valid: {}", hw.name, in_.dtype, valid));
  }
  if (in_.accum_steps < 1) bad("--accum-steps", "must be >= 1");
  if (in_.virtual_stages < 1) bad("--virtual-stages", "must be >= 1");
  if (!sched_.multi_chunk && in_.virtual_stages != 1)
    bad("--virtual-stages", fmt::format("schedule {} uses one chunk per rank; valid: 1", sched_.name));
  if (std::string why = sched_.check({in_.pp, in_.microbatches, in_.virtual_stages}); !why.empty())
    bad("--schedule", fmt::format("{}: {}", sched_.name, why));
  if (in_.cp < 1) bad("--cp", "must be >= 1");
  const std::int64_t gpus = std::int64_t{in_.pp} * in_.tp * in_.cp * in_.dp;
  if (gpus > kMaxGpus)
    bad("--pp/--tp/--cp/--dp", fmt::format("pp*tp*cp*dp = {} GPUs; valid: at most {}", gpus, kMaxGpus));
  gpus_total_ = static_cast<std::int32_t>(gpus);
  // TP groups that do not divide an NVLink domain leave its remainder idle: the job spans more nodes.
  const std::int64_t last_slot = hw.gpu_slot(gpus_total_ - 1, in_.tp);
  std::int32_t need_nodes = static_cast<std::int32_t>(last_slot / hw.node.gpus + 1);
  if (in_.nodes > 0 && in_.nodes < need_nodes)
    bad("--nodes", fmt::format("pp*tp*cp*dp = {} GPUs need {} nodes of {} GPUs; given {}", gpus_total_,
                               need_nodes, hw.node.gpus, in_.nodes));
  plan_.nodes = need_nodes;  // nodes beyond the job's are idle: no links or devices are built for them
  if (in_.costs.empty()) bad("--model", "no layers to simulate");
  if (static_cast<std::int32_t>(in_.cost_of_microbatch.size()) != in_.microbatches)
    bad("--microbatches", "internal: one cost table index per microbatch expected");

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
          "--workload", fmt::format("/layers/{}", i),
          "layers must be ordered embedding, blocks, head (an embedding or head inside the blocks)");
  }
  if (span.count == 0) throw InputError("--workload", "/layers", "needs at least one layer with role block");
  return span;
}

void Builder::layout_chunks(const BlockSpan& span) {
  auto bad = [](const std::string& flag, const std::string& msg) { throw InputError(flag, "", msg); };
  const std::int32_t blocks = span.count;
  chunks_ = in_.pp * in_.virtual_stages;
  // Two copies of the model (DualPipe) split it into pp stages; the other placements into every chunk.
  const std::int32_t stages = model_stages(sched_.placement, in_.pp, in_.virtual_stages);
  const char* what = stages == chunks_ ? "pp x virtual stages" : "pp (each stage held twice)";
  std::vector<std::int32_t> part = in_.partition;
  if (part.empty()) {
    if (blocks < stages)
      bad("--pp",
          fmt::format("{} = {} chunks exceeds the model's {} transformer blocks", what, stages, blocks));
    // Two chunks per rank (a V, or two copies): the pairs even out the embedding and the output layer.
    if (sched_.placement != ChunkPlacement::kLoop)
      part = paired_partition(in_.costs.front(), span, in_.pp, sched_.placement);
    if (part.empty()) part = balanced_partition(blocks, stages);
  }
  if (static_cast<std::int32_t>(part.size()) != stages)
    bad("--partition", fmt::format("has {} entries; expected {} = {}", part.size(), what, stages));
  if (std::accumulate(part.begin(), part.end(), 0) != blocks)
    bad("--partition", fmt::format("sums to {}; the model has {} transformer blocks",
                                   std::accumulate(part.begin(), part.end(), 0), blocks));
  plan_.meta.partition = part;

  auto ranges = chunk_layer_ranges(span, static_cast<std::int32_t>(in_.costs.front().size()), part);
  if (stages != chunks_) {  // the second copy
    const auto first_copy = ranges;
    ranges.insert(ranges.end(), first_copy.begin(), first_copy.end());
  }
  for (std::size_t c = 0; c < ranges.size(); ++c)
    if (ranges[c].first == ranges[c].second)
      bad("--partition", fmt::format("chunk {} would hold no layer at all; every stage needs a layer", c));
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
  auto bad = [](const std::string& flag, const std::string& msg) { throw InputError(flag, "", msg); };
  const std::int64_t gpus = gpus_total_;
  if (in_.iterations < 1 || in_.iterations > 10000) bad("--iterations", "valid: 1 .. 10000");
  const std::int64_t rounds = std::int64_t{in_.microbatches} * in_.accum_steps * in_.iterations;
  const std::int64_t instantiated = explicit_ ? gpus : in_.pp;
  // About six ops per (GPU, chunk, microbatch), four per layer with sharded parameters, six more with context
  // parallelism (each pass's exchange and its sync ops), two more with the overlapped TP backward (its split
  // or fork, and its join): refuse plans that would not fit in memory rather than thrash. (In doubles: the
  // product of untrusted counts may exceed int64.)
  double estimate = static_cast<double>(instantiated) * in_.virtual_stages * static_cast<double>(rounds) *
                    static_cast<double>((shards_params() ? 4 * max_chunk_layers_ + 2 : 6) +
                                        (in_.cp > 1 ? 6 : 0) + (overlaps_tp() ? 2 : 0));
  const char* flag = explicit_ ? "--replicas" : "--microbatches";
  const std::string fewer = fmt::format("use fewer microbatches or accumulation steps{}",
                                        explicit_ ? ", or --replicas symmetric" : "");
  if (rounds > kMaxOps) estimate = static_cast<double>(rounds) * 6;  // beyond the ceiling either way
  detail::check_plan_size(estimate, in_.memory_budget_bytes, flag, fewer);
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
  for (std::int32_t k = 1; k < in_.cp; ++k) {
    if (leaves_domain(k)) {
      cp_ring_offset_ = k;
      break;
    }
  }
  for (std::int32_t k = 1; k < in_.ep; ++k) {
    if (leaves_domain(k)) {
      ep_ring_offset_ = k;
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
  dp_ring_nics_ = members_in_domain(1);
  replicas_ring_nics_ = members_in_domain(std::max(1, in_.sharding.shard_group));
  for (std::int32_t s = 0; s < in_.pp; ++s)
    orders_.push_back(sched_.order({in_.pp, in_.microbatches, in_.virtual_stages}, s));
}

DeviceId Builder::device_of_rank(std::int32_t rank) {
  auto& d = device_of_rank_[static_cast<std::size_t>(rank)];
  if (d == kNone) {
    Device dev;
    dev.name = fmt::format("gpu{}", rank);
    dev.kind = DeviceKind::kGpu;
    const std::int64_t slot = in_.hw.gpu_slot(rank, in_.tp);
    dev.node = static_cast<std::int32_t>(slot / in_.hw.node.gpus);
    dev.local_index = static_cast<std::int32_t>(slot % in_.hw.node.gpus);
    plan_.devices.push_back(dev);
    d = static_cast<DeviceId>(plan_.devices.size() - 1);
  }
  return d;
}

OpId Builder::emit_tp_collective(StreamId stream, const GpuRank& g, const RangeCost& cc, OpTags tags,
                                 std::int32_t phase, std::int32_t halves) {
  TransferWork w;
  w.src = g.self;
  w.dst = tp_next_device(g);
  w.bytes = cc.tp_bus * halves / 2;
  w.latency_steps = (in_.tp - 1) * cc.tp_collectives * halves;
  // One collective's buffer: the bus bytes are 2(t-1)/t of it per collective.
  if (cc.tp_collectives > 0)
    w.message_bytes = cc.tp_bus * in_.tp / (2 * (in_.tp - 1) * std::int64_t{cc.tp_collectives});
  set_tp_group(w, g.d, g.stage, tags, phase);
  return add_op(stream, OpKind::kAllReduce, tags, w, -1);
}

OpId Builder::emit_tp_backward(const GpuRank& g, const RangeCost& cc, const OpTags& tags, OpId after,
                               const TpBackward& how) {
  // Phase 2 is the backward's; the exposed part under sequence parallelism takes the backward re-gather's
  // phase (4), which boundaries split by sequence parallelism never use.
  const OpId hidden = emit_tp_collective(g.stream(kTpSlot), g, cc, tags, 2, how.hidden);
  plan_.ops[static_cast<std::size_t>(hidden)].deps.push_back(after);
  if (how.exposed > 0) emit_tp_collective(g.stream(kComputeSlot), g, cc, tags, 4, how.exposed);
  const OpId join = add_marker(g.stream(kComputeSlot), OpKind::kSync, tags);
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
                                     const OpTags& tags, Slot& sl) {
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
  w.bytes = (in_.tp - 1) * piece;
  w.latency_steps = in_.tp - 1;
  w.message_bytes = in_.tp * piece;
  set_tp_group(w, g.d, g.stage, tags, fwd ? 3 : 4);
  OpId gather = add_op(g.stream(kComputeSlot), OpKind::kAllGather, tags, w, -1);
  // The pipeline receive lands before the gather: unless a bubble marker already waits for it, the gather
  // is the op the p2p transfer feeds.
  OpId& wait = fwd ? sl.fwd_wait : sl.bwd_wait;
  if (wait == kNone) wait = gather;
}

DeviceId Builder::tp_next_device(const GpuRank& g) {
  if (g.tp_next == kNone) g.tp_next = device_of_rank(global_rank(g.d, g.stage, tp_peer(g.t)));
  return g.tp_next;
}

Builder::GpuRank Builder::gpu_rank(std::size_t replica, std::int32_t stage) {
  const auto [d, t] = replicas_[replica];
  const std::size_t index = replica * static_cast<std::size_t>(in_.pp) + static_cast<std::size_t>(stage);
  GpuRank g{replica, stage, d, t, streams_[index], dp_ops_[index], kNone, 0, 0, {}, kNone};
  g.self = plan_.streams[static_cast<std::size_t>(g.stream(kComputeSlot))].device;
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
      first_in_iteration_[static_cast<std::size_t>(g.stream(kComputeSlot))] = kNone;
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
      const auto compute = static_cast<std::size_t>(g.stream(kComputeSlot));
      // The next iteration's first compute waits for the weights this iteration's optimizer produces (the
      // compute stream orders it after a GPU optimizer anyway; an offloaded one returns them over PCIe).
      if (previous_update[r] != kNone && first_in_iteration_[compute] != kNone)
        plan_.ops[static_cast<std::size_t>(first_in_iteration_[compute])].deps.push_back(previous_update[r]);
      last_compute_op_ = last_on_stream_[compute];
      if (grad_replicas() > 1 && !in_.overlap_grad_sync) emit_grad_sync_after_backward(g, iter);
      previous_update[r] = g.weights_updated = emit_optimizer(g, iter);
    }
  }
}

std::int64_t Builder::place_weights(const GpuRank& g) {
  std::int64_t trainable = 0, weights = 0, resident = 0;
  for (std::int32_t v = 0; v < in_.virtual_stages; ++v) {
    const RangeCost& cc = chunk_costs_[0][static_cast<std::size_t>(model_chunk(v, g.stage))];
    trainable += cc.trainable;
    weights += layer_weight_params(cc);
    resident += cc.param_bytes;
  }
  if (in_.sharding.stage != ZeroStage::k0 || offloads()) {
    // Sharded over the data-parallel group and/or offloaded: weights, gradients and Adam state by the ZeRO
    // paper's formulas; what is offloaded sits in the node's host memory.
    const ShardedStateBytes state = sharded_state_bytes(weights, trainable, in_.sharding);
    resident = state.gpu();
    if (state.host > 0) plan_.devices[static_cast<std::size_t>(host_of(g.self))].resident_bytes += state.host;
    if (state.nvme > 0) plan_.devices[static_cast<std::size_t>(nvme_of(g.self))].resident_bytes += state.nvme;
  }
  plan_.devices[static_cast<std::size_t>(g.self)].resident_bytes = resident;
  return trainable;
}

void Builder::pair_inputs(const GpuRank& g, const Task& next, std::int32_t iter, std::int32_t round) {
  const std::int32_t mb = (iter * in_.accum_steps + round) * in_.microbatches + next.microbatch;
  const std::int32_t chunk = model_chunk(next.chunk, g.stage);
  Slot& sl = slot(static_cast<std::int32_t>(g.replica), chunk, mb);
  const bool fwd = next.kind == TaskKind::kForward;
  if (next.kind == TaskKind::kBackwardWeight || (fwd ? takes_data(chunk) : takes_loss(chunk))) return;
  // The next task's input arrives at a marker ahead of this one, which runs after it.
  (fwd ? sl.fwd_wait : sl.bwd_wait) =
      add_marker(g.stream(kComputeSlot), OpKind::kSync, OpTags{g.stage, next.chunk, mb, -1, -1, iter});
}

void Builder::mark_wait(const GpuRank& g, const Task& task, std::int32_t chunk, const OpTags& tags,
                        Slot& sl) {
  if (!in_.bubble_markers || in_.pp == 1 || task.kind == TaskKind::kBackwardWeight) return;
  if ((task.kind == TaskKind::kForward ? sl.fwd_wait : sl.bwd_wait) != kNone) return;  // a pair's marker
  const bool fwd = task.kind == TaskKind::kForward;
  if (fwd ? takes_data(chunk) : takes_loss(chunk)) return;  // its input is the data or the loss: no wait
  const StreamId compute = g.stream(kComputeSlot);
  add_marker(compute, OpKind::kBubble, tags);
  (fwd ? sl.fwd_wait : sl.bwd_wait) = add_marker(compute, OpKind::kBubble, tags);
}

void Builder::emit_task(GpuRank& g, const Task& task, std::int32_t iter, std::int32_t round,
                        bool carries_dp) {
  const StreamId compute = g.stream(kComputeSlot);
  const bool tp_comm = in_.tp > 1;
  const std::int32_t mb = (iter * in_.accum_steps + round) * in_.microbatches + task.microbatch;
  const std::int32_t chunk = model_chunk(task.chunk, g.stage);
  const RangeCost& cc = chunk_costs_[static_cast<std::size_t>(
      in_.cost_of_microbatch[static_cast<std::size_t>(task.microbatch)])][static_cast<std::size_t>(chunk)];
  OpTags tags{g.stage, task.chunk, mb, cc.begin, cc.end, iter};
  Slot& sl = slot(static_cast<std::int32_t>(g.replica), chunk, mb);
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
  const std::int32_t kernels = cc.kernels * launch_share;
  OpId b = add_op(
      g.stream(kComputeSlot), backward_kind(task.kind), tags, cc, backward_pass(task.kind, rows_with_input),
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
    const std::int32_t kernels =
        cc.kernels * launch_share * (bucket.hi - bucket.lo) / std::max(1, cc.end - cc.begin);
    OpId b = add_op(
        g.stream(kComputeSlot), backward_kind(task.kind), bt, part, backward_pass(task.kind, rows_with_input),
        kernels, cc.gemm, [&] { return backward_work(task.kind, part, cc.gemm, kernels, rows_with_input); },
        backward_fixed(task.kind, part));
    if (first == kNone) first = b;
    last = b;
    emit_gradient_reduction(g, bt, bucket.params, b);
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
    first = gathered = emit_transfer(g.stream(kH2DSlot), OpKind::kH2D, tags, host_of(g.self), g.self, shard,
                                     {released, g.weights_updated, read});
  }
  OpId ag = emit_dp_collective(g, OpKind::kAllGather, kGatherSlot, tags, full, DpGroup::kShard,
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
      emit_dp_collective(g, OpKind::kReduceScatter, kCollectiveSlot, tags, grads, DpGroup::kShard, after);
  const OpId freed = rs != kNone ? rs : after;
  plan_.add_free(freed, grads);
  if (rs != kNone) g.dp_ops.push_back(rs);
  if (in_.sharding.hybrid && last_round) {
    // HSDP: the reduced shards of the replicas on other nodes are averaged once per optimizer step.
    const std::int32_t n = shard_ranks();
    OpId ar = emit_dp_collective(g, OpKind::kAllReduce, kCollectiveSlot, tags, (grads + n - 1) / n,
                                 DpGroup::kReplicas, freed);
    if (ar != kNone) g.dp_ops.push_back(ar);
  }
}

void Builder::emit_layerwise_task(GpuRank& g, const Task& task, std::int32_t iter, std::int32_t round) {
  const StreamId compute = g.stream(kComputeSlot);
  const std::int32_t mb = (iter * in_.accum_steps + round) * in_.microbatches + task.microbatch;
  const std::int32_t chunk = model_chunk(task.chunk, g.stage);
  const auto table =
      static_cast<std::size_t>(in_.cost_of_microbatch[static_cast<std::size_t>(task.microbatch)]);
  const RangeCost& cc = chunk_costs_[table][static_cast<std::size_t>(chunk)];
  const auto& layers = layer_costs_[table];
  Slot& sl = slot(static_cast<std::int32_t>(g.replica), chunk, mb);
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
      OpId f = add_op(
          compute, OpKind::kForward, tags, lc, kForwardPass, lc.kernels, lc.gemm,
          [&] { return forward_work(lc); }, forward_fixed(lc));
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
    if (!weight_only && (lc.recompute > 0 || lc.recompute_ns > 0)) {
      first = add_op(
          compute, OpKind::kRecompute, tags, lc, kRecomputePass, lc.kernels, lc.gemm,
          [&] { return recompute_work(lc); }, recompute_fixed(lc));
      plan_.add_alloc(first, lc.extra);
      if (gathered != kNone) plan_.ops[static_cast<std::size_t>(first)].deps.push_back(gathered);
    }
    OpId b = add_op(
        compute, backward_kind(task.kind), tags, lc, backward_pass(task.kind, false), lc.kernels * 2, lc.gemm,
        [&] { return backward_work(task.kind, lc, lc.gemm, lc.kernels * 2); }, backward_fixed(task.kind, lc));
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

OpId Builder::emit_dp_collective(GpuRank& g, OpKind kind, StreamSlot slot, const OpTags& tags,
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
  if (explicit_) {
    // The members of one group emit their collectives in the same order: (stage, tp rank, group, sequence)
    // names the collective they share.
    const std::array<std::int64_t, 5> key{g.stage, g.t, static_cast<std::int64_t>(group), group_index,
                                          sequence};
    auto [it, fresh] = dp_groups_.emplace(key, dp_group_base_ + static_cast<std::int32_t>(dp_groups_.size()));
    w.group = it->second;
    w.group_size = n;
  }
  OpId op = add_op(g.stream(slot), kind, tags, w, -1);
  if (after != kNone) plan_.ops[static_cast<std::size_t>(op)].deps.push_back(after);
  return op;
}

OpId Builder::emit_expert_alltoall(GpuRank& g, const RangeCost& cc, const OpTags& tags, OpId after) {
  if (cc.ep_alltoalls == 0) return kNone;
  return emit_dp_collective(g, OpKind::kAllToAll, kComputeSlot, tags, cc.ep_alltoall, DpGroup::kExperts,
                            after, cc.ep_alltoalls);
}

OpId Builder::fork_context_ring(const GpuRank& g, const Task& task, const RangeCost& cc, const OpTags& tags,
                                Slot& sl) {
  if (in_.cp < 2 || cc.cp_kv <= 0 || in_.cp_attention != CpAttention::kRing ||
      task.kind == TaskKind::kBackwardWeight)
    return kNone;
  const OpId fork = add_marker(g.stream(kComputeSlot), OpKind::kSync, tags);
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
    exchanged = emit_dp_collective(g, OpKind::kAllGather, kCpSlot, tags, passes * kv, DpGroup::kContext, fork,
                                   cc.cp_layers);
  } else {
    // All-gather attention (Llama 3): keys and values gathered before the attention of each layer; the
    // backward gathers them again and reduce-scatters their gradients. Nothing overlaps them.
    exchanged =
        emit_dp_collective(g, OpKind::kAllGather, kCpSlot, tags, kv, DpGroup::kContext, last, cc.cp_layers);
    if (!forward)
      exchanged = emit_dp_collective(g, OpKind::kReduceScatter, kCpSlot, tags, kv, DpGroup::kContext,
                                     exchanged, cc.cp_layers);
  }
  const OpId join = add_marker(g.stream(kComputeSlot), OpKind::kSync, tags);
  plan_.ops[static_cast<std::size_t>(join)].deps.push_back(exchanged);
  return join;
}

void Builder::emit_gradient_reduction(GpuRank& g, const OpTags& tags, std::int64_t params, OpId after) {
  // Plain data parallelism all-reduces the gradients; ZeRO-1 and 2 reduce-scatter them, each rank keeping
  // the reduced shard its optimizer updates.
  const bool sharded = in_.sharding.stage != ZeroStage::k0;
  OpId op = emit_dp_collective(g, sharded ? OpKind::kReduceScatter : OpKind::kAllReduce, kCollectiveSlot,
                               tags, params * in_.dp_grad_bytes_per_param, DpGroup::kShard, after);
  if (op != kNone) g.dp_ops.push_back(op);
}

std::vector<Builder::Bucket> Builder::gradient_buckets(const RangeCost& cc) const {
  const auto& table = in_.costs.front();
  std::vector<Bucket> out;
  for (std::int32_t hi = cc.end; hi > cc.begin;) {
    std::int32_t lo = hi;
    std::int64_t params = 0, param_bytes = 0;
    while (lo > cc.begin && (params < in_.dp_bucket_params || lo == hi)) {
      const LayerCost& l = table[static_cast<std::size_t>(--lo)];
      params += (l.trainable_params + in_.tp - 1) / in_.tp;
      param_bytes += l.param_bytes;
    }
    // Profiled layers give bytes on the GPU, not parameter counts.
    if (params == 0 && param_bytes > 0) params = param_bytes / kGpuTrainingBytesPerParam;
    out.push_back({lo, hi, params});
    hi = lo;
  }
  return out;
}

void Builder::emit_grad_sync_after_backward(GpuRank& g, std::int32_t iter) {
  // Megatron-LM's local DDP: every chunk's gradients, bucket by bucket, once the GPU's backward is done.
  for (std::int32_t v = 0; v < in_.virtual_stages; ++v) {
    const RangeCost& cc = chunk_costs_[0][static_cast<std::size_t>(model_chunk(v, g.stage))];
    for (const Bucket& b : gradient_buckets(cc))
      emit_gradient_reduction(g, OpTags{g.stage, v, -1, b.lo, b.hi, iter}, b.params, last_compute_op_);
  }
}

OpId Builder::emit_param_allgather(GpuRank& g, std::int32_t iter, OpId after) {
  OpId last = after;
  for (std::int32_t v = 0; v < in_.virtual_stages; ++v) {
    const RangeCost& cc = chunk_costs_[0][static_cast<std::size_t>(model_chunk(v, g.stage))];
    for (const Bucket& b : gradient_buckets(cc)) {
      OpId ag =
          emit_dp_collective(g, OpKind::kAllGather, kCollectiveSlot, OpTags{g.stage, v, -1, b.lo, b.hi, iter},
                             b.params * kShardWeightBytes, DpGroup::kShard, after);
      if (ag != kNone) last = ag;
    }
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
  return emit_transfer(g.stream(kNvmeSlot), read ? OpKind::kNvmeRead : OpKind::kNvmeWrite, tags,
                       read ? nvme : host, read ? host : nvme, bytes, std::move(deps));
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
    OpId opt = add_op(g.stream(kComputeSlot), OpKind::kOptimizer, opt_tags,
                      MemoryWork{updated * in_.optimizer_bytes_per_param}, -1);
    plan_.ops[static_cast<std::size_t>(opt)].deps = g.dp_ops;
    if (gather_after) return emit_param_allgather(g, iter, opt);
    if (!params_away) return opt;
    // ZeRO-Infinity with the optimizer on the GPU: the updated 16-bit shard goes back where parameters live.
    OpId down = emit_transfer(g.stream(kD2HSlot), OpKind::kD2H, opt_tags, g.self, host,
                              updated * kWeightBytesPerParam, {opt});
    return nvme ? emit_nvme(g, false, opt_tags, updated * kWeightBytesPerParam, {down}) : down;
  }
  // Offloaded: gradients down, CPU Adam on this GPU's share of the host cores, weights back up (parameters
  // offloaded with the optimizer stay off the GPU, where the next gathers fetch them). On NVMe, the Adam
  // state is read into host memory for the step and written back after it (DeepSpeed's default, without
  // pipelining the reads and writes).
  std::vector<OpId> grads_ready = g.dp_ops;
  grads_ready.push_back(last_compute_op_);
  OpId d2h = emit_transfer(g.stream(kD2HSlot), OpKind::kD2H, opt_tags, g.self, host,
                           updated * kGradBytesPerParam, grads_ready);
  const OpId state_in =
      nvme ? emit_nvme(g, true, opt_tags, updated * kShardOptimizerBytes, grads_ready) : kNone;
  OpId adam =
      add_op(g.stream(kCpuSlot), OpKind::kOptimizer, opt_tags, CpuWork{updated, cpu_threads_per_gpu_}, -1);
  plan_.ops[static_cast<std::size_t>(adam)].deps.push_back(d2h);
  if (state_in != kNone) plan_.ops[static_cast<std::size_t>(adam)].deps.push_back(state_in);
  const OpId state_out =
      nvme ? emit_nvme(g, false, opt_tags,
                       updated * (kShardOptimizerBytes + (params_away ? kShardWeightBytes : 0)), {adam})
           : kNone;
  if (params_away) return nvme ? state_out : adam;
  OpId h2d = emit_transfer(g.stream(kH2DSlot), OpKind::kH2D, opt_tags, host, g.self,
                           updated * kWeightBytesPerParam, {adam});
  return gather_after ? emit_param_allgather(g, iter, h2d) : h2d;
}

void Builder::emit_p2p(std::int32_t stage) {
  const auto pp = static_cast<std::size_t>(in_.pp);
  auto device_of = [&](std::size_t replica, std::int32_t on_stage) {
    const auto& cs = streams_[replica * pp + static_cast<std::size_t>(on_stage)];
    return plan_.streams[static_cast<std::size_t>(cs[kComputeSlot])].device;
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
        const Slot& from = slot(ri, chunk, mb);
        const Slot& to = slot(ri, peer, mb);
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
      const StreamId send = streams_[hop.replica * pp + static_cast<std::size_t>(stage)][kP2PSendSlot];
      OpId p = add_op(send, OpKind::kP2P, tags, w, in_.p2p_fixed_ns);
      plan_.ops[static_cast<std::size_t>(p)].deps.push_back(hop.produced);
      plan_.ops[static_cast<std::size_t>(hop.consumer)].deps.push_back(p);
      // A blocking send holds the sender's compute: its next op waits for the transfer.
      const OpId next = in_.blocking_p2p ? next_on_stream_[static_cast<std::size_t>(hop.produced)] : kNone;
      if (next != kNone) plan_.ops[static_cast<std::size_t>(next)].deps.push_back(p);
    }
  }
}

Plan Builder::build(bool explicit_replicas) {
  explicit_ = explicit_replicas;
  plan_.hw = in_.hw;
  validate_and_layout();
  device_of_rank_.assign(static_cast<std::size_t>(plan_.nodes) * static_cast<std::size_t>(in_.hw.node.gpus),
                         kNone);
  if (explicit_) {
    for (std::int32_t d = 0; d < grad_replicas(); ++d)
      for (std::int32_t t = 0; t < in_.tp; ++t) replicas_.push_back({d, t});
  } else {
    replicas_.push_back({0, 0});
  }
  host_of_node_.assign(static_cast<std::size_t>(plan_.nodes), kNone);
  nvme_of_node_.assign(static_cast<std::size_t>(plan_.nodes), kNone);
  {
    // The node's cores are shared by the job's GPUs on it, each optimizer step getting an equal share.
    const std::int32_t on_node = std::min(gpus_total_, in_.hw.node.gpus);
    cpu_threads_per_gpu_ = in_.optimizer_threads(std::max(1, in_.hw.host.cores / on_node));
  }
  slots_.assign(replicas_.size() * static_cast<std::size_t>(chunks_) * static_cast<std::size_t>(total_mb_),
                Slot{});
  dp_ops_.resize(replicas_.size() * static_cast<std::size_t>(in_.pp));
  // At most kStreamSlots streams per GPU: sized once, not regrown (and copied) as they are added.
  plan_.streams.reserve(replicas_.size() * static_cast<std::size_t>(in_.pp) * kStreamSlots);
  streams_.reserve(replicas_.size() * static_cast<std::size_t>(in_.pp));
  for (const auto& [d, t] : replicas_) {
    for (std::int32_t s = 0; s < in_.pp; ++s) {
      DeviceId dev = device_of_rank(global_rank(d, s, t));
      std::vector<StreamId> ids(kStreamSlots, kNone);
      auto add_stream = [&](std::size_t slot, DeviceId on, StreamKind k, std::string name) {
        plan_.streams.push_back({on, k, std::move(name)});
        ids[slot] = static_cast<StreamId>(plan_.streams.size() - 1);
      };
      add_stream(kComputeSlot, dev, StreamKind::kCompute, "compute");
      add_stream(kP2PSendSlot, dev, StreamKind::kP2PSend, "p2p_send");
      if (grad_replicas() > 1) add_stream(kCollectiveSlot, dev, StreamKind::kCollective, "collective");
      if (grad_replicas() > 1 && shards_params())
        add_stream(kGatherSlot, dev, StreamKind::kCollective, "allgather");
      if (in_.cp > 1) add_stream(kCpSlot, dev, StreamKind::kCollective, kContextParallelStream);
      if (overlaps_tp()) add_stream(kTpSlot, dev, StreamKind::kCollective, kTensorParallelStream);
      if (offloads()) {
        add_stream(kD2HSlot, dev, StreamKind::kD2H, "d2h");
        add_stream(kH2DSlot, dev, StreamKind::kH2D, "h2d");
        add_stream(kCpuSlot, host_of(dev), StreamKind::kCpu,
                   plan_.devices[static_cast<std::size_t>(dev)].name + ".adam");
        if (in_.sharding.offload_to_nvme) add_stream(kNvmeSlot, dev, StreamKind::kNvme, "nvme");
      }
      streams_.push_back(std::move(ids));
    }
  }
  first_in_iteration_.assign(plan_.streams.size(), kNone);
  last_on_stream_.assign(plan_.streams.size(), kNone);
  {
    // Resident weights are placed GPU by GPU, replica after replica: the host and NVMe devices they create
    // are numbered in that order.
    std::vector<std::int64_t> trainable(replicas_.size() * static_cast<std::size_t>(in_.pp));
    for (std::size_t r = 0; r < replicas_.size(); ++r)
      for (std::int32_t s = 0; s < in_.pp; ++s)
        trainable[r * static_cast<std::size_t>(in_.pp) + static_cast<std::size_t>(s)] =
            place_weights(gpu_rank(r, s));
    for (std::int32_t s = 0; s < in_.pp; ++s) emit_stage(s, trainable);
  }
  if (in_.blocking_p2p) {
    // Each op's successor on its stream, for blocking sends.
    next_on_stream_.assign(plan_.ops.size(), kNone);
    std::vector<OpId> last(plan_.streams.size(), kNone);
    for (std::size_t i = 0; i < plan_.ops.size(); ++i) {
      OpId& previous = last[static_cast<std::size_t>(plan_.ops[i].stream)];
      if (previous != kNone) next_on_stream_[static_cast<std::size_t>(previous)] = static_cast<OpId>(i);
      previous = static_cast<OpId>(i);
    }
  }
  for (std::int32_t s = 0; s < in_.pp; ++s) emit_p2p(s);

  auto& m = plan_.meta;
  m.schedule = sched_.name;
  m.pp = in_.pp;
  m.tp = in_.tp;
  m.dp = in_.dp;
  m.cp = in_.cp;
  m.recompute = to_string(in_.recompute);
  m.replicas = explicit_ ? "explicit" : "symmetric";
  m.data_parallel = describe(in_.sharding);
  m.ep = in_.ep;
  m.simulated_gpus = static_cast<std::int32_t>(replicas_.size()) * in_.pp;
  fill_job_metadata(m, in_, [](const LayerCost& l) { return l.recompute_flops; });
  return std::move(plan_);
}

/// Which shared links (a PCIe switch uplink, the root complex, the NVMe volume) a symmetric plan's traffic
/// crosses: between GPUs (collectives, pipeline sends), or between a GPU and its node's host or NVMe.
struct SharedLinkUse {
  bool gpu_traffic = false, host_traffic = false;
};

SharedLinkUse shared_link_use(const Plan& plan) {
  Topology topo(plan.hw, plan.nodes);
  SharedLinkUse use;
  for (const Op& op : plan.ops) {
    const auto* w = std::get_if<TransferWork>(&op.payload);
    if (!w || op.fixed_duration >= 0) continue;
    const auto& a = plan.devices[static_cast<std::size_t>(w->src)];
    const auto& b = plan.devices[static_cast<std::size_t>(w->dst)];
    Path p = is_collective(op.kind) ? topo.ring_path({a.node, a.local_index}, {b.node, b.local_index},
                                                     w->bytes, w->message_bytes)
                                    : topo.path(endpoint_of(a), endpoint_of(b), w->bytes);
    bool shared = false;
    for (LinkId l : p.links) shared = shared || topo.links()[static_cast<std::size_t>(l)].shared;
    if (!shared) continue;
    (a.kind == DeviceKind::kGpu && b.kind == DeviceKind::kGpu ? use.gpu_traffic : use.host_traffic) = true;
  }
  return use;
}

/// Whether a collective's ring inside a node can hop over unalike links: a node whose GPU pairs are joined in
/// more than one way (NVLink bridging only some pairs, or peer-to-peer PCIe under several switches) runs a
/// ring as fast as its slowest hop, which the simulated member's own hop need not be. (Rings that leave the
/// node are priced at their network hop in both kinds of plan: Builder::tp_peer and the DP ring offset.)
bool unalike_ring_hops(const Plan& plan) {
  const HardwareProfile& hw = plan.hw;
  auto nvlinked = [&](std::int32_t a, std::int32_t b) {
    return hw.nvlink_group(a) >= 0 && hw.nvlink_group(a) == hw.nvlink_group(b);
  };
  std::vector<std::int32_t> switch_of(static_cast<std::size_t>(hw.node.gpus), 0);
  for (std::size_t s = 0; s < hw.node.pcie.switches.size(); ++s)
    for (int g : hw.node.pcie.switches[s])
      switch_of[static_cast<std::size_t>(g)] = static_cast<std::int32_t>(s);
  std::set<int>
      kinds;  // 0: NVLink, 1: PCIe under one switch, 2: PCIe across switches, 3: through host memory
  for (std::int32_t a = 0; a < hw.node.gpus; ++a)
    for (std::int32_t b = a + 1; b < hw.node.gpus; ++b)
      kinds.insert(nvlinked(a, b)                                                                     ? 0
                   : !hw.node.pcie.peer_to_peer                                                       ? 3
                   : switch_of[static_cast<std::size_t>(a)] == switch_of[static_cast<std::size_t>(b)] ? 1
                                                                                                      : 2);
  if (kinds.size() < 2) return false;
  for (const Op& op : plan.ops) {
    const auto* w = std::get_if<TransferWork>(&op.payload);
    if (!w || !is_collective(op.kind) || w->src == w->dst) continue;
    const Device& a = plan.devices[static_cast<std::size_t>(w->src)];
    const Device& b = plan.devices[static_cast<std::size_t>(w->dst)];
    if (a.kind == DeviceKind::kGpu && b.kind == DeviceKind::kGpu && a.node == b.node) return true;
  }
  return false;
}

/// A symmetric plan's twin counts (PlanMeta::node_twins, switch_twins): the job GPUs that run the same
/// stage as a simulated GPU on its node and under its PCIe switch. They stand in for simulating the other
/// replicas only where every node repeats the pattern of the simulated replica's nodes and every stage has
/// as many GPUs on a node (and under a switch) as every other: none otherwise.
std::optional<std::pair<std::int32_t, std::int32_t>> twin_counts(const ScheduleInput& in) {
  // The patterns below are of tp x pp replicas laid side by side.
  if (in.cp > 1 || in.dp_inside_pp) return std::nullopt;
  const std::int64_t g = in.hw.node.gpus, tp = in.tp, replica = std::int64_t{in.tp} * in.pp;
  const std::int64_t total = replica * in.dp;
  std::int64_t node = 0;
  if (total <= g)
    node = tp * in.dp;  // one node holds every replica
  else if (g % replica == 0 && total % g == 0)
    node = tp * (g / replica);  // whole replicas per node
  else if (replica % g == 0 && g % tp == 0)
    node = tp;  // a replica spans whole nodes, each holding whole TP groups of some of its stages
  else
    return std::nullopt;
  // Under each PCIe switch of the simulated replica's nodes, every stage present must have as many GPUs.
  const auto& switches = in.hw.node.pcie.switches;
  std::int64_t per_switch = 0;
  for (std::int64_t first = 0; first < std::min(total, replica); first += g) {
    for (const auto& sw : switches) {
      std::map<std::int64_t, std::int64_t> count;  // stage -> GPUs under this switch
      for (int local : sw) {
        const std::int64_t rank = first + local;
        if (rank < total) ++count[(rank / tp) % in.pp];
      }
      for (const auto& [stage, n] : count) {
        if (per_switch == 0) per_switch = n;
        if (n != per_switch) return std::nullopt;
      }
    }
  }
  return std::pair{static_cast<std::int32_t>(node),
                   static_cast<std::int32_t>(std::max<std::int64_t>(1, per_switch))};
}

/// True when a node holding a simulated GPU also holds GPUs of replicas that are not simulated.
bool shares_host_with_replicas(const Plan& plan, const ScheduleInput& in) {
  const std::int64_t gpn = in.hw.node.gpus, total = std::int64_t{in.pp} * in.tp * in.cp * in.dp;
  std::vector<std::int64_t> simulated(static_cast<std::size_t>(plan.nodes), 0);
  std::vector<char> has_stream(plan.devices.size(), 0);
  for (const auto& s : plan.streams) has_stream[static_cast<std::size_t>(s.device)] = 1;
  for (std::size_t d = 0; d < plan.devices.size(); ++d)
    if (plan.devices[d].kind == DeviceKind::kGpu && has_stream[d])
      ++simulated[static_cast<std::size_t>(plan.devices[d].node)];
  for (std::size_t n = 0; n < simulated.size(); ++n) {
    if (simulated[n] == 0) continue;
    const std::int64_t on_node = std::min(gpn, total - static_cast<std::int64_t>(n) * gpn);
    if (on_node > simulated[n]) return true;
  }
  return false;
}

}  // namespace

Duration Builder::lower_bound() {
  plan_.hw = in_.hw;
  validate_and_layout();
  if (in_.iterations != 1) return 0;  // a steady-state step is a difference of iteration ends: no bound here
  // Each compute op's time as the engine will take it, less its kernel launches: the lowering splits a pass
  // into gradient buckets or layers whose launch counts are rounded down, and whose other terms (rounded-up
  // FLOP, byte and fixed times, the longer of two floors) add up to at least the whole pass's.
  auto timed = [&](const ComputeWork& w, Duration fixed) {  // launches left out: kernels ignored
    if (fixed >= 0) return fixed;
    return in_.hw.op_ns(w.flops, w.gemm_gflop, 0, in_.dtype, w.mem_bytes, w.expert_flops, w.expert_gemm_gflop,
                        w.expert_weight_bytes, w.attention_flops, w.attention_bytes, w.wide_flops,
                        w.score_bytes);
  };
  // A TP collective on the compute stream lasts at least its path latency steps plus its bytes at the
  // fastest rate its ring path allows (the slowest link on it, or the measured bus bandwidth cap): flows
  // sharing links only go slower. Replica 0's TP rank 0 of each stage, as lowered.
  const std::int32_t gpn = in_.hw.node.gpus;
  auto slot = [&](std::int32_t rank) { return in_.hw.gpu_slot(rank, in_.tp); };
  const Topology topology(in_.hw, static_cast<int>(slot(global_rank(0, in_.pp - 1, in_.tp - 1)) / gpn + 1));
  auto tp_ns = [&](std::int32_t stage, const RangeCost& c, std::int32_t halves) -> Duration {
    if (in_.tp <= 1 || c.tp_bus <= 0 || c.tp_collectives <= 0 || halves <= 0) return 0;
    const auto self = static_cast<std::int32_t>(slot(global_rank(0, stage, 0)));
    const auto next = static_cast<std::int32_t>(slot(global_rank(0, stage, tp_peer(0))));
    const std::int64_t bytes = c.tp_bus * halves / 2;
    const std::int64_t message = c.tp_bus * in_.tp / (2 * (in_.tp - 1) * std::int64_t{c.tp_collectives});
    const Path p = topology.ring_path({self / gpn, self % gpn}, {next / gpn, next % gpn}, bytes, message);
    Duration d = p.latency * (in_.tp - 1) * c.tp_collectives * halves;
    if (p.links.empty() || bytes <= 0) return d;
    double rate = p.max_bytes_per_ns > 0 ? p.max_bytes_per_ns : std::numeric_limits<double>::infinity();
    for (LinkId l : p.links)
      rate = std::min(rate, topology.links()[static_cast<std::size_t>(l)].bytes_per_ns);
    return d + static_cast<Duration>(std::floor(static_cast<double>(bytes) / rate));
  };
  auto forward = [&](const RangeCost& c) { return timed(forward_work(c), forward_fixed(c)); };
  auto backward = [&](TaskKind kind, const RangeCost& c) {
    Duration d = 0;
    if (kind != TaskKind::kBackwardWeight && (c.recompute > 0 || c.recompute_ns > 0))
      d += timed(recompute_work(c), recompute_fixed(c));
    return d + timed(backward_work(kind, c, c.gemm, 0), backward_fixed(kind, c));
  };
  // A task's compute ops: per chunk, or per layer when parameters are sharded (ZeRO-3/FSDP run one op per
  // layer at the layer's own GEMM size).
  auto compute_ns = [&](const Task& task, std::size_t table, const RangeCost& cc) {
    if (!shards_params()) return task.kind == TaskKind::kForward ? forward(cc) : backward(task.kind, cc);
    Duration d = 0;
    for (std::int32_t i = cc.begin; i < cc.end; ++i) {
      const RangeCost& lc = layer_costs_[table][static_cast<std::size_t>(i)];
      d += task.kind == TaskKind::kForward ? forward(lc) : backward(task.kind, lc);
    }
    return d;
  };
  auto task_ns_uncached = [&](const Task& task, std::int32_t stage, std::size_t table, std::size_t chunk) {
    const RangeCost& cc = chunk_costs_[table][chunk];
    // The chunk's TP collectives on the compute stream: forward; recompute (full) and the backward's exposed
    // part.
    Duration collectives = 0;
    if (task.kind == TaskKind::kForward) {
      collectives = tp_ns(stage, cc, 2);
    } else if (task.kind != TaskKind::kBackwardWeight) {
      const bool recomputed = in_.recompute == Recompute::kFull && (cc.recompute > 0 || cc.recompute_ns > 0);
      collectives = (recomputed ? tp_ns(stage, cc, 2) : 0) + tp_ns(stage, cc, tp_backward(task.kind).exposed);
    }
    return collectives + compute_ns(task, table, cc);
  };
  // The time of a task depends only on its kind, chunk and cost table: each is computed once.
  constexpr std::size_t kKinds = 4;
  std::vector<Duration> known(chunk_costs_.size() * chunk_costs_.front().size() * kKinds, -1);
  auto task_ns = [&](const Task& task, std::int32_t stage) {
    const auto table =
        static_cast<std::size_t>(in_.cost_of_microbatch[static_cast<std::size_t>(task.microbatch)]);
    const auto chunk = static_cast<std::size_t>(model_chunk(task.chunk, stage));
    Duration& memo =
        known[(table * chunk_costs_.front().size() + chunk) * kKinds + static_cast<std::size_t>(task.kind)];
    if (memo < 0) memo = task_ns_uncached(task, stage, table, chunk);
    return memo;
  };
  // Every GPU's compute stream runs its ops one at a time, all of them after its first forward, which waits
  // for microbatch 0's forward through every stage before it (`head`). And the last microbatch's gradient
  // leaves a stage's first chunk only to run the backward of every stage before it (`tail`: their input
  // gradients alone, without recompute): the step lasts at least head + the stage's compute up to that
  // backward + tail.
  const std::int32_t last_mb = in_.microbatches - 1;
  auto gradient_only = [&](const Task& task, std::int32_t stage) {
    const auto table =
        static_cast<std::size_t>(in_.cost_of_microbatch[static_cast<std::size_t>(task.microbatch)]);
    const RangeCost& cc = chunk_costs_[table][static_cast<std::size_t>(model_chunk(task.chunk, stage))];
    if (!shards_params())
      return timed(backward_work(task.kind, cc, cc.gemm, 0), backward_fixed(task.kind, cc));
    Duration d = 0;
    for (std::int32_t i = cc.begin; i < cc.end; ++i) {
      const RangeCost& lc = layer_costs_[table][static_cast<std::size_t>(i)];
      d += timed(backward_work(task.kind, lc, lc.gemm, 0), backward_fixed(task.kind, lc));
    }
    return d;
  };
  // A GPU optimizer step runs on the compute stream after everything else of its stage (on the host when
  // offloaded: free here).
  auto optimizer = [&](std::int32_t stage) -> Duration {
    if (in_.sharding.offload_optimizer) return 0;
    std::int64_t trainable = 0;
    for (std::int32_t v = 0; v < in_.virtual_stages; ++v)
      trainable += chunk_costs_[0][static_cast<std::size_t>(model_chunk(v, stage))].trainable;
    const std::int64_t updated =
        in_.sharding.stage == ZeroStage::k0 ? trainable : (trainable + shard_ranks() - 1) / shard_ranks();
    return in_.hw.memory_ns(updated * in_.optimizer_bytes_per_param);
  };
  const Duration first_optimizer = optimizer(0);
  Duration bound = 0, head = 0, tail = 0;
  for (std::int32_t stage = 0; stage < in_.pp; ++stage) {
    const auto& order = orders_[static_cast<std::size_t>(stage)];
    Duration round = 0, until_last_gradient = -1;
    std::optional<Task> last_gradient;
    for (const Task& task : order) {
      round += task_ns(task, stage);
      if ((task.kind == TaskKind::kBackward || task.kind == TaskKind::kBackwardInput) &&
          task.microbatch == last_mb && task.chunk == 0) {
        until_last_gradient = round;
        last_gradient = task;
      }
    }
    // The chain through the stages (head, tail) follows the loop placement; under the others only each
    // rank's own serial compute bounds the step.
    const bool loop = sched_.placement == ChunkPlacement::kLoop;
    const bool starts_with_first_forward = loop && !order.empty() &&
                                           order.front().kind == TaskKind::kForward &&
                                           order.front().microbatch == 0 && order.front().chunk == 0;
    const Duration start = starts_with_first_forward ? head : 0;
    const Duration earlier_rounds = round * (in_.accum_steps - 1);
    bound = std::max(bound, start + earlier_rounds + round + optimizer(stage));
    if (!last_gradient || !loop) {
      tail = -1;  // the chain below needs every stage's last gradient task
    } else if (tail >= 0) {
      // The chain ends with stage 0's last gradient task, which its optimizer step follows.
      bound = std::max(bound, start + earlier_rounds + until_last_gradient + tail + first_optimizer);
      tail += gradient_only(*last_gradient, stage);
    }
    head += task_ns(Task{TaskKind::kForward, 0, 0}, stage);
  }
  return bound;
}

Duration order_based_lower_bound(const ScheduleDescriptor& schedule, const ScheduleInput& input) {
  // The chain of microbatch 0's forward down the stages is proven for the loop placement; under the V and
  // the two-copy placements the bound is each rank's own serial compute and optimizer step.
  return Builder(schedule, input).lower_bound();
}

namespace {

/// Says so in the plan when TP groups leave GPUs of each NVLink domain idle or cross the network, and when
/// the ranks are not in the default order.
void note_placement(Plan& plan, const ScheduleInput& in) {
  const int domain = in.hw.tp_domain_gpus(), used = in.hw.tp_domain_used_gpus(in.tp);
  std::string note;
  if (in.tp > domain)
    note = fmt::format("tp {} spans {} {}: its collectives cross the network", in.tp, in.tp / domain,
                       domain == in.hw.node.gpus ? "nodes" : "NVLink domains");
  else if (used != domain)
    note = fmt::format("tp {} packs {} groups into each {}-GPU NVLink domain: {} of its GPUs idle", in.tp,
                       used / in.tp, domain, domain - used);
  if (in.dp_inside_pp) note += std::string(note.empty() ? "" : "; ") + "ranks ordered tp, cp, dp, pp";
  if (note.empty()) return;
  plan.meta.note = plan.meta.note.empty() ? note : plan.meta.note + "; " + note;
}

Plan lower_layout(const ScheduleDescriptor& schedule, const ScheduleInput& input) {
  if (input.explicit_replicas || input.tp * input.cp * input.dp == 1)
    return Builder(schedule, input).build(input.explicit_replicas);
  Plan plan = Builder(schedule, input).build(false);
  const SharedLinkUse use = shared_link_use(plan);
  if (use.gpu_traffic) {
    // Identical replicas would contend on shared PCIe uplinks: simulating one would hide that contention.
    plan = Builder(schedule, input).build(true);
    plan.meta.note = "replicas share PCIe switch uplinks; simulated explicitly instead of symmetric";
  } else if (unalike_ring_hops(plan)) {
    plan = Builder(schedule, input).build(true);
    plan.meta.note =
        "a node's GPU pairs are linked unalike (NVLink bridges or PCIe switches); rings simulated explicitly";
  } else if (use.host_traffic || ((input.sharding.offload_optimizer || input.sharding.offload_params) &&
                                  shares_host_with_replicas(plan, input))) {
    // The GPUs of a node share its root complex, NVMe volume and host memory (and a switch its uplink).
    // Where they run the simulated GPUs' stages in step, each takes an equal share: the plan says how many
    // share, and the engine divides those links and counts host memory that many times.
    if (const auto twins = twin_counts(input)) {
      plan.meta.node_twins = twins->first;
      plan.meta.switch_twins = twins->second;
    } else {
      plan = Builder(schedule, input).build(true);
      plan.meta.note =
          "replicas share host CPUs, memory and drives for the offloaded state; simulated explicitly";
    }
  }
  return plan;
}

}  // namespace

Plan lower_order_based(const ScheduleDescriptor& schedule, const ScheduleInput& input) {
  Plan plan = lower_layout(schedule, input);
  note_placement(plan, input);
  return plan;
}

}  // namespace pipesim::sim
