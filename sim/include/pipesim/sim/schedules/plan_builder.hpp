// Building a plan: a ScheduleInput (a resolved job: per-layer costs, parallel layout, batch, the schedule's
// parameters) and a schedule from the registry give a Plan. Order-based schedules are lowered by the shared
// builder (compute ops with TP collectives, pipeline p2p transfers, bucketed DP gradient all-reduce
// overlapping the last backward, the optimizer step, memory effects); whole-plan schedules build their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/hardware/nccl_tuning.hpp"
#include "pipesim/sim/plan/plan.hpp"
#include "pipesim/sim/schedules/schedule.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "pipesim/sim/workload/sharding.hpp"

namespace pipesim::sim {

struct ScheduleInput {
  std::string model_name;
  std::string framework;  ///< the training framework the costs assume (see job/framework.hpp)
  HardwareProfile hw;
  std::string dtype = "bf16";  ///< math dtype: picks the peak TFLOP/s of the profile
  std::int32_t nodes = 0;      ///< 0: as many as pp*tp*dp needs
  std::int32_t pp = 1, tp = 1, dp = 1;
  std::int32_t ep = 1;  ///< MoE expert parallelism: experts split over groups of ep data-parallel ranks
  /// Context parallelism: each sequence split over cp ranks (ranks ordered tp, cp, pp, dp); weights are
  /// replicated over them and their gradients reduced over cp x dp.
  std::int32_t cp = 1;
  CpAttention cp_attention = CpAttention::kRing;
  /// Rank order outside tp and cp: pipeline stages then data-parallel replicas (pipesim's default: a DP ring
  /// spans nodes, a pipeline stays near), or replicas then stages (Megatron-LM's tp-cp-dp-pp: DP rings stay
  /// near, pipeline hops cross nodes).
  bool dp_inside_pp = false;
  std::int32_t virtual_stages = 1;
  std::int32_t microbatches = 1;
  std::int32_t accum_steps = 1;
  std::int32_t iterations = 1;  ///< optimizer steps simulated back to back (steady state needs >= 2)
  std::int64_t seq = 0;
  std::int64_t global_batch = 0;
  /// Distinct per-layer cost tables and, per microbatch, which one it uses (fractional microbatch sizes
  /// give floor and ceil sized microbatches).
  std::vector<std::vector<LayerCost>> costs;
  std::vector<std::int32_t> cost_of_microbatch;
  std::vector<std::int32_t>
      partition;  ///< transformer blocks per model chunk (pp*v entries); empty: balanced
  /// Schedules with separate forward and backward partitions: `partition` holds the forward stages' layer
  /// counts and this the backward stages' (`--partition F1,F2/B1,B2`).
  std::vector<std::int32_t> partition_backward;
  /// `partition` is the framework's own split (nanotron's block costs), the only one the framework runs:
  /// the planner keeps it rather than searching partitions.
  bool partition_by_framework = false;
  Recompute recompute = Recompute::kNone;
  std::int64_t lora_rank = 0;  ///< recorded in the plan metadata; the costs above already reflect it
  Duration p2p_fixed_ns = -1;  ///< >= 0: every pipeline hop takes this long (compute-only models)
  bool explicit_replicas = false;
  /// What the data-parallel group shards (ZeRO 0-3, FSDP, HSDP) and what is offloaded to the host. With the
  /// optimizer offloaded (ZeRO-Offload) each GPU copies its gradients to the host after the backward, the CPU
  /// runs Adam on a share of the node's cores, and the updated 16-bit weights are copied back.
  DataParallelSharding sharding;
  /// The schedule's own parameters (its descriptor's defaults with the given flags applied).
  ScheduleParameters parameters;
  std::int64_t dp_bucket_params = 40'000'000;  ///< gradient all-reduce bucket (Megatron DDP default)
  /// > 0: the framework's reducer closes a bucket as soon as it holds this many parameters' gradients, never
  /// splitting a tensor (torch DDP's bucket_cap_mb), and reduces each bucket as one collective: a layer's
  /// gradients go out as the collectives their tensors fill. 0: one collective per group of whole layers of
  /// at least dp_bucket_params.
  std::int64_t dp_bucket_cap_params = 0;
  /// DP gradient all-reduce: true, in buckets as the last backward produces them (PyTorch DDP, Megatron's
  /// --overlap-grad-reduce); false, all of it after the backward, as Megatron-LM's local DDP did (2021).
  bool overlap_grad_sync = true;
  /// Pipeline sends hold the sender's compute stream until they complete (Megatron-LM 2021's blocking
  /// send/recv pairs); false: they overlap the next compute (the sender only waits for the receiver).
  bool blocking_p2p = false;
  Duration host_dispatch_ns = 0;      ///< CPU time to issue one kernel (0: not modelled)
  double elementwise_efficiency = 1;  ///< see PlanMeta::elementwise_efficiency
  double gpu_speed_cv = 0;            ///< see PlanMeta::gpu_speed_cv
  /// TP ranks split the sequence between their collectives (sequence parallelism): the backward also
  /// all-gathers again the inputs its weight gradients need.
  bool sequence_parallel = false;
  /// How a collective's latency is priced: as NCCL's tuning model gives it for the algorithm and protocol
  /// NCCL picks (nccl_tuning.hpp), as the path's latency once per ring step (a Simple ring), or not at all.
  CollectiveLatency collective_latency = CollectiveLatency::kNccl;
  /// A collective across nodes shares the network with the rest of the job's traffic (its other groups
  /// communicate at the same time): where the profile measured the network by node count it runs at the
  /// rate of the job's node count; false: at the rate of the nodes its own group spans, as if alone.
  bool network_shared = true;
  /// The backward's TP collectives overlap its GEMMs (Megatron-LM's asynchronous tensor-parallel
  /// communication, on by default since 2022); false: each waits on the compute stream (Megatron-LM 2021).
  bool overlap_tp_backward = true;
  /// Memory building and simulating the plan may take; a plan estimated beyond it is refused up front
  /// (0: half of this machine's physical memory).
  double memory_budget_bytes = 0;
  /// Pipeline boundaries travel split over the TP ranks and are all-gathered over NVLink on arrival
  /// (Megatron-LM's scatter/gather optimization, Narayanan et al. 2021 section 4.1); with sequence
  /// parallelism the boundary is already split and nothing is re-gathered.
  bool regather_boundaries = false;
  /// Order-based schedules bracket every wait for another pipeline stage with a pair of `bubble` ops.
  bool bubble_markers = false;
  /// Cores one CPU optimizer step uses (0: what the schedule's system uses: an equal share of the node's
  /// cores per GPU for ZeRO-Offload and SPipe's per-stage steps, all of them for Mobius and RoundPipe).
  std::int32_t cpu_optimizer_threads = 0;
  std::int32_t optimizer_threads(std::int32_t system_default) const {
    return cpu_optimizer_threads > 0 ? cpu_optimizer_threads : system_default;
  }
  std::int64_t dp_grad_bytes_per_param = 2;
  /// ZeRO-1/2's parameter all-gather after the optimizer step goes through flattened copies (the shard and
  /// the whole gathered parameters in new 16-bit buffers, nanotron's all_gather_coalesced) rather than into
  /// the parameters' own storage: 2 (1 + 1/shards) bytes a parameter held for the gather.
  bool param_gather_copies = false;
  /// HBM bytes a layer's first op after each of its ZeRO-3 all-gathers moves per gathered parameter, in one
  /// more launch (KernelComposition::gather_copy_bytes_per_param: FSDP2's copy-out on the compute stream).
  std::int64_t gather_copy_bytes_per_param = 0;
  /// The 16-bit gradients are DDP's bucket buffers (nanotron, whose DDP hook adds them into fp32 buffers):
  /// with one data-parallel rank there is no DDP, and each backward's gradients are freed once added.
  /// Otherwise they are made by a step's first backward and freed by its optimizer step.
  bool grads_in_ddp_buckets = false;
  /// Bytes each GPU keeps for the whole run to all-gather its sequence-parallel TP inputs into
  /// (Framework::tp_gather_buffers at the largest microbatch).
  std::int64_t tp_gather_buffer_bytes = 0;
  std::int64_t communicator_bytes = 0;  ///< see PlanMeta::communicator_bytes
  /// HBM traffic of one GPU optimizer step per parameter (the job sets optimizer_step_bytes_per_param of its
  /// dtype; the default is Adam's own 28 bytes).
  std::int64_t optimizer_bytes_per_param = 28;
  /// A profiled workload's measured optimizer step of the whole model (Workload::optimizer_ns), or -1: the
  /// step priced from the parameters. Each GPU takes the share of it its layers' measured backward holds.
  Duration measured_optimizer_ns = -1;
};

/// Balanced split of `blocks` into `chunks` (the first blocks % chunks chunks get one more).
std::vector<std::int32_t> balanced_partition(std::int32_t blocks, std::int32_t chunks);
/// Parses "a,b,c" (blocks per stage); throws InputError naming --partition.
std::vector<std::int32_t> parse_partition(const std::string& text);

/// Builds the plan; throws InputError for impossible configurations (with what would be valid).
/// A lower bound on the step time that simulating build_plan(schedule, input) reports, proven from the
/// engine's rules for the schedules whose lowering supports it (order-based ones, one iteration); 0 — no
/// bound, never pruned — for the others. The planner prunes with nothing else.
Duration schedule_lower_bound_ns(const ScheduleDescriptor& schedule, const ScheduleInput& input);

Plan build_plan(const ScheduleDescriptor& schedule, const ScheduleInput& input);

}  // namespace pipesim::sim
