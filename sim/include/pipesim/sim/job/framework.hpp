// A training framework as data (frameworks/*.json, format "pipesim-framework"): how the software a job runs
// on executes the model, as its code does when launched as its reference scripts launch it. Each setting is
// the default of one job option and names the framework's file and function it comes from; an option the
// job gives overrides it. Frameworks are read here, in the job layer, and reach the cost model as the
// job's options.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipesim/sim/schedules/schedule.hpp"
#include "pipesim/sim/workload/kernel_composition.hpp"

namespace pipesim::sim {

/// The framework a job runs on unless it names one: today's Megatron-Core with Transformer Engine.
inline constexpr const char* kDefaultFramework = "megatron-core";
/// Rank order of a job whose framework states none: a pipeline's stages side by side.
inline constexpr const char* kDefaultRankOrder = "tp-cp-pp-dp";

/// A CPU that takes a millisecond to issue one kernel is beyond any framework's; larger is a typo.
inline constexpr double kMaxHostDispatchUs = 1000;

/// CPU time to issue one collective of each kind through the framework's communication library (Python,
/// the process group's bookkeeping, the launch), in microseconds; 0: an ordinary kernel's dispatch.
struct HostCollectiveUs {
  double all_reduce = 0;
  double all_gather = 0;
  double reduce_scatter = 0;
};

template <class T>
struct FrameworkSetting {
  T value{};
  std::string source;  ///< the framework's file and function (or launch script) it comes from
};

struct Framework {
  std::string name;
  std::string description;
  std::string source;  ///< the code (repository and commit) the settings were read from
  // The job options a framework decides (see JobOptions for each one's meaning and valid words).
  FrameworkSetting<std::string> attention;          ///< flash | unfused
  FrameworkSetting<bool> dropout;                   ///< dropout kernels in the forward (and their masks)
  FrameworkSetting<bool> sequence_parallel;         ///< norms and dropouts split over the TP ranks
  FrameworkSetting<std::string> bias_kernels;       ///< fused | separate
  FrameworkSetting<std::string> norm_backward;      ///< one-pass | two-pass
  FrameworkSetting<std::string> grad_accumulation;  ///< fused | main-grad | autograd
  FrameworkSetting<std::string> grad_sync;          ///< overlap | after-backward
  FrameworkSetting<std::string> tp_overlap;         ///< backward | none
  FrameworkSetting<bool> blocking_p2p;              ///< pipeline sends hold the sender's compute
  /// How its asynchronous TP linears (tp_overlap backward, under sequence parallelism) run their GEMMs:
  /// `whole` (Megatron: one GEMM over the gathered rows, the collective beside the other GEMMs) or
  /// `shard-first` (nanotron: the local rows' GEMM while the all-gather runs, then the gathered rows before
  /// and after them, so each column linear's forward and each row linear's input gradient is three GEMMs on
  /// a middle rank, two on the ends). Optional in a file; absent: whole.
  FrameworkSetting<std::string> tp_async_gemms{"whole", {}};
  /// What `--recompute selective` recomputes: `attention` (Megatron: the attention core) or
  /// `every-other-linear` (torchtitan's per-op policy: the attention kernel's and every other linear's
  /// outputs kept, the rest of the block re-run). Optional in a file; absent: attention.
  FrameworkSetting<std::string> selective_recompute{"attention", {}};
  /// CPU time to issue one kernel (Python modules, dispatch, autograd, the launch): a compute op lasts at
  /// least its kernels times this, so small eager models are bound by the CPU. Optional in a file; 0 (not
  /// modelled): only the GPU's own gap between kernels counts.
  FrameworkSetting<double> host_dispatch_us;
  /// CPU time to issue each tensor-parallel collective (an all-reduce, or under sequence parallelism an
  /// all-gather and a reduce-scatter): eager frameworks call torch.distributed, whose per-call cost is
  /// several kernels' dispatch. Optional in a file; absent: a collective costs the CPU one kernel's dispatch.
  FrameworkSetting<HostCollectiveUs> host_collective_us;
  /// The pipeline schedules the framework implements (order-based ones; optional in a file, empty: any).
  /// `plan` and `buy` search only these, and `simulate` runs no other; the CPU-offload schedules are systems
  /// of their own that run on any framework's kernels.
  FrameworkSetting<std::vector<std::string>> schedules;
  /// How the framework places blocks on pipeline stages when no partition is given: even (Megatron) or
  /// block-costs (nanotron; see job/framework_split.hpp). Optional in a file; absent: even. `plan` keeps a
  /// framework's block-costs split instead of searching partitions, as the framework offers no other.
  FrameworkSetting<std::string> pipeline_split{"even", {}};
  /// How the framework numbers its ranks outside tp and cp: tp-cp-pp-dp (a pipeline's stages side by side)
  /// or tp-cp-dp-pp (data-parallel replicas side by side, pipeline stages outermost, as Megatron, nanotron
  /// and torchtitan build their groups). Optional in a file; absent: tp-cp-pp-dp (kDefaultRankOrder).
  FrameworkSetting<std::string> rank_order{kDefaultRankOrder, {}};
  /// The fused attention kernel the framework runs (a name of a hardware profile's `attention_kernels`, e.g.
  /// flash-attn-2): the attention core takes that kernel's published rate on the GPU. Optional in a file;
  /// empty, or a kernel the profile does not list: the GEMM rate.
  FrameworkSetting<std::string> attention_kernel;
  /// How it asks that kernel for causality: `causal` (is_causal: the kernel skips the masked half) or `dense`
  /// (an explicit mask tensor: the kernel computes every score, twice the causal half's work at its rate).
  /// Optional in a file; absent: causal.
  FrameworkSetting<std::string> attention_mask{"causal", {}};
  /// The data-parallel modes the framework offers (ddp, zero-1, zero-2, zero-3, fsdp-hybrid) and the
  /// recompute policies (none, selective, full). Optional in a file; empty: any. `plan`, `buy` and the
  /// sharded variants `simulate` adds try only these, and a job that asks for another is refused.
  FrameworkSetting<std::vector<std::string>> data_parallel;
  FrameworkSetting<std::vector<std::string>> recompute;
  /// Whether its classic schedules can keep optimizer state (or parameters) in host memory
  /// (--optimizer-offload, --offload). Optional in a file; absent: true. The CPU-offload schedules do that
  /// by themselves on any framework.
  FrameworkSetting<bool> host_offload{true, {}};
  /// The multiple the framework pads the vocabulary to, times tp (Megatron's --make-vocab-size-divisible-by,
  /// 128): the output layer computes the padded logits. Optional in a file; absent: 1, the model's vocabulary
  /// as given (an odd one leaves the output GEMMs unaligned).
  FrameworkSetting<std::int64_t> vocab_padding{1, {}};
  /// Bytes per parameter of the gradients data parallelism reduces: 2 (16-bit gradients) or 4 (the fp32
  /// accumulation buffers, as nanotron's DDP hook all-reduces them). Optional in a file; absent: 2.
  FrameworkSetting<std::int64_t> dp_grad_bytes{2, {}};
  /// The parameters (2^20 to 2^40) whose gradients fill one bucket of its data-parallel reducer, which
  /// reduces each bucket as one collective once it holds that many and never splits a tensor (torch DDP's
  /// bucket_cap_mb over the bytes of a parameter). Optional in a file; absent: 0, whole layers grouped to at
  /// least 40 M parameters a collective (Megatron's DDP bucket).
  FrameworkSetting<std::int64_t> dp_bucket_params{0, {}};
  /// How ZeRO-1/2 gathers the updated parameters after the optimizer step: `in-place` (into the parameters'
  /// own storage) or `flattened-copy` (nanotron: the rank's shard and every rank's part flattened into new
  /// buffers, then copied back: 2 (1 + 1/dp) bytes a parameter while it runs). Optional in a file; absent:
  /// in-place.
  FrameworkSetting<std::string> zero_param_gather{"in-place", {}};
  /// Where the 16-bit gradients live: `step` (made by a step's first backward, freed by its optimizer step)
  /// or `ddp-buckets` (nanotron: DDP's bucket buffers, which exist only when dp > 1; with one data-parallel
  /// rank each backward's gradients are freed once added into the fp32 buffers). Optional in a file; absent:
  /// step.
  FrameworkSetting<std::string> grad_16bit_memory{"step", {}};
  /// Buffers, each one microbatch's whole hidden states in 16 bits, that its sequence-parallel TP keeps for
  /// the whole run to all-gather into (nanotron's MemoryBuffer: the column linears' inputs and the row
  /// linears' output gradients). Optional in a file; absent: 0 (the gathered tensors are the passes' own).
  FrameworkSetting<std::int64_t> tp_gather_buffers{0, {}};
  /// The process groups it runs NCCL operations on, in the order it makes them (world, tp, cp, dp, pp,
  /// tp-pp, first-last-stage, pp-neighbours; job/nccl_communicators.hpp): their communicators' device memory
  /// on rank 0 counts against each GPU's capacity where the hardware profile states NCCL's channels.
  /// Optional in a file; absent: none counted.
  FrameworkSetting<std::vector<std::string>> nccl_communicators;
  /// The framework's own element-wise kernels, saved tensors, residual width and optimizer traffic, where
  /// its file states them ("kernels"); null: the built-in Megatron-Core composition.
  std::shared_ptr<const KernelComposition> kernels;
};

/// Whether the framework runs the schedule (order-based ones it lists, any when it lists none, and every
/// whole-plan schedule).
bool framework_runs(const Framework& framework, const ScheduleDescriptor& schedule);

/// Whether `word` is among the framework's offered words (any word when it lists none).
bool framework_offers(const FrameworkSetting<std::vector<std::string>>& offered, const std::string& word);

/// Parses a framework file; throws InputError naming the file, the JSON path and what would be valid.
Framework parse_framework(const std::string& text, const std::string& file);

/// A shipped framework by name, or a framework file by path.
Framework load_framework(const std::string& name_or_path);

/// Names of the shipped frameworks, sorted.
std::vector<std::string> shipped_frameworks();

/// What a trace of a training step refits of the framework that ran it (calibrate --from-trace
/// --framework-out): the CPU's time a launch and, where the trace names its layers, their launches a pass.
struct FrameworkRefit {
  double host_dispatch_us = 0;
  std::string host_dispatch_source;
  std::optional<LayerLaunches> embedding, block, head;
};

/// The text of the framework file `name_or_path` (shipped or a path) renamed `name`, with what `refit` holds
/// in place of its own figures (settings.host_dispatch_us, kernels.<layer>.launches). The text parses as a
/// framework (checked).
std::string refit_framework(const std::string& name_or_path, const std::string& name,
                            const FrameworkRefit& refit);

}  // namespace pipesim::sim
