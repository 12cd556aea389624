#include "pipesim/trace_import/workload_file.hpp"

#include <algorithm>
#include <cmath>

namespace pipesim::trace_import {

namespace {

/// Milliseconds to the nanosecond the trace resolves (written as the shortest decimal).
double ms(double us) {
  return std::round(us * 1e3) / 1e6;
}

/// What a layer holds on the GPU, as the workload writes it.
struct LayerMemory {
  std::int64_t params = 0;   ///< bytes of its weights, gradients and optimizer state
  std::int64_t grads = 0;    ///< of them, the gradients the step makes and frees
  std::int64_t saved = 0;    ///< kept from its forward for its backward
  std::int64_t working = 0;  ///< its backward's own working memory
  std::int64_t output = 0;   ///< what it passes on to the next layer
};

nlohmann::ordered_json layer_entry(const std::string& role, const PassProfile& fwd, const PassProfile& bwd,
                                   const LayerMemory& memory, double flops, std::int32_t repeat) {
  nlohmann::ordered_json e{{"role", role},
                           {"fwd_ms", ms(fwd.gpu_us)},
                           {"bwd_ms", ms(bwd.gpu_us)},
                           {"fwd_kernels", fwd.launches},
                           {"bwd_kernels", bwd.launches}};
  e["fwd_host_wait_ms"] = ms(fwd.host_wait_us);
  e["bwd_host_wait_ms"] = ms(bwd.host_wait_us);
  if (memory.params > 0) e["param_bytes"] = memory.params;
  if (memory.grads > 0) e["step_grad_bytes"] = memory.grads;
  if (memory.saved > 0) e["activation_bytes"] = memory.saved;
  if (memory.working > 0) e["backward_extra_bytes"] = memory.working;
  if (memory.output > 0) e["output_bytes"] = memory.output;
  if (flops > 0) e["fwd_gflop"] = std::round(flops / 1e3) / 1e6;
  if (repeat > 1) e["repeat"] = repeat;
  return e;
}

nlohmann::ordered_json classes_json(const ClassTimes& t) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (int c = 0; c < kKernelClasses; ++c)
    j[to_string(static_cast<KernelClass>(c))] = ms(t[static_cast<std::size_t>(c)]);
  return j;
}

nlohmann::ordered_json pass_json(const PassProfile& p) {
  return {{"gpu_ms", ms(p.gpu_us)},
          {"launches", p.launches},
          {"host_wait_ms", ms(p.host_wait_us)},
          {"classes_ms", classes_json(p.classes)}};
}

}  // namespace

nlohmann::ordered_json workload_json(const StepProfile& step, const WorkloadOptions& options) {
  nlohmann::ordered_json w{{"format", "pipesim-workload"}, {"version", 1}, {"name", options.name}};
  if (!options.source.empty()) w["source"] = options.source;
  if (options.seq > 0) w["seq"] = options.seq;
  if (options.microbatch_size > 0) w["microbatch_size"] = options.microbatch_size;
  const auto traced = static_cast<std::int32_t>(step.layers.size()) - 2;
  const std::int32_t blocks = options.blocks > 0 ? options.blocks : traced;
  const LayerProfile& embedding = step.layers.front();
  const LayerProfile& head = step.layers.back();
  const StepLaunches launches = step_launches(step);
  const std::int64_t head_params = head.params + (options.tied_embeddings ? 0 : step.head_matrix);
  std::int64_t block_params = 0;
  for (std::int32_t i = 1; i <= traced; ++i) block_params += step.layers[static_cast<std::size_t>(i)].params;
  // The optimizer's step scales with the parameters it updates: a deeper model of the traced blocks takes
  // their share that much more often.
  const double traced_params = static_cast<double>(embedding.params + block_params + head_params);
  const double written_params = static_cast<double>(embedding.params + head_params) +
                                static_cast<double>(block_params) * blocks / traced;
  w["optimizer_ms"] = ms(step.optimizer.gpu_us * (traced_params > 0 ? written_params / traced_params : 1.0));
  // The CPU's work before the optimizer's kernels (grouping the parameters' tensors) does not grow with them.
  if (step.optimizer.host_wait_us > 0) w["optimizer_host_wait_ms"] = ms(step.optimizer.host_wait_us);
  const std::int64_t bytes = options.bytes_per_param;
  // Gradients the step makes and frees, per parameter as measured (fp32 gradients: 4), at most the bytes a
  // parameter holds.
  const std::int64_t grad_bytes =
      traced_params > 0 ? std::min<std::int64_t>(
                              bytes, std::llround(static_cast<double>(step.step_grad_bytes) / traced_params))
                        : 0;
  auto memory = [&](std::int64_t params, const LayerProfile& l) {
    return LayerMemory{params * bytes, params * grad_bytes, l.saved_bytes, l.backward_working_bytes,
                       l.output_bytes};
  };
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  layers.push_back(layer_entry("embedding", embedding.forward, embedding.backward,
                               memory(embedding.params, embedding), embedding.forward_flops, 1));
  if (options.blocks > 0) {
    // The traced blocks' mean, launches rounded to the nearest whole one.
    PassProfile fwd, bwd;
    double flops = 0;
    LayerProfile mean;             // kept and passed-on bytes: the blocks' mean; working memory: their most
    double saved = 0, output = 0;  // in double: an untrusted trace's sums may pass int64's end
    for (std::int32_t i = 1; i <= traced; ++i) {
      const LayerProfile& l = step.layers[static_cast<std::size_t>(i)];
      saved += static_cast<double>(l.saved_bytes);
      output += static_cast<double>(l.output_bytes);
      mean.backward_working_bytes = std::max(mean.backward_working_bytes, l.backward_working_bytes);
      flops += l.forward_flops / traced;
      fwd.gpu_us += l.forward.gpu_us / traced;
      bwd.gpu_us += l.backward.gpu_us / traced;
      fwd.host_wait_us += l.forward.host_wait_us / traced;
      bwd.host_wait_us += l.backward.host_wait_us / traced;
    }
    fwd.launches = launches.block.forward;
    bwd.launches = launches.block.backward;
    auto mean_of = [&](double sum) {
      return static_cast<std::int64_t>(std::min(9e18, std::round(sum / traced)));
    };
    mean.saved_bytes = mean_of(saved);
    mean.output_bytes = mean_of(output);
    layers.push_back(
        layer_entry("block", fwd, bwd, memory(block_params / traced, mean), flops, options.blocks));
  } else {
    for (std::int32_t i = 1; i <= traced; ++i) {
      const LayerProfile& l = step.layers[static_cast<std::size_t>(i)];
      layers.push_back(layer_entry("block", l.forward, l.backward, memory(l.params, l), l.forward_flops, 1));
    }
  }
  PassProfile head_bwd = head.backward;
  head_bwd.gpu_us += step.unattributed.gpu_us;
  head_bwd.launches = launches.head.backward;
  head_bwd.host_wait_us += step.unattributed.host_wait_us;
  layers.push_back(
      layer_entry("head", head.forward, head_bwd, memory(head_params, head), head.forward_flops, 1));
  w["layers"] = layers;
  return w;
}

nlohmann::ordered_json step_report(const StepProfile& step) {
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const LayerProfile& l : step.layers) {
    layers.push_back({{"role", l.role},
                      {"params", l.params},
                      {"forward_gflop", l.forward_flops / 1e9},
                      {"forward", pass_json(l.forward)},
                      {"backward", pass_json(l.backward)}});
    if (step.has_saved_bytes) {
      layers.back()["saved_bytes"] = l.saved_bytes;
      layers.back()["backward_working_bytes"] = l.backward_working_bytes;
      layers.back()["output_bytes"] = l.output_bytes;
    }
  }
  return {{"step", step.step.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(step.step)},
          {"marked_steps", step.marked_steps},
          {"averaged_steps", step.averaged_steps},
          {"block_module", step.block_module},
          {"head_matrix_params", step.head_matrix},
          {"blocks", static_cast<std::int64_t>(step.layers.size()) - 2},
          {"gpu_ms", ms(step.gpu_us)},
          {"launches", step.launches},
          {"host_wait_ms", ms(step.host_wait_us)},
          {"host_cpu_ms", ms(step.host_cpu_us)},
          {"replayed_step_ms", ms(step.replayed_step_us)},
          {"profiler_op_us", step.profiler_cost.op_us},
          {"profiler_python_us", step.profiler_cost.python_us},
          {"classes_ms", classes_json(step.classes)},
          {"optimizer", pass_json(step.optimizer)},
          {"unattributed", pass_json(step.unattributed)},
          {"step_grad_bytes", step.step_grad_bytes},
          {"memory_source", step.memory_source.empty() ? nlohmann::ordered_json()
                                                       : nlohmann::ordered_json(step.memory_source)},
          {"memory_events", step.memory_events},
          {"allocated_at_start_bytes", step.allocated_at_start_bytes},
          {"peak_allocated_bytes", step.peak_allocated_bytes},
          {"peak_reserved_bytes", step.peak_reserved_bytes},
          {"layers", layers}};
}

}  // namespace pipesim::trace_import
