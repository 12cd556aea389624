#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/core/option.hpp"
#include "pipesim/sim/core/units.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "job/framework_rates.hpp"
#include "job/framework_split.hpp"
#include "job/nccl_communicators.hpp"
#include "job/parallelism_checks.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/hardware/nccl_tuning.hpp"
#include "pipesim/sim/hardware/power_limit.hpp"
#include "pipesim/sim/hardware/stragglers.hpp"
#include "pipesim/sim/job/option_parsing.hpp"
#include "pipesim/sim/workload/model.hpp"
#include "pipesim/sim/workload/profiled_workload.hpp"

namespace pipesim::sim {

namespace {

[[noreturn]] void bad(Option option, const std::string& msg) {
  throw InputError(option, "", msg);
}

struct Batch {
  std::int64_t global = 0;
  std::int32_t microbatches = 0;
  std::vector<std::int64_t> sizes;  // per microbatch
};

// G = dp x K x M x b: any two of G, M, b give the third; a fractional b is split floor/ceil across
// microbatches.
Batch derive_batch(const JobOptions& j, std::int64_t default_microbatches) {
  const std::int64_t replicas = static_cast<std::int64_t>(j.dp) * j.accum_steps;
  std::int64_t G = j.global_batch, M = j.microbatches;
  double b = j.microbatch_size;
  if (G < 0) bad(Option{"global_batch"}, "must be positive");
  if (M < 0) bad(Option{"microbatches"}, "must be positive");
  if (!(b >= 0) || !std::isfinite(b)) bad(Option{"microbatch_size"}, "must be positive");
  if (b > 0 && std::floor(b) != b && !(G > 0 && M > 0))
    bad(Option{"microbatch_size"},
        ("a fractional size is only derived from " + spelled(Option{"global_batch"}) + " and " +
         spelled(Option{"microbatches"}) + "; give an integer"));
  if (G == 0 && M == 0 && b == 0)
    b = 1, M = default_microbatches;
  else if (G == 0 && b == 0)
    b = 1;
  else if (G == 0 && M == 0)
    M = default_microbatches;
  else if (M == 0 && b == 0)
    b = 1;

  // Every microbatch becomes ops and a cost-table entry: cap the count before anything is sized by it.
  constexpr std::int64_t kMaxMicrobatches = std::int64_t{1} << 20;
  auto check_count = [&](std::int64_t m, Option option) {
    if (m > kMaxMicrobatches)
      bad(option,
          fmt::format("{} microbatches per pipeline flush; valid: at most {} (use larger microbatches or {})",
                      m, kMaxMicrobatches, spelled(Option{"accum_steps"})));
  };
  check_count(M, Option{"microbatches"});
  if (b > static_cast<double>(kMaxMicrobatches) * 1024) bad(Option{"microbatch_size"}, "valid: at most 2^30");
  Batch out;
  if (G == 0) {
    out.microbatches = static_cast<std::int32_t>(M);
    out.sizes.assign(static_cast<std::size_t>(M), static_cast<std::int64_t>(b));
    out.global = replicas * M * static_cast<std::int64_t>(b);
    return out;
  }
  if (G % replicas != 0)
    bad(Option{"global_batch"}, fmt::format("{} is not divisible by dp x accum-steps = {}", G, replicas));
  const std::int64_t per_flush = G / replicas;  // samples one pipeline runs per flush
  if (M == 0) {
    auto bi = static_cast<std::int64_t>(b);
    if (per_flush % bi != 0)
      bad(Option{"microbatch_size"},
          fmt::format("{} samples per pipeline flush are not a multiple of {}; valid sizes divide {}",
                      per_flush, bi, per_flush));
    M = per_flush / bi;
    check_count(M, Option{"global_batch"});
  }
  if (M > per_flush)
    bad(Option{"microbatches"},
        fmt::format("{} microbatches exceed the {} samples per pipeline flush (G / (dp x K))", M, per_flush));
  if (b > 0 && std::fabs(b * static_cast<double>(M) - static_cast<double>(per_flush)) >
                   1e-9 * static_cast<double>(per_flush))
    bad(Option{"global_batch"}, fmt::format("G={} != dp x K x M x b = {} x {} x {}", G, replicas, M, b));
  out.global = G;
  out.microbatches = static_cast<std::int32_t>(M);
  const std::int64_t base = per_flush / M, extra = per_flush % M;
  for (std::int64_t i = 0; i < M; ++i) out.sizes.push_back(base + (i < extra ? 1 : 0));
  return out;
}

ScheduleParameters resolve_parameters(const JobOptions& j, const ScheduleDescriptor& schedule) {
  ScheduleParameters out;
  for (const ScheduleParameter& p : schedule.parameters) {
    auto given = j.schedule_options.find(p.option);
    if (given == j.schedule_options.end())
      out.set_default(p.name, p.default_value);
    else
      out.set(p.name, parse_parameter(p, given->second));
  }
  return out;
}

// --zero / --fsdp / --offload into what the data-parallel group shards and offloads.
DataParallelSharding resolve_sharding(const JobOptions& j, const ScheduleInput& in,
                                      const ScheduleDescriptor& schedule) {
  DataParallelSharding s;
  if (j.zero < -1 || j.zero > 3) bad(Option{"zero"}, fmt::format("stage {}; valid: 0, 1, 2, 3", j.zero));
  if (!j.fsdp.empty()) {
    if (j.fsdp != "full" && j.fsdp != "hybrid")
      bad(Option{"fsdp"}, fmt::format("unknown sharding '{}'; valid: full (ZeRO-3), hybrid (HSDP)", j.fsdp));
    if (j.zero >= 0 && j.zero != 3)
      bad(Option{"fsdp"}, fmt::format("FSDP shards parameters (ZeRO-3); {} {} contradicts it",
                                      spelled(Option{"zero"}), j.zero));
  }
  s.stage = !j.fsdp.empty() ? ZeroStage::k3 : static_cast<ZeroStage>(std::max(0, j.zero));
  s.hybrid = j.fsdp == "hybrid";
  if (j.offload != "none" && j.offload != "optimizer" && j.offload != "params" && j.offload != "both")
    bad(Option{"offload"},
        fmt::format("unknown offload '{}'; valid: none, optimizer, params, both", j.offload));
  s.offload_optimizer = j.optimizer_offload || j.offload == "optimizer" || j.offload == "both";
  s.offload_params = j.offload == "params" || j.offload == "both";
  if (j.offload_device != "cpu" && j.offload_device != "nvme")
    bad(Option{"offload_device"}, fmt::format("unknown device '{}'; valid: cpu, nvme", j.offload_device));
  s.offload_to_nvme = j.offload_device == "nvme";
  if (s.offload_to_nvme && !s.offload_optimizer && !s.offload_params)
    bad(Option{"offload_device"},
        ("nvme holds what " + spelled(Option{"offload"}) + " moves off the GPU; give " +
         spelled(Option{"offload"}) + " optimizer, params or both"));
  if (s.offload_to_nvme && in.hw.host.nvme.bytes == 0)
    bad(Option{"offload_device"},
        fmt::format("{} has no NVMe volume (host.nvme in the profile); valid: cpu", in.hw.name));
  if (s.offload_params && s.stage != ZeroStage::k3)
    bad(Option{"offload"}, ("parameters are offloaded per layer only when they are sharded; add " +
                            spelled(Option{"zero"}) + " 3 or " + spelled(Option{"fsdp"})));
  if (j.zero_prefetch_layers < 0 || j.zero_prefetch_layers > 64)
    bad(Option{"zero_prefetch_layers"}, fmt::format("{}; valid: 0 .. 64", j.zero_prefetch_layers));
  s.prefetch_layers = j.zero_prefetch_layers;
  if (s.stage >= ZeroStage::k2 && *j.grad_sync == "after-backward")
    bad(Option{"grad_sync"},
        "ZeRO-2 and 3 keep only a shard of the gradients, so they reduce-scatter each bucket as "
        "the backward produces it; valid: overlap");
  const bool sharded = s.stage != ZeroStage::k0;
  if ((sharded || s.offload_params) && schedule.kind != ScheduleKind::kOrderBased)
    bad(!j.fsdp.empty() ? Option{"fsdp"}
        : sharded       ? Option{"zero"}
                        : Option{"offload"},
        fmt::format("{} places weights and optimizer state its own way; sharded data parallelism runs with "
                    "the order-based schedules (see pipesim schedules)",
                    schedule.name));
  s.shard_group = in.dp * in.cp;  // the gradients are reduced over cp x dp
  if (s.hybrid && in.dp_inside_pp && in.pp > 1)
    bad(Option{"fsdp"}, ("hybrid shards over the replicas of a node as tp-cp-pp-dp places them; valid: " +
                         spelled(Option{"rank_order"}) +
                         " "
                         "tp-cp-pp-dp"));
  if (s.hybrid) {
    // HSDP shards over the data-parallel ranks of one node and replicates across nodes.
    const std::int32_t per_node = in.hw.node.gpus / std::min(in.hw.node.gpus, in.tp * in.pp);
    if (in.tp * in.pp > in.hw.node.gpus || in.dp % per_node != 0 || per_node < 2 || in.dp == per_node)
      bad(Option{"fsdp"},
          fmt::format("hybrid shards over the data-parallel ranks of a node and replicates across "
                      "nodes; with tp x pp = {} on {}-GPU nodes and dp = {} that is not two or more "
                      "groups of two or more ranks; valid: {} full",
                      in.tp * in.pp, in.hw.node.gpus, in.dp, spelled(Option{"fsdp"})));
    s.shard_group = per_node;
  }
  return s;
}

}  // namespace

void check_schedule_options(const JobOptions& j) {
  for (const auto& [key, text] : j.schedule_options) {
    const ScheduleParameter* known = nullptr;
    for (const auto& s : schedule_registry())
      for (const auto& p : s.parameters)
        if (p.option == key && !known) known = &p;
    if (!known) bad(Option{key}, "no registered schedule takes this option; see pipesim schedules");
    parse_parameter(*known, text);
  }
}

JobOptions with_framework(JobOptions job) {
  if (!job.loaded_framework)
    job.loaded_framework = std::make_shared<const Framework>(
        load_framework(job.framework.empty() ? std::string(kDefaultFramework) : job.framework));
  // An attention kernel asked for replaces the framework's (a what-if: another kernel, or none).
  if (job.attention_kernel)
    job.loaded_framework = with_attention_kernel(job.loaded_framework, *job.attention_kernel);
  const Framework& f = *job.loaded_framework;
  auto take = [](auto& option, const auto& setting) {
    if (!option) option = setting.value;
  };
  take(job.attention, f.attention);
  take(job.dropout, f.dropout);
  take(job.sequence_parallel, f.sequence_parallel);
  take(job.bias_kernels, f.bias_kernels);
  take(job.norm_backward, f.norm_backward);
  take(job.grad_accumulation, f.grad_accumulation);
  // A framework's reduction after the backward is of whole gradients: ZeRO-2 and 3 keep only a shard, so
  // they reduce-scatter each bucket as the backward produces it.
  if (!job.grad_sync && f.grad_sync.value == "after-backward" && (job.zero >= 2 || !job.fsdp.empty()))
    job.grad_sync = "overlap";
  take(job.grad_sync, f.grad_sync);
  take(job.tp_overlap, f.tp_overlap);
  take(job.blocking_p2p, f.blocking_p2p);
  take(job.host_dispatch_us, f.host_dispatch_us);
  take(job.rank_order, f.rank_order);
  return job;
}

std::string data_parallel_mode(const JobOptions& job) {
  if (job.fsdp == "hybrid") return "fsdp-hybrid";
  if (job.fsdp == "full") return "zero-3";
  return job.zero > 0 ? fmt::format("zero-{}", job.zero) : "ddp";
}

std::string framework_name(const JobOptions& job) {
  if (job.loaded_framework) return job.loaded_framework->name;
  return job.framework.empty() ? std::string(kDefaultFramework) : job.framework;
}

AllSchedulePlans plans_of_all_schedules(const JobOptions& given) {
  const JobOptions job = with_framework(given);
  AllSchedulePlans out;
  std::optional<InputError> first_error;
  // With data parallelism and no sharding asked for, the sharded variants of the order-based schedules run
  // beside them (ZeRO 1-3), to compare.
  const bool variants = job.dp > 1 && job.zero < 0 && job.fsdp.empty();
  for (const ScheduleDescriptor& s : schedule_registry()) {
    if (!framework_runs(*job.loaded_framework, s)) continue;  // not software the job can run
    for (int zero = 0; zero <= (variants && s.kind == ScheduleKind::kOrderBased ? 3 : 0); ++zero) {
      // The framework's defaults apply to each variant as given (a ZeRO stage changes some of them).
      JobOptions variant = given;
      variant.loaded_framework = job.loaded_framework;
      if (zero > 0) variant.zero = zero;
      if (zero > 0 && !framework_offers(job.loaded_framework->data_parallel, data_parallel_mode(variant)))
        continue;  // a sharding the framework does not offer
      try {
        out.plans.push_back(build_plan(s, make_schedule_input(variant, s)));
      } catch (const InputError& e) {
        if (!first_error) first_error = e;
        out.skipped.push_back(
            fmt::format("{}{}: {}", s.name, zero > 0 ? fmt::format(" zero-{}", zero) : "", e.what()));
      }
    }
  }
  if (out.plans.empty() && first_error) throw *first_error;
  return out;
}

namespace {

/// Refuses a data-parallel mode, recompute policy or host offload the framework does not offer.
void check_framework_offers(const JobOptions& j, const ScheduleDescriptor& schedule) {
  const Framework& f = *j.loaded_framework;
  if (!f.host_offload.value && schedule.kind == ScheduleKind::kOrderBased &&
      (j.optimizer_offload || j.offload != "none"))
    bad(j.optimizer_offload ? Option{"optimizer_offload"} : Option{"offload"},
        fmt::format("{} keeps optimizer state and parameters on the GPU; a CPU-offload schedule (mobius, "
                    "spipe, roundpipe) offloads by itself",
                    f.name));
  const std::string mode = data_parallel_mode(j);
  if (!framework_offers(f.data_parallel, mode))
    bad(!j.fsdp.empty() ? Option{"fsdp"} : Option{"zero"},
        fmt::format("{} offers data parallelism {}; {} is not one of them", f.name,
                    fmt::join(f.data_parallel.value, ", "), mode));
  if (!framework_offers(f.recompute, j.recompute))
    bad(Option{"recompute"},
        fmt::format("{} offers recompute {}; valid: those", f.name, fmt::join(f.recompute.value, ", ")));
}

/// The partition of --first-stage-layers / --last-stage-layers: those blocks on the first and last model
/// chunk, the rest balanced over the chunks between (the first `rest mod middle` get one more).
std::vector<std::int32_t> uneven_ends_partition(const JobOptions& j, const ScheduleInput& in,
                                                const ModelSpec& m, ChunkPlacement placement) {
  auto bad = [](Option option, const std::string& msg) { throw InputError(option, "", msg); };
  const Option option =
      j.first_stage_layers >= 0 ? Option{"first_stage_layers"} : Option{"last_stage_layers"};
  if (!j.partition.empty())
    bad(option,
        ("give either " + spelled(Option{"partition"}) + " or the first and last stages' blocks, not both"));
  const std::int64_t chunks = model_stages(placement, in.pp, in.virtual_stages);
  const std::int64_t blocks = m.layers;
  const std::int64_t first = std::max(0, j.first_stage_layers), last = std::max(0, j.last_stage_layers);
  const std::int64_t fixed = (j.first_stage_layers >= 0 ? 1 : 0) + (j.last_stage_layers >= 0 ? 1 : 0);
  if (chunks < 2)
    bad(option, fmt::format("pp x virtual stages = {} model chunk; a first and a last stage need at least 2",
                            chunks));
  if (first + last > blocks)
    bad(option,
        fmt::format("{} + {} blocks on the first and last stages; the model has {}", first, last, blocks));
  const std::int64_t middle = chunks - fixed, rest = blocks - first - last;
  if (middle == 0 && rest > 0)
    bad(option,
        fmt::format("{} blocks left for no chunk between the first and the last; valid: first + last = {}",
                    rest, blocks));
  std::vector<std::int32_t> part;
  part.reserve(static_cast<std::size_t>(chunks));
  if (j.first_stage_layers >= 0) part.push_back(static_cast<std::int32_t>(first));
  for (std::int64_t c = 0; c < middle; ++c)
    part.push_back(static_cast<std::int32_t>(rest / middle + (c < rest % middle ? 1 : 0)));
  if (j.last_stage_layers >= 0) part.push_back(static_cast<std::int32_t>(last));
  return part;
}

/// The cluster and the parallel layout: nodes, tp x cp x dp, the rank order and pp (all GPUs not given to
/// the others when not given).
void resolve_layout(const JobOptions& j, ScheduleInput& in) {
  in.hw = j.loaded_hw ? *j.loaded_hw : load_hardware_profile(j.hw);
  if (j.spine_oversubscription) {
    if (in.hw.network.leaf_nodes == 0 || !(*j.spine_oversubscription >= 1))
      bad(Option{"spine_oversubscription"}, "valid: >= 1, on a profile whose network states its leaf_nodes");
    in.hw.network.oversubscription = *j.spine_oversubscription;
    in.hw.network.sources["oversubscription"] = "--spine-oversubscription";
  }
  if (j.power_limit) {
    if (const std::string why = power_limit_error(in.hw.gpu, *j.power_limit); !why.empty())
      bad(Option{"power_limit"}, why);
    in.hw.gpu.power_limit_W = *j.power_limit;
    in.hw.gpu.sources["power_limit_W"] = "--power-limit";
  }
  if (j.nodes < 0) bad(Option{"nodes"}, "must be >= 1");
  if (j.tp < 1) bad(Option{"tp"}, "must be >= 1");
  if (j.dp < 1) bad(Option{"dp"}, "must be >= 1");
  if (j.accum_steps < 1) bad(Option{"accum_steps"}, "must be >= 1");
  if (const std::string why = in.hw.tp_placement_error(j.tp); !why.empty()) bad(Option{"tp"}, why);
  in.nodes = j.nodes;
  if (j.cp < 1 || j.cp > 1024) bad(Option{"cp"}, fmt::format("{}; valid: 1 .. 1024", j.cp));
  in.tp = j.tp;
  in.dp = j.dp;
  in.cp = j.cp;
  in.cp_attention = parse_cp_attention(j.cp_attention);
  const std::string rank_order = j.rank_order.value_or(kDefaultRankOrder);
  if (rank_order != "tp-cp-pp-dp" && rank_order != "tp-cp-dp-pp")
    bad(Option{"rank_order"},
        fmt::format("unknown order '{}'; valid: tp-cp-pp-dp (pipeline stages inside data-parallel replicas), "
                    "tp-cp-dp-pp (replicas inside stages, as Megatron-LM)",
                    rank_order));
  in.dp_inside_pp = rank_order == "tp-cp-dp-pp";
  in.pp = j.pp;
  if (in.pp == 0) {
    std::int32_t gpus = std::max(1, j.nodes) * in.hw.node.gpus;
    const std::int64_t others = std::int64_t{j.tp} * j.dp * j.cp;
    if (gpus % others != 0)
      bad(Option{"pp"},
          fmt::format("not given, and tp x cp x dp = {} does not divide the {} GPUs", others, gpus));
    in.pp = static_cast<std::int32_t>(gpus / others);
  }
  if (in.pp < 1) bad(Option{"pp"}, "must be >= 1");
}

/// How the schedule runs on it: chunks, iterations, dtype, recompute, pipeline and collective overlap, the
/// simulator's memory budget and the CPU optimizer's threads.
void resolve_execution(const JobOptions& j, const ScheduleDescriptor& schedule, ScheduleInput& in) {
  in.virtual_stages = j.virtual_stages > 0 ? j.virtual_stages : schedule.default_virtual_stages;
  in.accum_steps = j.accum_steps;
  in.iterations = j.iterations > 0 ? j.iterations : schedule.default_iterations;
  in.dtype = !j.dtype.empty() ? j.dtype : (in.hw.gpu.peak_tflops.count("bf16") ? "bf16" : "fp16");
  if (in.dtype != "bf16" && in.dtype != "fp16" && in.dtype != "fp16_acc16" && in.dtype != "fp32" &&
      in.dtype != "fp8")
    bad(Option{"dtype"},
        fmt::format("unknown dtype '{}'; valid: bf16, fp16, fp16_acc16 (fp16 GEMMs accumulating in "
                    "fp16), fp32, fp8 (the blocks' GEMMs in FP8, attention and the output head in 16 bits)",
                    in.dtype));
  if (j.fp8_recipe != "delayed" && j.fp8_recipe != "tensorwise" && j.fp8_recipe != "mxfp8")
    bad(Option{"fp8_recipe"},
        fmt::format("unknown recipe '{}'; valid: delayed, tensorwise, mxfp8", j.fp8_recipe));
  in.recompute = parse_recompute(j.recompute);
  in.optimizer_bytes_per_param = optimizer_step_bytes_per_param(in.dtype);
  if (j.loaded_framework && j.loaded_framework->kernels &&
      j.loaded_framework->kernels->optimizer_step_bytes_per_param > 0)
    in.optimizer_bytes_per_param = j.loaded_framework->kernels->optimizer_step_bytes_per_param;
  if (j.loaded_framework && j.loaded_framework->kernels) {
    in.elementwise_efficiency = j.loaded_framework->kernels->elementwise_efficiency;
    in.gather_copy_bytes_per_param = j.loaded_framework->kernels->gather_copy_bytes_per_param;
  }
  if (std::isnan(j.p2p_time_ms)) bad(Option{"p2p_time_ms"}, "not a number; valid: 0 .. 1e6");
  if (j.p2p_time_ms >= 0) {
    if (!std::isfinite(j.p2p_time_ms) || j.p2p_time_ms > 1e6) bad(Option{"p2p_time_ms"}, "valid: 0 .. 1e6");
    in.p2p_fixed_ns = duration_from_ms(j.p2p_time_ms);
  }
  in.explicit_replicas = j.explicit_replicas;
  if (*j.grad_sync != "overlap" && *j.grad_sync != "after-backward")
    bad(Option{"grad_sync"}, fmt::format("unknown mode '{}'; valid: overlap, after-backward", *j.grad_sync));
  in.overlap_grad_sync = *j.grad_sync == "overlap";
  in.blocking_p2p = *j.blocking_p2p;
  if (!(*j.host_dispatch_us >= 0 && *j.host_dispatch_us <= kMaxHostDispatchUs))
    bad(Option{"host_dispatch_us"},
        fmt::format("{}; valid: 0 .. {}", *j.host_dispatch_us, kMaxHostDispatchUs));
  in.host_dispatch_ns = duration_from_us(*j.host_dispatch_us);
  if (const std::string why = attention_kernel_error(j, in.hw); !why.empty())
    bad(Option{"attention_kernel"}, why);
  in.dp_grad_bytes_per_param = j.loaded_framework->dp_grad_bytes.value;
  if (const std::int64_t cap = j.loaded_framework->dp_bucket_params.value; cap > 0) {
    in.dp_bucket_cap_params = cap;
    in.dp_bucket_params = cap;
  }
  in.param_gather_copies = j.loaded_framework->zero_param_gather.value == "flattened-copy";
  in.grads_in_ddp_buckets = j.loaded_framework->grad_16bit_memory.value == "ddp-buckets";
  in.gpu_speed_cv = j.gpu_speed_cv.value_or(in.hw.gpu.speed_cv);
  try {
    in.collective_latency = parse_collective_latency(j.collective_latency);
  } catch (const InputError& e) {
    bad(Option{"collective_latency"}, e.message());
  }
  if (j.network_sharing != "job" && j.network_sharing != "alone")
    bad(Option{"network_sharing"}, fmt::format("unknown mode '{}'; valid: job, alone", j.network_sharing));
  in.network_shared = j.network_sharing == "job";
  if (!(in.gpu_speed_cv >= 0 && in.gpu_speed_cv <= kMaxSpeedCv))
    bad(Option{"gpu_speed_cv"}, fmt::format("{}; valid: 0 (off) .. {}", in.gpu_speed_cv, kMaxSpeedCv));
  if (*j.tp_overlap != "backward" && *j.tp_overlap != "none")
    bad(Option{"tp_overlap"}, fmt::format("unknown mode '{}'; valid: backward, none", *j.tp_overlap));
  in.overlap_tp_backward = *j.tp_overlap == "backward";
  in.sequence_parallel = j.tp > 1 && *j.sequence_parallel;
  if (!(j.max_memory_gib >= 0 && j.max_memory_gib <= 1e6))
    bad(Option{"max_memory"}, "valid: 0 (half of this machine's memory) .. 1e6 GiB");
  in.memory_budget_bytes = j.max_memory_gib * kBytesPerGiB;
  in.regather_boundaries = j.tp > 1 && !*j.sequence_parallel && j.workload.empty();
  in.bubble_markers = j.bubble_markers;
  if (j.cpu_optimizer_threads < 0 || j.cpu_optimizer_threads > in.hw.host.cores)
    bad(Option{"cpu_optimizer_threads"},
        fmt::format("{} cores asked; valid: 1 .. {} (the cores of a {} host)", j.cpu_optimizer_threads,
                    in.hw.host.cores, in.hw.name));
  in.cpu_optimizer_threads = j.cpu_optimizer_threads;
}

/// LoRA, the schedule's own parameters and the partition as given.
void resolve_partition(const JobOptions& j, const ScheduleDescriptor& schedule, ScheduleInput& in) {
  if (j.lora_rank < 0 || j.lora_rank > 65536)
    bad(Option{"lora_rank"}, "valid: 0 (full fine-tuning) .. 65536");
  in.lora_rank = j.lora_rank;
  in.parameters = resolve_parameters(j, schedule);
  if (j.lora_rank > 0 && !j.workload.empty())
    bad(Option{"lora_rank"},
        ("applies to " + spelled(Option{"model"}) + "; a profiled workload has its own times"));
  if ((j.ep != 1 || j.moe_imbalance != 1.0) && !j.workload.empty())
    bad(j.ep != 1 ? Option{"ep"} : Option{"moe_imbalance"},
        ("applies to " + spelled(Option{"model"}) + " (MoE); a profiled workload has its own times"));
  if (const auto slash = j.partition.find('/'); slash != std::string::npos) {
    if (schedule.partitioner.rule != PartitionRule::kSeparateForwardBackward)
      bad(Option{"partition"},
          fmt::format("forward/backward lists are for schedules with separate forward and "
                      "backward partitions; {} takes blocks per stage, e.g. 8,8,8,8",
                      schedule.name));
    in.partition = parse_partition(j.partition.substr(0, slash));
    in.partition_backward = parse_partition(j.partition.substr(slash + 1));
  } else if (!j.partition.empty()) {
    in.partition = parse_partition(j.partition);
  }
}

/// The costs of a profiled workload: its measured layers, one table for every microbatch.
void use_workload(const JobOptions& j, const ScheduleDescriptor& schedule, const Batch& batch,
                  ScheduleInput& in) {
  Workload w = load_workload(j.workload, in.recompute);
  in.model_name = w.name;
  in.seq = j.seq > 0 ? j.seq : (w.seq > 0 ? w.seq : kDefaultSequenceLength);
  for (std::int64_t s : batch.sizes)
    if (w.microbatch_size > 0 && s != w.microbatch_size)
      bad(Option{"microbatch_size"},
          fmt::format("the workload was profiled at microbatch size {}; the batch gives {}",
                      w.microbatch_size, s));
  check_context_parallelism(j, in.seq, schedule);
  if (j.tp > 1)
    bad(Option{"tp"},
        "a profiled workload holds measured per-GPU times; profile it at the TP degree you run");
  bound_by_dispatch(in.host_dispatch_ns, w.layers);
  in.costs.push_back(std::move(w.layers));
  in.measured_optimizer_ns = w.optimizer_ns;
  in.cost_of_microbatch.assign(static_cast<std::size_t>(in.microbatches), 0);
  if (j.first_stage_layers >= 0 || j.last_stage_layers >= 0)
    bad(j.first_stage_layers >= 0 ? Option{"first_stage_layers"} : Option{"last_stage_layers"},
        ("applies to " + spelled(Option{"model"}) + "; give a profiled workload's stages with " +
         spelled(Option{"partition"})));
}

/// The kernels the job's options choose; parsed for every job, used by a model's costs.
struct Kernels {
  AttentionKernel attention;
  GradAccumulation grad_accumulation;
  BiasKernels bias_kernels;
  NormBackward norm_backward;
};

Kernels parse_kernels(const JobOptions& j) {
  Kernels k{};
  k.attention = parse_attention(*j.attention);
  k.grad_accumulation = parse_grad_accumulation(*j.grad_accumulation);
  k.bias_kernels = parse_bias_kernels(*j.bias_kernels);
  k.norm_backward = parse_norm_backward(*j.norm_backward);
  return k;
}

/// The costs of a model: one table per distinct microbatch size.
void use_model(const JobOptions& j, const ScheduleDescriptor& schedule, const Batch& batch,
               const Kernels& kernels, ScheduleInput& in) {
  ModelSpec m = j.loaded_model ? *j.loaded_model : load_model(j.model);
  in.model_name = m.name;
  m.vocab = framework_vocab(*j.loaded_framework, m.vocab, j.tp);
  in.seq = j.seq > 0 ? j.seq : kDefaultSequenceLength;
  if (in.seq > (std::int64_t{1} << 24)) bad(Option{"seq"}, "valid: 1 .. 16777216");
  if (j.doc_mask_tokens < 0 || j.doc_mask_tokens > in.seq)
    bad(Option{"doc_mask"},
        fmt::format("{} tokens per document; valid: 1 .. the sequence ({})", j.doc_mask_tokens, in.seq));
  if (m.heads % j.tp != 0)
    bad(Option{"tp"}, fmt::format("{} attention heads are not divisible by tp = {}", m.heads, j.tp));
  check_expert_parallelism(j, m, schedule);
  check_context_parallelism(j, in.seq, schedule);
  in.ep = j.ep;
  std::map<std::int64_t, std::int32_t> table_of_size;
  for (std::int64_t s : batch.sizes) {
    auto [it, fresh] = table_of_size.emplace(s, static_cast<std::int32_t>(in.costs.size()));
    if (fresh) {
      CostOptions co{s, in.seq, j.tp, in.recompute};
      co.attention = kernels.attention;
      co.sequence_parallel = *j.sequence_parallel;
      co.dropout = *j.dropout;
      co.grad_accumulation = kernels.grad_accumulation;
      co.bias_kernels = kernels.bias_kernels;
      co.norm_backward = kernels.norm_backward;
      co.lora_rank = j.lora_rank;
      co.ep = in.ep;
      co.moe_imbalance = j.moe_imbalance;
      co.fp8 = in.dtype == "fp8";
      co.fp8_recipe = j.fp8_recipe == "tensorwise" ? Fp8Recipe::kTensorwise
                      : j.fp8_recipe == "mxfp8"    ? Fp8Recipe::kMxfp8
                                                   : Fp8Recipe::kDelayed;
      co.doc_tokens = j.doc_mask_tokens;
      co.cp = j.cp;
      co.unaligned_gemm_rate = in.hw.gpu.unaligned_gemm;
      set_framework_costs(*j.loaded_framework, in, m.head_dim, co);
      in.costs.push_back(model_layer_costs(m, co));
    }
    in.cost_of_microbatch.push_back(it->second);
  }
  if (j.tp > 1 && *j.sequence_parallel && !batch.sizes.empty())
    in.tp_gather_buffer_bytes = j.loaded_framework->tp_gather_buffers.value * 2 /* bf16 */ *
                                *std::max_element(batch.sizes.begin(), batch.sizes.end()) * in.seq * m.hidden;
  if (j.first_stage_layers >= 0 || j.last_stage_layers >= 0)
    in.partition = uneven_ends_partition(j, in, m, schedule.placement);
  const std::int32_t stages = model_stages(schedule.placement, in.pp, in.virtual_stages);
  if (in.partition.empty() && stages > 1 && schedule.partitioner.rule == PartitionRule::kContiguousStages &&
      parse_pipeline_split(j.loaded_framework->pipeline_split.value) == PipelineSplit::kBlockCosts) {
    in.partition = block_cost_partition(m, stages);
    in.partition_by_framework = true;
  }
}

}  // namespace

ScheduleInput make_schedule_input(const JobOptions& job, const ScheduleDescriptor& schedule) {
  const JobOptions j = with_framework(job);
  if (!framework_runs(*j.loaded_framework, schedule))
    bad(Option{"schedule"},
        fmt::format("{} runs the pipeline schedules {}; valid: those, or a CPU-offload schedule",
                    framework_name(j), fmt::join(j.loaded_framework->schedules.value, ", ")));
  check_framework_offers(j, schedule);
  ScheduleInput in;
  in.framework = framework_name(j);
  resolve_layout(j, in);
  resolve_execution(j, schedule, in);
  in.communicator_bytes = rank0_communicator_bytes(
      j.loaded_framework->nccl_communicators.value,
      RankLayout{in.tp, in.cp, in.dp, in.pp, in.virtual_stages, in.dp_inside_pp}, in.hw);
  const Kernels kernels = parse_kernels(j);
  in.sharding = resolve_sharding(j, in, schedule);
  resolve_partition(j, schedule, in);
  Batch batch = derive_batch(
      j, std::int64_t{schedule.default_microbatches_per_gpu} * in.pp + schedule.default_microbatches_extra);
  in.microbatches = batch.microbatches;
  in.global_batch = batch.global;

  if (!j.workload.empty())
    use_workload(j, schedule, batch, in);
  else
    use_model(j, schedule, batch, kernels, in);
  return in;
}

}  // namespace pipesim::sim
