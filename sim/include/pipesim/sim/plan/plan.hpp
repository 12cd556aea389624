// The plan: per-device streams of operations with explicit dependencies. It is the contract between
// schedule generators and planner (which write it), the simulator and replay (which execute it).
// Serialized as JSON ("format": "pipesim-plan", "version": 1) by plan_json.hpp, losslessly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pipesim/sim/core/dep_list.hpp"
#include "pipesim/sim/core/huge_page_allocator.hpp"
#include "pipesim/sim/core/time.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/workload/gemm_shape.hpp"

namespace pipesim::sim {

using OpId = std::int32_t;
using StreamId = std::int32_t;
using DeviceId = std::int32_t;

/// A node's NVMe volume is a device of its own: what ZeRO-Infinity offloads there is its resident memory,
/// checked against the profile's capacity, and it moves over the volume's read and write bandwidth.
enum class DeviceKind : std::uint8_t { kGpu, kHost, kNvme };

struct Device {
  std::string name;
  DeviceKind kind = DeviceKind::kGpu;
  std::int32_t node = 0;
  std::int32_t local_index = 0;     ///< GPU index inside its node; 0 for the host
  std::int64_t resident_bytes = 0;  ///< allocated for the whole run (weights, grads, optimizer state)
};

enum class StreamKind : std::uint8_t {
  kCompute,
  kH2D,
  kD2H,
  kP2PSend,
  kP2PRecv,
  kCollective,
  kCpu,
  kFill,
  kNvme,  ///< a GPU's queue of NVMe reads and writes (ZeRO-Infinity's asynchronous I/O)
};

/// A serial FIFO queue on a device: an op starts when it is at the head and all its deps have finished.
struct Stream {
  DeviceId device = 0;
  StreamKind kind = StreamKind::kCompute;
  std::string name;
};

enum class OpKind : std::uint8_t {
  kForward,
  kBackward,  ///< input and weight gradients together
  kBackwardInput,
  kBackwardWeight,
  kRecompute,
  kH2D,
  kD2H,
  kP2P,
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kOptimizer,
  kFill,
  kContextSwitch,
  kNvmeRead,   ///< NVMe volume -> host memory
  kNvmeWrite,  ///< host memory -> NVMe volume
  kAllToAll,   ///< MoE token dispatch or combine over the expert-parallel group
  /// Zero-time marker on a compute stream: a pair of them brackets where the GPU may wait for another GPU's
  /// output (the first runs when the stream gets there, the second when the input has arrived), so a fill
  /// scheduler or a replay engine can see the bubble.
  kBubble,
  /// Zero-time op on a compute stream that work on another stream of the GPU starts after (a fork) or that
  /// holds the stream until that work is done (a join): context parallelism's ring attention passes keys
  /// and values beside the attention it feeds.
  kSync,
};

/// GPU math: time = flops / (peak(dtype) x efficiency(gemm_gflop)) + kernels x launch overhead.
struct ComputeWork {
  double flops = 0;
  double gemm_gflop = 0;  ///< size of a typical GEMM of the op, for the efficiency table
  std::int32_t kernels = 0;
  /// HBM traffic of the op's memory-bound kernels (norms, activations, softmax, residual adds, the loss),
  /// timed at the GPU's streaming bandwidth on top of the GEMM time.
  std::int64_t mem_bytes = 0;
  /// Of `flops`, the MoE expert GEMMs, timed at the efficiency of their own (small) size.
  double expert_flops = 0;
  double expert_gemm_gflop = 0;
  std::int64_t expert_weight_bytes = 0;  ///< expert weights the op streams: a floor on the experts' time
  /// Of `flops`, unfused attention's score GEMMs, which take the longer of their FLOPs and the score bytes
  /// they move through HBM.
  double attention_flops = 0;
  std::int64_t attention_bytes = 0;
  /// The dense GEMMs per TP rank (a replay engine's shapes; empty when unknown, e.g. profiled workloads).
  GemmList gemms = {};
  /// Of `flops`, what an FP8 recipe keeps in 16 bits (the attention core, the output head), timed at the
  /// 16-bit peak; 0 unless the plan's dtype is fp8.
  double wide_flops = 0;
  /// Of `mem_bytes`, unfused attention's softmax, mask and dropout over the scores, timed at the GPU's
  /// unfused-attention bandwidth.
  std::int64_t score_bytes = 0;
  /// Of `flops`, kernels with a rate of their own on this GPU rather than the GEMM curve's — a fused
  /// attention kernel (flash attention with a benchmarked rate), GEMMs on cuBLAS's unaligned path — timed at
  /// `rated_tflops` (their FLOPs over their summed time at each kernel's rate).
  double rated_flops = 0;
  double rated_tflops = 0;
  /// CPU time issuing the op takes beyond its kernels' dispatch (PlanMeta::host_dispatch_ns each): the calls
  /// into the framework's communication library for its TP collectives.
  Duration host_ns = 0;

  bool operator==(const ComputeWork&) const = default;
};

/// An op's ComputeWork, held by reference and immutable: the ops of every microbatch and replica of a chunk
/// run the same work and share one copy (an op of a plan of millions stays at 96 bytes).
/// Read it with compute_of(op).
class SharedCompute {
 public:
  SharedCompute();                         ///< the shared empty work
  SharedCompute(const ComputeWork& work);  // NOLINT(google-explicit-constructor): an op's payload
  const ComputeWork& operator*() const { return *work_; }
  const ComputeWork* operator->() const { return work_.get(); }
  const ComputeWork* get() const { return work_.get(); }

 private:
  std::shared_ptr<const ComputeWork> work_;
};

/// Bytes moved from src to dst over the links between them (shared by max-min fairness).
/// Collectives are one transfer per member to its ring neighbour, started together by `group`.
struct TransferWork {
  DeviceId src = 0;
  DeviceId dst = 0;
  std::int64_t bytes = 0;
  std::int32_t latency_steps = 1;  ///< path latency is paid this many times (ring steps)
  std::int32_t group = -1;         ///< ops of one collective share a group id; -1: point to point
  std::int32_t group_size = 1;     ///< members of the group present in this plan
  // Two fields in one word, so that an op stays 96 bytes.
  std::int32_t priority : 2 =
      0;  ///< 1: background (weight prefetch) sharing only what foreground flows leave
  /// Collectives timed as NCCL runs them (nccl_tuning.hpp): their latency in ns (up to
  /// kMaxTransferLatencyNs), replacing the path's latency paid once per step; -1: latency_steps x the path's
  /// latency.
  std::int32_t latency_ns : 30 = -1;
  std::int64_t message_bytes = 0;  ///< collectives: one collective's buffer, for size-dependent bandwidth
};
/// The longest latency a transfer carries (TransferWork::latency_ns's 30 bits): half a second.
inline constexpr std::int32_t kMaxTransferLatencyNs = (1 << 29) - 1;
/// Sets a transfer's priority (0 or 1) into its bit-field.
void set_priority(TransferWork& w, std::int32_t priority);
/// Sets a transfer's own latency into its bit-field: -1 (none: the path's per step), else clamped to 0 ..
/// kMaxTransferLatencyNs.
void set_latency_ns(TransferWork& w, std::int64_t ns);

/// Host CPU work: holds `threads` cores for params / adam_rate(threads).
struct CpuWork {
  std::int64_t params = 0;
  std::int32_t threads = 1;
};

/// Memory-bound device work (e.g. a GPU optimizer step): bytes / memory bandwidth.
struct MemoryWork {
  std::int64_t bytes = 0;
};

using Payload = std::variant<SharedCompute, TransferWork, CpuWork, MemoryWork>;

/// The payload's GPU math, or nullptr when it moves bytes, runs on a CPU or streams memory.
inline const ComputeWork* compute_of(const Payload& p) {
  const auto* s = std::get_if<SharedCompute>(&p);
  return s != nullptr ? s->get() : nullptr;
}

struct OpTags {
  OpTags() = default;
  /// Throws std::length_error for a layer index beyond 16 bits (models are capped well below: see
  /// kMaxModelLayers).
  OpTags(std::int32_t stage, std::int32_t virtual_stage, std::int32_t microbatch, std::int32_t layer_begin,
         std::int32_t layer_end, std::int32_t iteration);

  std::int32_t stage = -1;
  std::int32_t virtual_stage = -1;
  std::int32_t microbatch = -1;
  // Layer indices in 16 bits: an op of a plan of millions stays at 96 bytes.
  std::int16_t layer_begin = -1;  ///< first layer (inclusive)
  std::int16_t layer_end = -1;    ///< last layer (exclusive)
  std::int32_t iteration = 0;
};
static_assert(sizeof(OpTags) == 20);
/// The largest layer index an op's tags hold.
inline constexpr std::int32_t kMaxLayerIndex = 32767;

/// The memory an op allocates when it starts and frees when it ends, kept in the plan beside the ops
/// (Plan::extras), not in each: a fifth of a large job's ops allocate or free memory, and every pass over a
/// plan of millions reads its ops whole.
struct OpExtras {
  std::int64_t alloc_bytes = 0;  ///< allocated on the stream's device when the op starts
  std::int64_t free_bytes = 0;   ///< freed when the op ends

  bool operator==(const OpExtras&) const = default;
};

struct Op {
  Op() = default;
  /// An op with its payload in place and no memory or dependencies yet (built straight into a plan's array).
  Op(StreamId s, OpKind k, const OpTags& t, Payload&& p, Duration fixed)
      : payload(std::move(p)), kind(k), stream(s), tags(t), fixed_duration(fixed) {}

  // The payload first: its kind and stream sit in the 7 bytes after the variant's index, an op is 96 bytes.
  [[no_unique_address]] Payload payload;
  OpKind kind = OpKind::kForward;
  StreamId stream = 0;
  OpTags tags;
  std::int32_t extras = -1;      ///< its entry in Plan::extras, or -1: no memory (see OpExtras)
  Duration fixed_duration = -1;  ///< >= 0 replaces the payload's cost (profiled times, fixed p2p time)
  DepList deps;
};
static_assert(sizeof(Op) == 96, "an op of a plan of millions: keep it small");

/// The stream on which a GPU exchanges context-parallel keys and values (a collective stream).
inline constexpr const char* kContextParallelStream = "cp";
/// The stream on which a GPU runs the TP collectives that overlap its backward (a collective stream).
inline constexpr const char* kTensorParallelStream = "tp";

/// What the plan was generated from; carried through to results so outputs are self-describing.
struct PlanMeta {
  std::string schedule;
  std::string model;
  std::string framework;  ///< the training framework the job runs on (empty: not recorded)
  std::int32_t pp = 1, tp = 1, dp = 1;
  std::int32_t virtual_stages = 1;
  std::int32_t microbatches = 1;
  std::int32_t accum_steps = 1;
  std::int32_t iterations = 1;  ///< optimizer steps in the plan (ops carry their iteration tag)
  std::int32_t seq = 0;
  std::int64_t global_batch = 0;
  std::string recompute = "none";
  std::int64_t lora_rank = 0;  ///< 0: full fine-tuning
  std::string replicas = "symmetric";
  std::int32_t ep = 1;                ///< MoE expert parallelism
  std::int32_t cp = 1;                ///< context parallelism: GPUs each sequence is split over
  std::string data_parallel = "ddp";  ///< ddp, zero-1/2/3 or fsdp-hybrid, with any offload (see sharding.hpp)
  std::int32_t simulated_gpus = 0;    ///< GPUs instantiated; the others are identical replicas
  /// Symmetric plans: job GPUs on a node that each simulated GPU stands for at the node's shared host
  /// resources (PCIe root complex, NVMe volume, host memory), and under a PCIe switch (its uplink). Those
  /// copies run in step with the simulated GPU, so they take the same share of each shared link: the engine
  /// divides the link's capacity by the count instead of simulating them, and counts host memory that many
  /// times.
  std::int32_t node_twins = 1, switch_twins = 1;
  double model_flops_per_step = 0;     ///< whole job, no recompute (for MFU)
  double hardware_flops_per_step = 0;  ///< whole job, with recompute (for HFU)
  std::string dtype = "bf16";
  /// CPU time to issue one kernel: a compute op lasts at least its kernels times this (0: not modelled).
  Duration host_dispatch_ns = 0;
  /// Share of the GPU's streaming rate (hbm_GBps x hbm_efficiency) the framework's element-wise kernels
  /// reach: a compute op's memory-bound bytes (its unfused scores excepted) take 1 / this longer.
  double elementwise_efficiency = 1;
  /// Coefficient of variation of the GPUs' speed (HardwareProfile gpu.speed_cv or --gpu-speed-cv): every
  /// GPU's compute runs at the expected slowest of the job's GPUs' pace (stragglers.hpp). 0: off.
  double gpu_speed_cv = 0;
  /// Device memory the framework's NCCL communicators hold on each GPU (rank 0's; nccl_communicators.hpp),
  /// outside its tensors: taken from each GPU's capacity for tensors, as the runtime's own memory is.
  std::int64_t communicator_bytes = 0;
  std::vector<std::int32_t> partition;  ///< transformer blocks per stage (per virtual stage when v > 1)
  std::string note;
};

struct Plan {
  PlanMeta meta;
  HardwareProfile hw;
  std::int32_t nodes = 1;
  std::vector<Device> devices;
  std::vector<Stream> streams;
  HugeVector<Op> ops;
  HugeVector<OpExtras> extras;  ///< the extras of the ops that have any (Op::extras)
  std::string origin = "plan";  ///< file it was read from (for messages); not serialized

  std::int32_t num_gpus() const { return meta.pp * meta.tp * meta.cp * meta.dp; }
  /// GPU memory for the job's tensors: the profile's (less what the runtime holds) less what the
  /// framework's communicators hold.
  std::int64_t gpu_tensor_capacity() const { return hw.gpu_tensor_capacity() - meta.communicator_bytes; }
  /// An op's extras: the defaults (no memory) when it has none. Its index is checked by the
  /// plan checks (validate_plan) and the engine.
  const OpExtras& extras_of(const Op& op) const {
    static const OpExtras none;
    return op.extras < 0 ? none : extras[static_cast<std::size_t>(op.extras)];
  }
  /// Op `id`'s extras to change, given an entry first when it has none.
  OpExtras& extras_of(OpId id);
  /// Adds to what op `id` allocates when it starts / frees when it ends (nothing is stored for 0 bytes).
  void add_alloc(OpId id, std::int64_t bytes) {
    if (bytes != 0) extras_of(id).alloc_bytes += bytes;
  }
  void add_free(OpId id, std::int64_t bytes) {
    if (bytes != 0) extras_of(id).free_bytes += bytes;
  }
};

inline bool is_collective(OpKind k) {
  return k == OpKind::kAllReduce || k == OpKind::kAllGather || k == OpKind::kReduceScatter ||
         k == OpKind::kAllToAll;
}

/// Appends an op to `plan` (after every op already on its stream) and returns its id.
OpId append_op(Plan& plan, StreamId stream, OpKind kind, const OpTags& tags, Payload&& payload,
               Duration fixed);

/// The schedule's name, with its data-parallel mode when that is not plain DDP and its expert parallelism
/// ("1f1b zero-3", "1f1b zero-1 ep8").
std::string schedule_label(const PlanMeta& meta);

const char* to_string(OpKind k);
const char* to_string(StreamKind k);
const char* to_string(DeviceKind k);

}  // namespace pipesim::sim
