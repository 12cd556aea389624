// A training job as users describe it (model or profiled workload, hardware, pp x tp x dp, batch, recompute)
// resolved into a ScheduleInput: presets loaded, batch sizes derived (G = dp x K x M x b), defaults applied,
// impossible combinations rejected with the flag at fault and what would be valid.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/job/framework.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/workload/model.hpp"

namespace pipesim::sim {

/// Tokens per sequence when neither the job nor a profiled workload gives one.
inline constexpr std::int64_t kDefaultSequenceLength = 2048;

/// `--attention-kernel gemm`: the attention core at the GEMM rate, whatever kernel the framework names.
inline constexpr const char* kGemmRateKernel = "gemm";

struct JobOptions {
  std::string model = "llama3-8b";  ///< preset name or config.json path
  std::string workload;             ///< profiled workload file; replaces model when set
  std::string hw = "rtx4090-8x";
  std::int32_t nodes = 0;  ///< 0: as many as the GPUs need
  std::int32_t pp = 0;     ///< 0: all GPUs of the cluster not used by tp x dp
  std::int32_t tp = 1;
  std::int32_t dp = 1;
  std::int32_t ep = 1;                ///< MoE expert parallelism (divides dp)
  std::int32_t cp = 1;                ///< context parallelism: GPUs one sequence is split over
  std::string cp_attention = "ring";  ///< ring | allgather (see CpAttention)
  /// tp-cp-pp-dp or tp-cp-dp-pp (see ScheduleInput::dp_inside_pp); unset: the framework's
  /// (Framework::rank_order)
  std::optional<std::string> rank_order;
  double moe_imbalance = 1.0;       ///< busiest expert-parallel rank's routed tokens over the average
  std::int32_t virtual_stages = 0;  ///< 0: 2 for interleaved schedules, else 1
  std::int64_t microbatches = 0;    ///< 0: derived, or 4 x pp
  double microbatch_size = 0;       ///< 0: derived, or 1
  std::int64_t global_batch = 0;    ///< 0: derived
  std::int32_t accum_steps = 1;
  std::int32_t iterations = 0;  ///< 0: the schedule's default (1 for synchronous schedules)
  std::int64_t seq = 0;         ///< 0: the workload's, or kDefaultSequenceLength
  std::string partition;
  /// Transformer blocks of the first and of the last model chunk (-1: balanced like the rest); the other
  /// chunks share the remaining blocks evenly. 0 leaves the embedding, or the output layer and the loss, a
  /// chunk of their own (Llama 3's layout).
  std::int32_t first_stage_layers = -1, last_stage_layers = -1;
  std::string recompute = "none";
  std::int64_t doc_mask_tokens = 0;    ///< document masking: average document length in tokens (0: none)
  std::string dtype;                   ///< empty: bf16 where the GPU has it, else fp16
  std::string fp8_recipe = "delayed";  ///< with dtype fp8: delayed | tensorwise | mxfp8 (Fp8Recipe)
  double p2p_time_ms = -1;             ///< >= 0: fixed time per pipeline hop
  bool explicit_replicas = false;
  bool optimizer_offload = false;  ///< the same as offload = "optimizer"
  /// Sharded data parallelism: ZeRO stage 0-3 (-1: not given), or fsdp "full" (ZeRO-3) / "hybrid" (HSDP).
  std::int32_t zero = -1;
  std::string fsdp;
  std::string offload = "none";        ///< none | optimizer | params | both
  std::string offload_device = "cpu";  ///< cpu (host memory) | nvme (the profile's NVMe volume)
  std::int32_t zero_prefetch_layers = 1;
  /// The training framework the job runs on: a shipped name or a framework file (empty: kDefaultFramework).
  /// The options below it that are not given are the framework's (see framework.hpp).
  std::string framework;
  std::optional<std::string> attention;  ///< flash (scores on chip) or unfused (see AttentionKernel)
  std::optional<bool> sequence_parallel;
  std::optional<bool> dropout;
  std::optional<std::string> grad_accumulation;  ///< fused | main-grad | autograd (see GradAccumulation)
  std::optional<std::string> bias_kernels;       ///< fused | separate (see BiasKernels)
  std::optional<std::string> norm_backward;      ///< one-pass | two-pass (see NormBackward)
  std::optional<bool> blocking_p2p;        ///< pipeline sends hold the sender's compute until they complete
  std::optional<double> host_dispatch_us;  ///< CPU time to issue one kernel (see Framework::host_dispatch_us)
  /// The fused attention kernel whose published rate the attention core takes: a name of the profile's
  /// gpu.attention_kernels, or "gemm" (the GEMM rate); unset: the framework's (Framework::attention_kernel).
  std::optional<std::string> attention_kernel;
  /// Coefficient of variation of the GPUs' speed (stragglers); unset: the profile's gpu.speed_cv; 0: off.
  std::optional<double> gpu_speed_cv;
  /// The board power the GPUs are held to, in W (power_limit.hpp); unset: the profile's gpu.power_limit_W.
  std::optional<double> power_limit;
  /// The network's leaves' NIC-side over spine-side capacity (>= 1); unset: the profile's.
  std::optional<double> spine_oversubscription;
  std::string collective_latency = "nccl";  ///< nccl | steps | none (CollectiveLatency)
  std::string network_sharing = "job";      ///< job | alone (ScheduleInput::network_shared)
  double max_memory_gib = 0;    ///< memory a plan may take to build and simulate (0: half of this machine's)
  bool bubble_markers = false;  ///< bracket each wait for another stage with `bubble` ops in the plan
  /// DP gradient all-reduce: overlap (buckets during the backward) or after-backward.
  std::optional<std::string> grad_sync;
  /// The backward's TP collectives: backward (beside its GEMMs, Megatron-LM's asynchronous TP communication,
  /// its default since 2022) or none (each waits on the compute stream, as in 2021).
  std::optional<std::string> tp_overlap;
  std::int32_t cpu_optimizer_threads = 0;  ///< 0: what the schedule's system uses
  std::int64_t lora_rank = 0;
  /// Schedule parameters as given: option key (e.g. "spipe_stages") -> its text ("true" for a flag). Each
  /// schedule takes the options its descriptor declares and ignores the others.
  std::map<std::string, std::string> schedule_options;
  /// `hw` and `model` already loaded (the planner resolves thousands of candidates of one job): used instead
  /// of reading the files again when set.
  std::shared_ptr<const HardwareProfile> loaded_hw;
  std::shared_ptr<const ModelSpec> loaded_model;
  std::shared_ptr<const Framework> loaded_framework;  ///< `framework` already loaded
};

/// The job with each framework option it leaves unset taken from its framework (loaded once, kept in
/// `loaded_framework`). Throws InputError naming an unknown framework or a bad framework file.
JobOptions with_framework(JobOptions job);

/// Why the job's `attention_kernel` cannot run on `hw` (a kernel the profile has no published rate for), with
/// the valid names; empty when it can, or when none is asked for.
std::string attention_kernel_error(const JobOptions& job, const HardwareProfile& hw);

/// The framework's name as results report it.
std::string framework_name(const JobOptions& job);

/// The job's data-parallel mode in the planner's words: ddp, zero-1, zero-2, zero-3 (also --fsdp full) or
/// fsdp-hybrid.
std::string data_parallel_mode(const JobOptions& job);

/// Resolves the job for one schedule. Throws InputError naming the flag at fault.
ScheduleInput make_schedule_input(const JobOptions& job, const ScheduleDescriptor& schedule);

/// Checks every given schedule flag against the parameter it sets in the registry (type and range), whatever
/// the schedule; throws InputError naming an unknown or invalid flag.
void check_schedule_options(const JobOptions& job);

/// The plans of every registered schedule for the job, and with dp > 1 and no --zero/--fsdp given also the
/// ZeRO 1-3 variants of the order-based ones. A schedule that cannot run the configuration is listed in
/// `skipped` ("name: why"); when none can, the first error is thrown.
struct AllSchedulePlans {
  std::vector<Plan> plans;
  std::vector<std::string> skipped;
};
AllSchedulePlans plans_of_all_schedules(const JobOptions& job);

}  // namespace pipesim::sim
