// pipesim: predict, plan and validate pipeline-parallel LLM training. This file only parses arguments,
// calls the libraries and maps their typed errors to one line and an exit code (2: bad input, 3: a broken
// invariant).
#include "cli_app.hpp"

#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bubbles_command.hpp"
#include "check_command.hpp"
#include "explain_command.hpp"
#include "flag_spelling.hpp"
#include "partition_command.hpp"
#include "pipesim/calibrate/calibrate.hpp"
#include "pipesim/replay/replay.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/core/memory_budget.hpp"
#include "pipesim/sim/core/output_file.hpp"
#include "pipesim/sim/core/units.hpp"
#include "pipesim/sim/fill/fill.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/hardware/stragglers.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/schedules/schedule.hpp"
#include "pipesim/sim/workload/model.hpp"
#include "plan_command.hpp"
#include "replay_command.hpp"
#include "simulate_command.hpp"
#include "suggestions.hpp"

namespace pipesim::cli {

namespace {

// The listings print a table, or with --format json the same facts as a JSON array (for scripts and the
// Python module).
void print_listing(const nlohmann::json& rows, const std::string& format, const std::string& table) {
  std::cout << (format == "json" ? pipesim::sim::json_text(rows, 1) + "\n" : table);
}

int list_schedules(const std::string& format) {
  nlohmann::json rows = nlohmann::json::array();
  std::string table;
  for (const auto& s : pipesim::sim::schedule_registry()) {
    table += fmt::format("{:<18} {}\n{:<18} source: {}; {}\n", s.name, s.description, "", s.source,
                         pipesim::sim::to_string(s.kind));
    nlohmann::json params = nlohmann::json::array();
    for (const auto& c : s.constraints) table += fmt::format("{:<18}   needs: {}\n", "", c);
    for (const auto& p : s.parameters) {
      table += fmt::format("{:<18}   {}{}: {} (default {})\n", "", flag_of(p.option),
                           p.metavar.empty() ? "" : " " + p.metavar, p.description,
                           pipesim::sim::to_string(p.default_value));
      params.push_back({{"flag", flag_of(p.option)},
                        {"description", p.description},
                        {"default", pipesim::sim::to_string(p.default_value)}});
    }
    rows.push_back({{"name", s.name},
                    {"description", s.description},
                    {"source", s.source},
                    {"kind", pipesim::sim::to_string(s.kind)},
                    {"constraints", s.constraints},
                    {"parameters", params}});
  }
  print_listing(rows, format, table);
  return 0;
}

int list_hw(const std::string& format) {
  nlohmann::json rows = nlohmann::json::array();
  std::string table;
  for (const auto& name : pipesim::sim::shipped_hardware_profiles()) {
    auto hw = pipesim::sim::load_hardware_profile(name);
    table += fmt::format("{:<18} {}\n", name, hw.description);
    rows.push_back({{"name", name},
                    {"description", hw.description},
                    {"gpu", hw.gpu.model},
                    {"gpus_per_node", hw.node.gpus},
                    {"peak_tflops", hw.gpu.peak_tflops},
                    {"hbm_bytes", hw.gpu.hbm_bytes},
                    {"gpu_hour_usd", hw.gpu_hour_usd}});
  }
  print_listing(rows, format, table);
  return 0;
}

int list_models(const std::string& format) {
  nlohmann::json rows = nlohmann::json::array();
  std::string table;
  for (const auto& name : pipesim::sim::shipped_models()) {
    auto m = pipesim::sim::load_model(name);
    table += fmt::format(
        "{:<18} layers {:>3}, hidden {:>5}, heads {:>3}/{:<3} ffn {:>6}, vocab {:>6}{}\n", name, m.layers,
        m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.vocab,
        m.is_moe() ? fmt::format(", MoE {} experts top-{}", m.num_experts, m.experts_per_token) : "");
    rows.push_back({{"name", name},
                    {"layers", m.layers},
                    {"hidden", m.hidden},
                    {"heads", m.heads},
                    {"kv_heads", m.kv_heads},
                    {"ffn_hidden", m.ffn_hidden},
                    {"vocab", m.vocab},
                    {"experts", m.num_experts},
                    {"experts_per_token", m.experts_per_token}});
  }
  print_listing(rows, format, table);
  return 0;
}

/// A framework's own kernel composition, entry by entry, with sources (null when it keeps the built-in).
nlohmann::json composition_json(const std::shared_ptr<const pipesim::sim::KernelComposition>& k) {
  if (!k) return nullptr;
  auto entries = [](const std::vector<pipesim::sim::KernelTraffic>& list) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : list)
      a.push_back({{"what", e.what},
                   {"tensor", pipesim::sim::to_string(e.tensor)},
                   {"bytes", e.bytes_per_element},
                   {"kernels", e.kernels},
                   {"when", pipesim::sim::to_string(e.when)},
                   {"source", e.source}});
    return a;
  };
  auto layer = [&](const pipesim::sim::LayerKernels& l) {
    nlohmann::json j{
        {"forward", entries(l.forward)}, {"backward", entries(l.backward)}, {"saved", entries(l.saved)}};
    if (l.launches)
      j["launches"] = {{"forward", l.launches->forward},
                       {"backward", l.launches->backward},
                       {"source", l.launches->source}};
    return j;
  };
  return {{"residual_bytes", k->residual_bytes},
          {"optimizer_step_bytes_per_param", k->optimizer_step_bytes_per_param},
          {"gather_copy_bytes_per_param", k->gather_copy_bytes_per_param},
          {"embedding", layer(k->embedding)},
          {"block", layer(k->block)},
          {"head", layer(k->head)}};
}

/// A framework's row of `pipesim frameworks --format json`: every setting's value and its source.
nlohmann::json framework_json(const std::string& name, const pipesim::sim::Framework& f) {
  return {{"name", name},
          {"description", f.description},
          {"source", f.source},
          {"attention", f.attention.value},
          {"dropout", f.dropout.value},
          {"sequence_parallel", f.sequence_parallel.value},
          {"bias_kernels", f.bias_kernels.value},
          {"norm_backward", f.norm_backward.value},
          {"grad_accumulation", f.grad_accumulation.value},
          {"grad_sync", f.grad_sync.value},
          {"tp_overlap", f.tp_overlap.value},
          {"blocking_p2p", f.blocking_p2p.value},
          {"host_dispatch_us", f.host_dispatch_us.value},
          {"host_collective_us",
           {{"all_reduce", f.host_collective_us.value.all_reduce},
            {"all_gather", f.host_collective_us.value.all_gather},
            {"reduce_scatter", f.host_collective_us.value.reduce_scatter}}},
          {"schedules", f.schedules.value},
          {"pipeline_split", f.pipeline_split.value},
          {"rank_order", f.rank_order.value},
          {"attention_kernel", f.attention_kernel.value},
          {"attention_mask", f.attention_mask.value},
          {"data_parallel", f.data_parallel.value},
          {"recompute", f.recompute.value},
          {"host_offload", f.host_offload.value},
          {"vocab_padding", f.vocab_padding.value},
          {"dp_grad_bytes", f.dp_grad_bytes.value},
          {"dp_bucket_params", f.dp_bucket_params.value},
          {"zero_param_gather", f.zero_param_gather.value},
          {"grad_16bit_memory", f.grad_16bit_memory.value},
          {"tp_gather_buffers", f.tp_gather_buffers.value},
          {"nccl_communicators", f.nccl_communicators.value},
          {"kernels", composition_json(f.kernels)},
          {"sources",
           {{"attention", f.attention.source},
            {"dropout", f.dropout.source},
            {"sequence_parallel", f.sequence_parallel.source},
            {"bias_kernels", f.bias_kernels.source},
            {"norm_backward", f.norm_backward.source},
            {"grad_accumulation", f.grad_accumulation.source},
            {"grad_sync", f.grad_sync.source},
            {"tp_overlap", f.tp_overlap.source},
            {"blocking_p2p", f.blocking_p2p.source},
            {"host_dispatch_us", f.host_dispatch_us.source},
            {"host_collective_us", f.host_collective_us.source},
            {"schedules", f.schedules.source},
            {"pipeline_split", f.pipeline_split.source},
            {"rank_order", f.rank_order.source},
            {"attention_kernel", f.attention_kernel.source},
            {"attention_mask", f.attention_mask.source},
            {"data_parallel", f.data_parallel.source},
            {"recompute", f.recompute.source},
            {"host_offload", f.host_offload.source},
            {"vocab_padding", f.vocab_padding.source},
            {"dp_grad_bytes", f.dp_grad_bytes.source},
            {"dp_bucket_params", f.dp_bucket_params.source},
            {"zero_param_gather", f.zero_param_gather.source},
            {"grad_16bit_memory", f.grad_16bit_memory.source},
            {"tp_gather_buffers", f.tp_gather_buffers.source},
            {"nccl_communicators", f.nccl_communicators.source}}}};
}

int list_frameworks(const std::string& format) {
  nlohmann::json rows = nlohmann::json::array();
  std::string table;
  for (const auto& name : pipesim::sim::shipped_frameworks()) {
    const pipesim::sim::Framework f = pipesim::sim::load_framework(name);
    table += fmt::format(
        "{:<20} {}\n{:<20} attention {}, dropout {}, sequence parallel {}, biases {}, norm "
        "backward {},\n{:<20} grad accumulation {}, grad sync {}, tp overlap {}, p2p {}{}\n",
        name, f.description, "", f.attention.value, f.dropout.value ? "on" : "off",
        f.sequence_parallel.value ? "on" : "off", f.bias_kernels.value, f.norm_backward.value, "",
        f.grad_accumulation.value, f.grad_sync.value, f.tp_overlap.value,
        f.blocking_p2p.value ? "blocking" : "overlapped",
        f.host_dispatch_us.value > 0 ? fmt::format(", {} us of CPU per kernel", f.host_dispatch_us.value)
                                     : "");
    if (const auto& c = f.host_collective_us.value; c.all_reduce + c.all_gather + c.reduce_scatter > 0)
      table += fmt::format(
          "{:<20} CPU per TP collective call: all-reduce {} us, all-gather {} us, reduce-scatter {} us\n", "",
          c.all_reduce, c.all_gather, c.reduce_scatter);
    if (!f.schedules.value.empty())
      table += fmt::format("{:<20} pipeline schedules {}, split {}, rank order {}\n", "",
                           fmt::join(f.schedules.value, ", "), f.pipeline_split.value, f.rank_order.value);
    if (!f.attention_kernel.value.empty())
      table += fmt::format("{:<20} attention kernel {}, {} mask\n", "", f.attention_kernel.value,
                           f.attention_mask.value);
    if (f.vocab_padding.value > 1)
      table += fmt::format("{:<20} vocabulary padded to a multiple of {} x tp\n", "", f.vocab_padding.value);
    if (f.dp_grad_bytes.value != 2)
      table += fmt::format("{:<20} data parallelism reduces {} B gradients a parameter\n", "",
                           f.dp_grad_bytes.value);
    if (f.dp_bucket_params.value > 0)
      table += fmt::format("{:<20} its reducer's buckets close at {} parameters' gradients\n", "",
                           f.dp_bucket_params.value);
    if (f.tp_gather_buffers.value > 0)
      table += fmt::format("{:<20} {} whole-hidden buffers kept for its sequence-parallel all-gathers\n", "",
                           f.tp_gather_buffers.value);
    if (f.grad_16bit_memory.value != "step")
      table += fmt::format("{:<20} 16-bit gradients held as {}\n", "", f.grad_16bit_memory.value);
    if (!f.nccl_communicators.value.empty())
      table +=
          fmt::format("{:<20} NCCL communicators on {}\n", "", fmt::join(f.nccl_communicators.value, ", "));
    if (f.zero_param_gather.value != "in-place")
      table += fmt::format("{:<20} ZeRO gathers the updated parameters through {} buffers\n", "",
                           f.zero_param_gather.value);
    if (!f.data_parallel.value.empty() || !f.recompute.value.empty() || !f.host_offload.value)
      table += fmt::format(
          "{:<20} data parallel {}, recompute {}, host offload {}\n", "",
          f.data_parallel.value.empty() ? "any" : fmt::format("{}", fmt::join(f.data_parallel.value, ", ")),
          f.recompute.value.empty() ? "any" : fmt::format("{}", fmt::join(f.recompute.value, ", ")),
          f.host_offload.value ? "yes" : "no");
    if (f.kernels)
      table += fmt::format(
          "{:<20} its own kernels: {} element-wise entries a block, residual stream {} B, "
          "optimizer {} B a parameter\n",
          "", f.kernels->block.forward.size() + f.kernels->block.backward.size(), f.kernels->residual_bytes,
          f.kernels->optimizer_step_bytes_per_param);
    rows.push_back(framework_json(name, f));
  }
  print_listing(rows, format, table);
  return 0;
}

int list_fill_jobs(const std::string& format) {
  const auto hw = pipesim::sim::load_hardware_profile("h100-sxm-8x");
  nlohmann::json rows = nlohmann::json::array();
  std::string table;
  for (const auto& name : pipesim::sim::shipped_fill_jobs())
    for (const auto& job : pipesim::sim::load_fill_jobs(name, hw, "bf16")) {
      table +=
          fmt::format("{:<24} {} units of {:.3f} ms on h100-sxm-8x, {:.1f} GFLOP each, state {:.2f} GiB{}\n",
                      name, job.units, static_cast<double>(job.unit_ns) / 1e6, job.unit_flops / 1e9,
                      static_cast<double>(job.state_bytes) / pipesim::sim::kBytesPerGiB,
                      job.writes_back ? " (returned after each chunk)" : "");
      rows.push_back({{"name", name},
                      {"units", job.units},
                      {"unit_ns_on_h100", job.unit_ns},
                      {"unit_flops", job.unit_flops},
                      {"state_bytes", job.state_bytes},
                      {"writes_back", job.writes_back}});
    }
  print_listing(rows, format, table);
  return 0;
}

/// Data-parallel layout: MoE expert parallelism, ZeRO stages, FSDP / HSDP, optimizer and parameter offload.
void add_data_parallel_options(CLI::App* sim, pipesim::sim::JobOptions& j) {
  sim->add_option("--ep", j.ep, "MoE expert parallelism: experts split over groups of ep data-parallel ranks")
      ->check(CLI::Range(1, 1 << 20));
  sim->add_option("--moe-imbalance", j.moe_imbalance,
                  "MoE: the busiest expert-parallel rank's routed tokens over the average (1: balanced)")
      ->check(CLI::Range(1.0, 1048576.0));
  sim->add_option(
         "--zero", j.zero,
         "ZeRO stage over the data-parallel group: 0 (all-reduce), 1 (optimizer state sharded), 2 (+ "
         "gradients), 3 (+ parameters, gathered per layer)")
      ->check(CLI::Range(0, 3));
  sim->add_option("--fsdp", j.fsdp,
                  "PyTorch FSDP: full (ZeRO-3) or hybrid (HSDP: shard in a node, replicate across)")
      ->check(CLI::IsMember({"full", "hybrid"}));
  sim->add_option(
         "--offload", j.offload,
         "to host memory: optimizer (ZeRO-Offload: CPU Adam), params (ZeRO-Infinity, needs ZeRO-3) or "
         "both")
      ->check(CLI::IsMember({"none", "optimizer", "params", "both"}))
      ->capture_default_str();
  sim->add_option("--offload-device", j.offload_device,
                  "where --offload puts the state: cpu (host memory) or nvme (the profile's NVMe volume, "
                  "ZeRO-Infinity)")
      ->check(CLI::IsMember({"cpu", "nvme"}))
      ->capture_default_str();
  sim->add_option("--zero-prefetch-layers", j.zero_prefetch_layers,
                  "ZeRO-3/FSDP: layers whose weights are gathered ahead of the one computing (0: on demand)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
}

/// A word option that, when not given, is the framework's.
void add_framework_word(CLI::App* cmd, const std::string& flag, std::optional<std::string>& value,
                        const std::string& help, std::vector<std::string> words) {
  cmd->add_option_function<std::string>(
         flag, [&value](const std::string& text) { value = text; }, help + " (default: the framework's)")
      ->check(CLI::IsMember(std::move(words)));
}

/// A flag that, when not given, is the framework's; `negation` turns it off.
void add_framework_flag(CLI::App* cmd, const std::string& flag, const std::string& negation,
                        std::optional<bool>& value, const std::string& help) {
  cmd->add_flag_callback(
      flag, [&value] { value = true; }, help + " (default: the framework's)");
  if (!negation.empty())
    cmd->add_flag_callback(
        negation, [&value] { value = false; }, "the opposite of " + flag);
}

/// The training framework and how it runs the model: what its kernels move and when its DP gradients sync.
/// Each of these options, not given, is the framework's.
void add_kernel_options(CLI::App* sim, pipesim::sim::JobOptions& j) {
  sim->add_option("--framework", j.framework,
                  "training framework the job runs on: a shipped name (see pipesim frameworks) or a "
                  "pipesim-framework file (default: " +
                      std::string(pipesim::sim::kDefaultFramework) + ")");
  add_framework_word(sim, "--attention", j.attention,
                     "attention kernel: flash (scores on chip) or unfused (scores in HBM)",
                     {"flash", "unfused"});
  add_framework_flag(sim, "--sequence-parallel", "--no-sequence-parallel", j.sequence_parallel,
                     "norms, dropout and residual adds split over the TP ranks (sequence parallelism)");
  add_framework_flag(sim, "--dropout", "--no-dropout", j.dropout,
                     "dropout on attention probabilities and residual branches");
  add_framework_word(sim, "--grad-accumulation", j.grad_accumulation,
                     "how each microbatch's weight gradients are accumulated: fused (into the fp32 buffer by "
                     "the GEMM), main-grad (16-bit grads added into fp32 main grads, Megatron-LM's local DDP "
                     "before that fusion: 10 B/param per microbatch) or autograd (PyTorch's 16-bit .grad: 6 "
                     "B/param)",
                     {"fused", "main-grad", "autograd"});
  add_framework_word(sim, "--bias-kernels", j.bias_kernels,
                     "fused (biases and their gradients in GEMM epilogues, Transformer Engine) or separate "
                     "(Megatron-LM 2021-2022: the q/k/v bias added by its own kernel, each bias gradient a "
                     "reduction over its output's gradient)",
                     {"fused", "separate"});
  add_framework_word(sim, "--norm-backward", j.norm_backward,
                     "one-pass (input and weight gradients from one read, persistent layer norm, Transformer "
                     "Engine) or two-pass (the weight gradient's own pass, Megatron-LM 2021, PyTorch)",
                     {"one-pass", "two-pass"});
  sim->add_flag(
      "--bubble-markers", j.bubble_markers,
      "bracket every wait for another pipeline stage with a pair of zero-time bubble ops in the plan");
  add_framework_flag(sim, "--blocking-p2p", "--overlapped-p2p", j.blocking_p2p,
                     "pipeline sends hold the sender's compute until they complete (Megatron-LM's blocking "
                     "send/recv before its overlapped p2p)");
  sim->add_option(
      "--max-memory", j.max_memory_gib,
      "GiB a plan may take to build and simulate; larger ones are refused up front (default: half "
      "of this machine's memory)");
  add_framework_word(sim, "--grad-sync", j.grad_sync,
                     "DP gradient all-reduce: overlap (buckets during the backward) or after-backward",
                     {"overlap", "after-backward"});
  sim->add_option_function<double>(
         "--host-dispatch-us", [&j](double us) { j.host_dispatch_us = us; },
         "CPU time to issue one kernel (Python, dispatch, autograd, launch), in us: a compute op lasts at "
         "least "
         "its kernels times this; 0: not modelled (default: the framework's)")
      ->check(CLI::Range(0.0, pipesim::sim::kMaxHostDispatchUs));
  sim->add_option_function<std::string>(
      "--attention-kernel", [&j](const std::string& k) { j.attention_kernel = k; },
      "the fused attention kernel whose published rate the attention core takes: a name of the hardware "
      "profile's gpu.attention_kernels (cudnn, flash-attn-2, ...) or gemm (the GEMM rate) (default: the "
      "framework's attention_kernel)");
  sim->add_option("--collective-latency", j.collective_latency,
                  "how collectives pay latency: nccl (NCCL's tuning model for the algorithm and protocol it "
                  "picks by size: ring, tree, PAT; LL, LL128, Simple), steps (the profile's latency once per "
                  "ring step), none (bandwidth only)")
      ->check(CLI::IsMember({"nccl", "steps", "none"}));
  sim->add_option("--network-sharing", j.network_sharing,
                  "what a collective across nodes shares the network with, where the profile measured it by "
                  "node count: job (the job's other groups, communicating at the same time: the rate of all "
                  "the job's nodes), alone (the rate of the nodes its own group spans)")
      ->check(CLI::IsMember({"job", "alone"}));
  sim->add_option_function<double>(
         "--gpu-speed-cv", [&j](double cv) { j.gpu_speed_cv = cv; },
         "stragglers: coefficient of variation of the GPUs' speed; every GPU keeps the pace of the expected "
         "slowest of the job's GPUs; 0: off (default: the hardware profile's gpu.speed_cv, absent: off)")
      ->check(CLI::Range(0.0, pipesim::sim::kMaxSpeedCv));
  sim->add_option_function<double>(
      "--power-limit", [&j](double w) { j.power_limit = w; },
      "the GPUs held to this board power, in W (nvidia-smi -pl): GEMMs and fused attention run at the clock "
      "it sustains, the profile's gpu.power_clock_exponent (default: the profile's gpu.power_limit_W, "
      "absent: the rated board power)");
  sim->add_option_function<double>(
         "--spine-oversubscription", [&j](double r) { j.spine_oversubscription = r; },
         "the network's leaves, oversubscribed R : 1 towards the spine: traffic between leaves shares their "
         "uplinks (default: the hardware profile's network.oversubscription; needs its leaf_nodes)")
      ->check(CLI::Range(1.0, 1024.0));
  add_framework_word(sim, "--tp-overlap", j.tp_overlap,
                     "the backward's TP collectives: backward (beside its GEMMs, Megatron-LM's asynchronous "
                     "TP communication since 2022) or none (each waits on the compute stream, Megatron-LM "
                     "2021)",
                     {"backward", "none"});
}

void add_job_options(CLI::App* sim, pipesim::sim::JobOptions& j) {
  sim->add_option("--model", j.model, "model preset name or HuggingFace config.json")->capture_default_str();
  sim->add_option("--workload", j.workload, "profiled per-layer times (JSON) instead of --model");
  sim->add_option("--hw", j.hw, "hardware profile name or file")->capture_default_str();
  sim->add_option("--nodes", j.nodes, "nodes of the hardware profile (default: as many as pp*tp*dp needs)")
      ->check(CLI::Range(1, 1 << 20));
  sim->add_option("--pp", j.pp, "pipeline stages (default: GPUs / (tp*cp*dp))")
      ->check(CLI::Range(1, 1 << 20));
  sim->add_option("--tp", j.tp, "tensor-parallel degree")->check(CLI::Range(1, 1024));
  sim->add_option("--dp", j.dp, "data-parallel degree")->check(CLI::Range(1, 1 << 20));
  sim->add_option("--cp", j.cp,
                  "context-parallel degree: GPUs each sequence is split over (ranks ordered tp, cp, pp, dp)")
      ->check(CLI::Range(1, 1024));
  sim->add_option("--cp-attention", j.cp_attention,
                  "context-parallel attention: ring (keys and values passed round a ring, overlapping the "
                  "attention) or allgather (gathered before it, as Llama 3)")
      ->capture_default_str();
  sim->add_option_function<std::string>(
         "--rank-order", [&j](const std::string& order) { j.rank_order = order; },
         "order of the ranks: tp-cp-pp-dp (a pipeline's stages side by side) or tp-cp-dp-pp (data-parallel "
         "replicas side by side, pipeline stages outermost, as Megatron-LM, nanotron and torchtitan) "
         "(default: the framework's)")
      ->check(CLI::IsMember({"tp-cp-pp-dp", "tp-cp-dp-pp"}));
  sim->add_option("--microbatches", j.microbatches, "microbatches per pipeline flush (M)")
      ->check(CLI::Range(1, 1 << 24));
  sim->add_option("--microbatch-size", j.microbatch_size, "sequences per microbatch (b)")
      ->check(CLI::Range(1.0, 1e9));
  sim->add_option("--global-batch", j.global_batch, "sequences per optimizer step (G = dp*K*M*b)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  sim->add_option("--accum-steps", j.accum_steps, "pipeline flushes per optimizer step (K)")
      ->check(CLI::Range(1, 1 << 20));
  sim->add_option("--seq", j.seq, "sequence length")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
  sim->add_option("--virtual-stages", j.virtual_stages, "model chunks per rank (interleaved-1f1b)")
      ->check(CLI::Range(1, 1024));
  sim->add_option("--first-stage-layers", j.first_stage_layers,
                  "transformer blocks of the first model chunk (0: the embedding alone); the rest balanced")
      ->check(CLI::Range(0, 100000));
  sim->add_option("--last-stage-layers", j.last_stage_layers,
                  "transformer blocks of the last model chunk (0: the output layer and loss alone)")
      ->check(CLI::Range(0, 100000));
  sim->add_option("--recompute", j.recompute, "activation recompute: none|selective|full")
      ->capture_default_str();
  sim->add_option("--doc-mask", j.doc_mask_tokens,
                  "document masking: average tokens per document packed into a sequence (attention stays "
                  "within a document)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
  sim->add_option("--dtype", j.dtype,
                  "math dtype: bf16|fp16|fp16_acc16|fp32|fp8 (default: bf16 where the GPU has it, else fp16; "
                  "fp8: the blocks' GEMMs in FP8 where the profile has an fp8 peak)");
  sim->add_option(
         "--fp8-recipe", j.fp8_recipe,
         "with --dtype fp8, how Transformer Engine scales the GEMMs' operands: delayed (from the amax "
         "history, casts fused into the norms), tensorwise (current scaling: each tensor's amax, "
         "then its cast), mxfp8 (Blackwell's block scaling)")
      ->check(CLI::IsMember({"delayed", "tensorwise", "mxfp8"}))
      ->capture_default_str();
  sim->add_option("--p2p-time-ms", j.p2p_time_ms, "fixed time per pipeline hop instead of bytes/bandwidth")
      ->check(CLI::Range(0.0, 1e6));
  sim->add_flag(
      "--optimizer-offload", j.optimizer_offload,
      "ZeRO-Offload style: gradients to host memory, CPU Adam, weights back (uses the profile's Adam curve)");
  add_data_parallel_options(sim, j);
  add_kernel_options(sim, j);
  sim->add_option("--cpu-optimizer-threads", j.cpu_optimizer_threads,
                  "cores one CPU optimizer step uses (default: what the schedule's system uses)")
      ->check(CLI::Range(1, 4096));
  sim->add_option("--lora-rank", j.lora_rank,
                  "LoRA fine-tuning with adapters of this rank (0: full fine-tuning)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{65536}));
}

/// One flag per schedule parameter in the registry (a flag two schedules share is added once); the text given
/// is kept for the schedule that declares it and checked once parsing is done.
void add_schedule_flags(CLI::App* sim, pipesim::sim::JobOptions& j) {
  std::map<std::string, std::string> seen;  // option key -> schedules that take it
  for (const auto& s : pipesim::sim::schedule_registry())
    for (const auto& p : s.parameters) seen[p.option] += (seen[p.option].empty() ? "" : ", ") + s.name;
  for (const auto& s : pipesim::sim::schedule_registry()) {
    for (const auto& p : s.parameters) {
      auto it = seen.find(p.option);
      if (it == seen.end()) continue;  // already added
      const std::string help = fmt::format("{}: {}", it->second, p.description);
      const std::string key = p.option;
      if (p.type == pipesim::sim::ParameterType::kFlag)
        sim->add_flag_callback(
            flag_of(key), [&j, key] { j.schedule_options[key] = "true"; }, help);
      else
        sim->add_option_function<std::string>(
            flag_of(key), [&j, key](const std::string& text) { j.schedule_options[key] = text; }, help);
      seen.erase(it);
    }
  }
}

void add_simulate(CLI::App& app, Commands& c) {
  auto& so = c.simulate;
  auto& j = so.job;
  auto* sim =
      app.add_subcommand("simulate", "predict step time, throughput, bubbles and memory of a training job");
  sim->add_option("--schedule", so.schedule, "schedule name or all")->capture_default_str();
  sim->add_option("--iterations", j.iterations,
                  "optimizer steps to simulate (default: 1, or the schedule's default for asynchronous ones)")
      ->check(CLI::Range(1, 10000));
  sim->add_option("--partition", j.partition, "transformer blocks per stage, e.g. 5,5,5,3");
  add_job_options(sim, j);
  add_schedule_flags(sim, j);
  sim->add_option("--replicas", c.replicas, "symmetric (simulate identical replicas once) or explicit")
      ->check(CLI::IsMember({"symmetric", "explicit"}))
      ->capture_default_str();
  sim->add_option(
      "--fill-jobs", so.fill_jobs,
      "fill the bubbles with these jobs: shipped names (pipesim fill-jobs) or pipesim-fill-job files, "
      "comma-separated");
  sim->add_option("--fill-policy", so.fill_policy, "fill queue order: fifo, sjf, max-efficiency, deadline")
      ->check(CLI::IsMember({"fifo", "sjf", "max-efficiency", "deadline"}))
      ->capture_default_str();
  sim->add_option("--fill-max-slowdown", so.fill_max_slowdown,
                  "largest main-job slowdown the fill may cause (share of the step)")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  sim->add_option("--fill-switch-us", so.fill_switch_us, "fixed cost of each fill context switch (us)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  sim->add_option("--plan", so.plan_file, "run a saved pipesim-plan JSON");
  sim->add_option("--trace", so.trace_file, "write a Chrome trace (Perfetto)");
  sim->add_option("--trace-dir", so.trace_dir, "write one Chrome trace per schedule into this folder");
  sim->add_option("--timeline", so.timeline_file, "write the pipesim-timeline JSON");
  sim->add_option("--plan-out", so.plan_out, "write the generated plan JSON");
  sim->add_option(
      "--chakra-out", so.chakra_dir,
      "write the plan as Chakra execution traces for ASTRA-sim, one per GPU (DIR/<schedule>.<rank>.et; "
      "replicas simulated explicitly, so that every rank has its trace)");
  sim->add_option("--format", so.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.sim = sim;
}

void add_bubbles(CLI::App& app, Commands& c) {
  auto& bo = c.bubbles;
  auto& j = bo.job;
  auto* bub = app.add_subcommand("bubbles",
                                 "every GPU's idle intervals in a simulated step: where, how long, how "
                                 "much memory is free");
  bub->add_option("--schedule", bo.schedule, "schedule name")->capture_default_str();
  bub->add_option("--iterations", j.iterations, "optimizer steps to simulate (default: the schedule's)")
      ->check(CLI::Range(1, 10000));
  bub->add_option("--partition", j.partition, "transformer blocks per stage, e.g. 5,5,5,3");
  add_job_options(bub, j);
  add_schedule_flags(bub, j);
  bub->add_option("--replicas", c.bubbles_replicas, "symmetric (one replica stands for all) or explicit")
      ->check(CLI::IsMember({"symmetric", "explicit"}))
      ->capture_default_str();
  bub->add_option("--plan", bo.plan_file, "a saved pipesim-plan JSON instead of the job");
  bub->add_option("--format", bo.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.bub = bub;
}

void add_calibrate(CLI::App& app, Commands& c) {
  auto& co = c.calibrate;
  auto* cal = app.add_subcommand("calibrate", "measure this machine and write a hardware profile");
  cal->add_option("--out", co.out, "profile to write (raw measurements are saved beside it)")->required();
  cal->add_option("--base", co.base,
                  "profile (name or file) for the figures not measured here (default: the shipped profile of "
                  "this machine's GPU, rtx4090-8x without one)");
  cal->add_flag("--quick", co.quick, "smaller arrays and fewer samples (well under a minute)");
  cal->add_flag("--cpu-only", co.cpu_only, "skip the CUDA benchmarks");
  cal->add_option("--name", co.name, "profile name (default: the file name without extension)");
  c.calibrate_base = cal->get_option("--base");
  cal->add_option("--from-replay", c.calibrate_from_replay,
                  "refit the profile from a measured timeline (replay --out) of --plan instead of measuring");
  cal->add_option("--plan", c.calibrate_plan, "the plan that was replayed (with --from-replay)");
  cal->add_option(
      "--from-trace", c.calibrate_from_trace,
      "refit the GEMM efficiency and the streaming rate from a PyTorch profiler trace's GEMMs and "
      "element-wise ops (Kineto JSON, plain or .gz, recorded with record_shapes) instead of measuring; "
      "--base defaults to the trace's GPU");
  cal->add_option("--dtype", c.calibrate_dtype, "the dtype the traced GEMMs ran in (with --from-trace)")
      ->capture_default_str();
  cal->add_option(
      "--framework", c.calibrate_framework,
      "the framework (name or file) that ran the trace, with --from-trace: its element-wise kernels' "
      "share of the streaming rate (default: megatron-core, the full rate)");
  cal->add_option("--framework-out", c.calibrate_framework_out,
                  "with --from-trace, also write --framework as a framework file whose CPU time a launch "
                  "(host_dispatch_us) is the trace's, the profiler's own cost taken out");
  cal->add_option(
         "--from-nccl-tests", c.calibrate_from_nccl_tests,
         "set the network's bus bandwidth by node count (collective_busbw_by_nodes) from nccl-tests "
         "outputs of all_reduce_perf, all_gather_perf or reduce_scatter_perf over every GPU of N nodes, "
         "one file per run, instead of measuring; --base defaults to their GPU's shipped profile")
      ->expected(1, 1 << 16);
  cal->add_option("--nccl-tests-bytes", c.calibrate_nccl_tests_bytes,
                  "the message size whose bus bandwidth the profile keeps, with --from-nccl-tests, e.g. 256M "
                  "(default: the largest every output ran)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  cal->add_flag("--replay-host", c.calibrate_replay_host,
                "write the profile of the host replay backend instead: one plan stream's thread as a GPU "
                "(its FMA, memcpy and Adam rates), to predict what replay --backend host measures");
  c.cal = cal;
}

void add_partition(CLI::App& app, Commands& c) {
  auto& po = c.partition;
  auto* part = app.add_subcommand("partition",
                                  "the optimal layer partition for a schedule (vs uniform and DeepSpeed)");
  add_job_options(part, po.job);
  part->add_option("--schedule", po.schedule, "schedule name")->capture_default_str();
  part->add_option("--max-mem-fraction", po.max_mem_fraction, "share of GPU memory a stage may use")
      ->capture_default_str();
  part->add_option("--format", po.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.part = part;
}

/// What `plan` and `buy` search the same way: the model and job, fixed layout parts, and what to try.
void add_search_options(CLI::App* cmd, planner::SearchOptions& s, std::string& schedules) {
  cmd->add_option("--model", s.base.model, "model preset name or HuggingFace config.json")
      ->capture_default_str();
  cmd->add_option("--global-batch", s.global_batch, "sequences per optimizer step")
      ->required()
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  cmd->add_option("--seq", s.base.seq, "sequence length")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24));
  cmd->add_option("--tp", s.tp, "fix the tensor-parallel degree (default: searched)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--pp", s.pp, "fix the pipeline degree (default: searched)")->check(CLI::Range(1, 1 << 20));
  cmd->add_option(
         "--cp", s.cp,
         "fix the context-parallel degree (default: 1, and from 16384 tokens every power of two that "
         "splits the sequence)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--cp-attention", s.base.cp_attention, "context-parallel attention: ring or allgather")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--rank-order", [&s](const std::string& order) { s.base.rank_order = order; },
         "order of the ranks: tp-cp-pp-dp or tp-cp-dp-pp (default: the framework's)")
      ->check(CLI::IsMember({"tp-cp-pp-dp", "tp-cp-dp-pp"}));
  cmd->add_option("--microbatch-size", s.microbatch_size,
                  "fix the microbatch size (default: 1, 2, 4, 8 tried)")
      ->check(CLI::IsMember({1, 2, 4, 8}));
  cmd->add_option("--recompute", s.recomputes, "recompute policies to try (default: all), e.g. full")
      ->check(CLI::IsMember({"none", "selective", "full"}))
      ->delimiter(',');
  cmd->add_option("--schedules", schedules,
                  "comma-separated schedules to consider (default: all that apply)");
  cmd->add_option(
         "--data-parallel", s.data_parallel,
         "data-parallel modes to try where dp > 1: ddp, zero-1, zero-2, zero-3, fsdp-hybrid (default: "
         "ddp and ZeRO 1-3)")
      ->check(CLI::IsMember({"ddp", "zero-1", "zero-2", "zero-3", "fsdp-hybrid"}))
      ->delimiter(',');
  cmd->add_option("--max-mem-fraction", s.max_mem_fraction, "share of GPU memory a configuration may use")
      ->capture_default_str();
  cmd->add_option("--threads", s.threads, "simulation threads (default: all cores)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--lora-rank", s.base.lora_rank, "LoRA fine-tuning rank (0: full fine-tuning)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{65536}));
  cmd->add_option("--dtype", s.base.dtype, "math dtype: bf16|fp16|fp16_acc16|fp32|fp8");
  cmd->add_option("--fp8-recipe", s.base.fp8_recipe,
                  "with --dtype fp8: delayed, tensorwise or mxfp8 (see simulate)")
      ->check(CLI::IsMember({"delayed", "tensorwise", "mxfp8"}))
      ->capture_default_str();
  add_kernel_options(cmd, s.base);
}

void add_plan(CLI::App& app, Commands& c) {
  auto& pl = c.plan;
  auto& ps = pl.search;
  auto* plan = app.add_subcommand("plan", "search the best parallel configuration for a model on N GPUs");
  add_search_options(plan, ps, pl.schedules);
  plan->add_option("--workload", ps.base.workload, "profiled per-layer times (JSON) instead of --model");
  plan->add_option("--hw", ps.base.hw, "hardware profile name or file")->capture_default_str();
  plan->add_option("--gpus", ps.gpus, "GPUs to use")->required()->check(CLI::Range(1, 1 << 20));
  plan->add_option("--objective", ps.objective, "throughput or cost")
      ->check(CLI::IsMember({"throughput", "cost"}))
      ->capture_default_str();
  plan->add_option("--gpu-hour-usd", ps.gpu_hour_usd, "price per GPU-hour (default: the profile's)")
      ->check(CLI::Range(0.0, 1e6));
  plan->add_option("--top", ps.top, "configurations to list")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  plan->add_flag("--exhaustive", ps.exhaustive,
                 "simulate every feasible candidate instead of pruning by the schedules' lower bounds (the "
                 "same top list, slower)");
  plan->add_option("--out", pl.out, "write the winner as an executable pipesim-plan JSON");
  plan->add_option("--format", pl.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.pl = plan;
}

void add_buy(CLI::App& app, Commands& c) {
  auto& b = c.buy;
  auto* buy = app.add_subcommand(
      "buy", "the best configuration on every candidate cluster, and the time and money to train on each");
  add_search_options(buy, b.buy.search, b.schedules);
  buy->add_option("--hw", b.hardware, "comma-separated hardware profiles (names or files)")->required();
  buy->add_option("--gpus", b.gpu_counts, "comma-separated GPU counts (whole nodes), e.g. 256,512,1024")
      ->required();
  buy->add_option("--tokens", b.buy.tokens, "tokens to train, e.g. 1e12 (or --steps)")
      ->check(CLI::Range(0.0, 1e30));
  buy->add_option("--steps", b.buy.steps, "optimizer steps to train (instead of --tokens)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  buy->add_option("--gpu-hour-usd", b.gpu_hour_usd,
                  "prices per GPU-hour overriding the profiles': NAME=PRICE[,NAME=PRICE...]");
  buy->add_option("--max-usd", b.buy.max_usd, "budget: clusters costing more miss the constraints")
      ->check(CLI::Range(0.0, 1e15));
  buy->add_option("--deadline-days", b.buy.deadline_days, "deadline: clusters training longer miss it")
      ->check(CLI::Range(0.0, 1e6));
  buy->add_option("--max-gpus", b.buy.max_gpus, "skip clusters with more GPUs")
      ->check(CLI::Range(0, 1 << 20));
  buy->add_option("--format", b.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.buy_cmd = buy;
}

void add_explain(CLI::App& app, Commands& c) {
  auto* explain = app.add_subcommand("explain", "check a saved plan and report its critical path");
  explain->add_option("plan", c.explain_file, "pipesim-plan JSON")->required();
  explain->add_option("--top", c.explain_top, "resources to list")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  explain->add_option("--format", c.explain_format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.explain = explain;
  auto* check = app.add_subcommand(
      "check",
      "hold a saved result to the invariants every result is checked against (exit code 3 if broken)");
  check
      ->add_option("result", c.check_result,
                   "simulate --format json output, or a pipesim-timeline (simulate --timeline, replay --out)")
      ->required();
  check->add_option("--plan", c.check_plan,
                    "the pipesim-plan the timeline ran: checks its op times and memory");
  c.check = check;
}

void add_import_trace(CLI::App& app, Commands& c) {
  auto& o = c.import_trace;
  auto* imp = app.add_subcommand(
      "import-trace",
      "turn a PyTorch profiler trace of one training step into a profiled workload (--workload)");
  imp->add_option("trace", o.trace, "torch.profiler chrome trace (Kineto JSON, plain or .gz), one step")
      ->required();
  imp->add_option("--out", o.out, "the pipesim-workload JSON to write")->required();
  imp->add_option(
      "--et", o.et,
      "the execution trace (ExecutionTraceObserver JSON, plain or .gz) of another step of the same "
      "loop: each layer's activation memory");
  auto* step = imp->add_option("--step", o.step,
                               "the step to import where the trace marks several (ProfilerStep#N, "
                               "torch.profiler with a schedule; default: the last)")
                   ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  imp->add_flag("--all-steps", o.all_steps,
                "the mean of every step the trace marks: each layer's times, launches and waits")
      ->excludes(step);
  imp->add_option("--name", o.name, "the workload's name (default: the trace's file name)");
  imp->add_option("--blocks", o.blocks,
                  "write the traced blocks' mean this many times: a trace of a few blocks stands for the "
                  "whole model (default: the blocks as traced)")
      ->check(CLI::Range(1, 65536));
  imp->add_option("--seq", o.seq, "the traced sequence length, recorded in the workload")
      ->check(CLI::Range(1, 1 << 30));
  imp->add_option("--microbatch-size", o.microbatch_size,
                  "the traced microbatch size, recorded in the workload")
      ->check(CLI::Range(1, 1 << 30));
  imp->add_flag("--tied-embeddings", o.tied_embeddings,
                "the output layer's matrix is the embedding's (HF tie_word_embeddings): count it once");
  imp->add_option("--bytes-per-param", o.bytes_per_param,
                  "GPU bytes a parameter holds with its gradient and optimizer state (16: fp32 weights and "
                  "gradients with Adam, or bf16 weights with fp32 master and moments)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  imp->add_option("--profiler-op-us", o.profiler_op_us,
                  "CPU time the profiler spent on each op, annotation and CUDA call it recorded, taken out "
                  "of the trace's CPU time to find where the GPU waited for the CPU (measured with "
                  "record_shapes on; docs/trace-import.md)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  imp->add_option("--profiler-python-us", o.profiler_python_us,
                  "likewise for each Python frame it recorded (with_stack=True)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  imp->add_option("--measured-step-ms", o.measured_step_ms,
                  "the same step timed without the profiler on the same host: the two profiler costs above "
                  "are scaled, in their ratio, until the replayed step lasts that long")
      ->check(CLI::Range(1e-3, 1e9));
  imp->add_option("--format", o.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.import_trace_cmd = imp;
}

void add_collectives(CLI::App& app, Commands& c) {
  auto& o = c.collectives;
  auto* col = app.add_subcommand(
      "collectives",
      "a collective alone at each message size on a hardware profile, as nccl-tests reports it (to hold a "
      "profile to the machine's own nccl-tests)");
  col->add_option("--hw", o.hw, "hardware profile: a shipped name or a pipesim-hw file")
      ->capture_default_str();
  col->add_option("--op", o.op, "the collective")
      ->check(CLI::IsMember({"all-reduce", "all-gather", "reduce-scatter"}))
      ->capture_default_str();
  col->add_option("--gpus-per-node", o.gpus_per_node, "GPUs of each node in the group (default: all of them)")
      ->check(CLI::Range(1, 4096));
  col->add_option("--nodes", o.nodes, "nodes the group spans")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  col->add_option("--min-bytes", o.min_bytes,
                  "the smallest message (an all-gather's gathered buffer), e.g. 1M")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  col->add_option("--max-bytes", o.max_bytes, "the largest message, e.g. 1G")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  col->add_option(
      "--against", o.against,
      "an nccl-tests output (all_reduce_perf, all_gather_perf or reduce_scatter_perf) to hold the profile "
      "to: its collective, nodes, GPUs a node and sizes are priced, each beside what it measured");
  col->add_option("--step-factor", o.step_factor, "each size is this many times the one before")
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
  col->add_option("--format", o.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.collectives_cmd = col;
}

void add_replay(CLI::App& app, Commands& c) {
  auto& ro = c.replay;
  auto* rep = app.add_subcommand(
      "replay", "execute a saved plan on this machine and measure it against the prediction");
  rep->add_option("plan", ro.plan_file, "pipesim-plan JSON (simulate --plan-out)")->required();
  rep->add_option("--backend", ro.replay.backend,
                  "host (runs everywhere) or cuda (this node's GPUs, one CUDA stream per plan stream; "
                  "needs the CUDA replay module, built where nvcc exists)")
      ->capture_default_str();
  rep->add_option("--iterations", ro.replay.iterations,
                  "measured runs after one warm-up (the median is kept)")
      ->capture_default_str();
  rep->add_option("--work-scale", ro.replay.work_scale,
                  "run this share of every op's work and divide measured times by it (0 < x <= 1)")
      ->capture_default_str();
  rep->add_option("--timeout-s", ro.replay.timeout_s,
                  "fail, naming the stuck ops, after this long without progress")
      ->capture_default_str();
  rep->add_flag("--mpi", ro.replay.mpi,
                "one process per node of the plan (start with mpirun -np NODES), host backend");
  rep->add_option("--out", ro.out, "write the measured pipesim-timeline JSON");
  rep->add_option("--trace", ro.trace, "write a Chrome trace of the measured run");
  rep->add_option("--format", ro.format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.rep = rep;
  auto* cmp = app.add_subcommand("compare", "compare a predicted and a measured timeline of the same plan");
  cmp->add_option("predicted", c.compare_predicted, "pipesim-timeline JSON (simulate --timeline)")
      ->required();
  cmp->add_option("measured", c.compare_measured, "pipesim-timeline JSON (replay --out)")->required();
  cmp->add_option("--top", c.compare_top, "most mismatched ops to list")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmp->add_option("--format", c.compare_format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  c.cmp = cmp;
}

/// Runs the parsed subcommand; library errors propagate to main.

}  // namespace

void add_commands(CLI::App& app, Commands& c) {
  app.require_subcommand(1);
  app.set_version_flag("--version", "pipesim 0.1.0");
  add_simulate(app, c);
  add_bubbles(app, c);
  add_calibrate(app, c);
  add_partition(app, c);
  add_plan(app, c);
  add_buy(app, c);
  add_explain(app, c);
  add_replay(app, c);
  add_import_trace(app, c);
  add_collectives(app, c);
  for (const auto& [name, help] :
       {std::pair{"schedules", "list the registered schedules and their parameters"},
        std::pair{"hw", "list the shipped hardware profiles"},
        std::pair{"models", "list the shipped model presets"},
        std::pair{"frameworks", "list the shipped training frameworks (for --framework)"},
        std::pair{"fill-jobs", "list the shipped fill jobs (for simulate --fill-jobs)"}})
    app.add_subcommand(name, help)
        ->add_option("--format", c.list_format, "table or json")
        ->check(CLI::IsMember({"table", "json"}))
        ->capture_default_str();
}

int dispatch(CLI::App& app, Commands& c, bool no_arguments) {
  if (c.sim->parsed()) {
    c.simulate.job.explicit_replicas = c.replicas == "explicit" || !c.simulate.chakra_dir.empty();
    pipesim::sim::check_schedule_options(c.simulate.job);
    // With no arguments at all, simulate runs the embedded default job and keeps its traces under out/.
    if (no_arguments) c.simulate.trace_dir = "out";
    return pipesim::cli::run_simulate(c.simulate);
  }
  if (c.bub->parsed()) {
    c.bubbles.job.explicit_replicas = c.bubbles_replicas == "explicit";
    pipesim::sim::check_schedule_options(c.bubbles.job);
    return pipesim::cli::run_bubbles(c.bubbles);
  }
  if (c.cal->parsed()) {
    if (!c.calibrate_from_nccl_tests.empty())
      return pipesim::cli::run_calibrate_from_nccl_tests(
          c.calibrate_from_nccl_tests, c.calibrate_base->count() > 0 ? c.calibrate.base : "", c.calibrate.out,
          c.calibrate.name, c.calibrate_nccl_tests_bytes);
    if (!c.calibrate_from_trace.empty())
      return pipesim::cli::run_calibrate_from_trace(
          c.calibrate_from_trace, c.calibrate_base->count() > 0 ? c.calibrate.base : "", c.calibrate.out,
          c.calibrate.name, c.calibrate_dtype, c.calibrate_framework, c.calibrate_framework_out);
    if (!c.calibrate_from_replay.empty()) {
      const std::string name = !c.calibrate.name.empty()
                                   ? c.calibrate.name
                                   : std::filesystem::path(c.calibrate.out).stem().string();
      return pipesim::cli::run_refit(c.calibrate_from_replay, c.calibrate_plan,
                                     c.calibrate_base->count() > 0 ? c.calibrate.base : "", c.calibrate.out,
                                     name);
    }
    if (c.calibrate_replay_host) {
      const std::string name = !c.calibrate.name.empty()
                                   ? c.calibrate.name
                                   : std::filesystem::path(c.calibrate.out).stem().string();
      pipesim::sim::write_output_file(c.calibrate.out, pipesim::sim::hardware_profile_to_json(
                                                           pipesim::replay::host_backend_profile(name)));
      std::cerr << "wrote " << c.calibrate.out << " (the host replay backend's profile)\n";
      return 0;
    }
    pipesim::calibrate::run_calibration(c.calibrate, std::cerr);
    return 0;
  }
  if (c.part->parsed()) return pipesim::cli::run_partition(c.partition);
  if (c.pl->parsed()) return pipesim::cli::run_plan(c.plan);
  if (c.buy_cmd->parsed()) return pipesim::cli::run_buy(c.buy);
  if (c.check->parsed()) return pipesim::cli::run_check(c.check_result, c.check_plan);
  if (c.explain->parsed()) return pipesim::cli::run_explain(c.explain_file, c.explain_format, c.explain_top);
  if (c.rep->parsed()) return pipesim::cli::run_replay(c.replay);
  if (c.import_trace_cmd->parsed()) return pipesim::cli::run_import_trace(c.import_trace);
  if (c.collectives_cmd->parsed()) return pipesim::cli::run_collectives(c.collectives);
  if (c.cmp->parsed())
    return pipesim::cli::run_compare(c.compare_predicted, c.compare_measured, c.compare_format,
                                     c.compare_top);
  if (app.got_subcommand("schedules")) return list_schedules(c.list_format);
  if (app.got_subcommand("hw")) return list_hw(c.list_format);
  if (app.got_subcommand("models")) return list_models(c.list_format);
  if (app.got_subcommand("frameworks")) return list_frameworks(c.list_format);
  if (app.got_subcommand("fill-jobs")) return list_fill_jobs(c.list_format);
  return 0;
}

int run_cli(int argc, char** argv) {
  spell_options_as_flags();  // before the registry's descriptions are written (Commands reads the defaults)
  CLI::App app{"pipesim: discrete-event simulator and planner for pipeline-parallel LLM training"};
  Commands commands;
  add_commands(app, commands);
  if (const auto unknown = unknown_command(app, argc, argv)) {
    std::cerr << "pipesim: error: " << *unknown << "\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const auto unknown = unknown_option(app, argc, argv);
    std::cerr << "pipesim: error: " << (unknown ? *unknown : std::string(e.what()) + " (see --help)") << "\n";
    return 2;
  }
  try {
    return dispatch(app, commands, argc == 2);
  } catch (const pipesim::sim::InputError& e) {
    std::cerr << "pipesim: error: " << e.what() << "\n";
    return 2;
  } catch (const pipesim::sim::DeadlockError& e) {
    std::cerr << "pipesim: error: " << e.what() << "\n";
    return 2;
  } catch (const pipesim::sim::InvariantError& e) {
    // pipesim's own bug, not the input's: no number is better than a wrong one.
    std::cerr << "pipesim: internal error: " << e.what() << "\n";
    return 3;
  } catch (const std::bad_alloc&) {
    // The estimates refuse what will not fit before building it; this is what they did not foresee.
    std::cerr << "pipesim: error: out of memory (limit: " << pipesim::sim::memory_limit_text()
              << "); use a smaller job, or a machine or limit with more memory\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "pipesim: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace pipesim::cli
