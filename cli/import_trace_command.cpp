#include "import_trace_command.hpp"

#include <cmath>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "pipesim/calibrate/calibrate.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/core/output_file.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/job/framework.hpp"
#include "pipesim/sim/workload/kernel_composition.hpp"
#include "pipesim/trace_import/execution_trace.hpp"
#include "pipesim/trace_import/kineto_trace.hpp"
#include "pipesim/trace_import/saved_activations.hpp"
#include "pipesim/trace_import/step_profile.hpp"
#include "pipesim/trace_import/trace_fit.hpp"
#include "pipesim/trace_import/workload_file.hpp"

namespace pipesim::cli {

namespace {

/// "qwen3.kineto.json.gz" -> "qwen3".
std::string stem_of(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (const char* suffix : {".gz", ".json", ".kineto", ".trace", ".pt"})
    if (name.size() > std::string(suffix).size() && name.ends_with(suffix))
      name.resize(name.size() - std::string(suffix).size());
  return name;
}

void print_table(const trace_import::StepProfile& step, const std::string& out) {
  using trace_import::KernelClass;
  if (step.averaged_steps > 1)
    std::cout << fmt::format("the mean of the {} steps the trace marks, {}\n", step.averaged_steps,
                             step.step);
  else if (!step.step.empty())
    std::cout << fmt::format("{} of the {} steps the trace marks\n", step.step, step.marked_steps);
  std::cout << fmt::format("{} blocks of {}; {} launches, {:.3f} ms of GPU time\n", step.layers.size() - 2,
                           step.block_module, step.launches, step.gpu_us / 1e3);
  std::cout << fmt::format("{:<12} {:>12} {:>9} {:>12} {:>9}{}\n", "layer", "forward ms", "launches",
                           "backward ms", "launches", step.has_saved_bytes ? "     kept MiB" : "");
  for (std::size_t i = 0; i < step.layers.size(); ++i) {
    const auto& l = step.layers[i];
    const std::string name = l.role == "block" ? fmt::format("block {}", i - 1) : l.role;
    const std::string kept =
        step.has_saved_bytes ? fmt::format(" {:>12.1f}", static_cast<double>(l.saved_bytes) / (1 << 20)) : "";
    std::cout << fmt::format("{:<12} {:>12.3f} {:>9} {:>12.3f} {:>9}{}\n", name, l.forward.gpu_us / 1e3,
                             l.forward.launches, l.backward.gpu_us / 1e3, l.backward.launches, kept);
  }
  std::cout << fmt::format("{:<12} {:>12.3f} {:>9}\n", "optimizer", step.optimizer.gpu_us / 1e3,
                           step.optimizer.launches);
  if (step.unattributed.launches > 0)
    std::cout << fmt::format("{:<12} {:>12.3f} {:>9} (counted with the head's backward)\n", "unattributed",
                             step.unattributed.gpu_us / 1e3, step.unattributed.launches);
  std::cout << fmt::format(
      "the GPU waited {:.3f} ms for the CPU to launch its work (the CPU's time less the profiler's own, "
      "{:.2f} us an op and {:.2f} a Python frame): replayed step {:.3f} ms\n",
      step.host_wait_us / 1e3, step.profiler_cost.op_us, step.profiler_cost.python_us,
      step.replayed_step_us / 1e3);
  if (step.memory_events > 0)
    std::cout << fmt::format(
        "the GPU's allocated memory ({} memory events): {:.1f} MiB before the step, {:.1f} MiB at its "
        "peak{}\n",
        step.memory_events, static_cast<double>(step.allocated_at_start_bytes) / (1 << 20),
        static_cast<double>(step.peak_allocated_bytes) / (1 << 20),
        step.peak_reserved_bytes > 0 ? fmt::format(" ({:.1f} MiB reserved by the caching allocator)",
                                                   static_cast<double>(step.peak_reserved_bytes) / (1 << 20))
                                     : "");
  if (step.has_saved_bytes)
    std::cout << fmt::format("kept MiB: what each layer's forward holds for the backward, from the {}\n",
                             step.memory_source);
  std::cout << "kernel time by class:";
  for (int c = 0; c < trace_import::kKernelClasses; ++c) {
    const double t = step.classes[static_cast<std::size_t>(c)];
    if (t > 0)
      std::cout << fmt::format(" {} {:.3f} ms ({:.1f} %);", to_string(static_cast<KernelClass>(c)), t / 1e3,
                               100 * t / step.gpu_us);
  }
  std::cout << fmt::format("\nwrote {}\n", out);
}

}  // namespace

int run_import_trace(const ImportTraceOptions& o) {
  const trace_import::KinetoTrace trace = trace_import::read_kineto_trace(o.trace);
  trace_import::ProfilerCost cost{o.profiler_op_us, o.profiler_python_us};
  const std::int64_t which = o.all_steps ? trace_import::kAllSteps : o.step;
  if (o.measured_step_ms > 0)
    cost = trace_import::fit_profiler_cost(trace, which, o.measured_step_ms * 1e3, cost);
  trace_import::StepProfile step = trace_import::profile_step(trace, which, cost);
  if (!o.et.empty()) trace_import::add_saved_activations(trace_import::read_execution_trace(o.et), step);
  trace_import::WorkloadOptions w;
  w.name = o.name.empty() ? stem_of(o.trace) : o.name;
  w.source = fmt::format("pipesim import-trace {}", std::filesystem::path(o.trace).filename().string());
  w.blocks = o.blocks;
  w.seq = o.seq;
  w.microbatch_size = o.microbatch_size;
  w.tied_embeddings = o.tied_embeddings;
  w.bytes_per_param = o.bytes_per_param;
  sim::write_output_file(o.out, sim::json_text(trace_import::workload_json(step, w), 2) + "\n");
  if (o.format == "json")
    std::cout << sim::json_text(trace_import::step_report(step), 2) << "\n";
  else
    print_table(step, o.out);
  return 0;
}

int run_calibrate_from_trace(const std::string& trace_file, const std::string& base, const std::string& out,
                             const std::string& name, const std::string& dtype, const std::string& framework,
                             const std::string& framework_out) {
  const sim::Framework ran = sim::load_framework(framework.empty() ? "megatron-core" : framework);
  const double share = ran.kernels ? ran.kernels->elementwise_efficiency : 1.0;
  const trace_import::KinetoTrace trace = trace_import::read_kineto_trace(trace_file);
  std::string base_name = base;
  if (base_name.empty()) base_name = calibrate::base_for_gpu(trace.device);
  if (base_name.empty()) base_name = calibrate::kFallbackBase;
  const sim::HardwareProfile base_hw = sim::load_hardware_profile(base_name);
  if (!base_hw.gpu.peak_tflops.count(dtype))
    throw sim::InputError(sim::Option{"dtype"}, "", fmt::format("{} has no {} peak", base_hw.name, dtype));
  const trace_import::TraceFit fit = trace_import::fit_profile(
      trace, base_hw, dtype, name.empty() ? std::filesystem::path(out).stem().string() : name, share);
  sim::write_output_file(out, sim::hardware_profile_to_json(fit.profile));
  std::cout << fmt::format("{}: {} on {} (base {})\n", trace_file,
                           trace.device.empty() ? "a GPU" : trace.device, dtype, base_hw.name);
  for (const std::string& n : fit.notes) std::cout << "  " << n << "\n";
  std::cout << fmt::format("wrote {}\n", out);
  if (!framework_out.empty()) {
    if (fit.host_dispatch_us <= 0)
      throw sim::InputError(trace_file, "/traceEvents",
                            "no launch of GPU work to time the CPU by; --framework-out needs one");
    const std::string base_framework = framework.empty() ? "megatron-core" : framework;
    const std::string trace_name = std::filesystem::path(trace_file).filename().string();
    sim::FrameworkRefit refit;
    refit.host_dispatch_us = std::round(fit.host_dispatch_us * 10) / 10;
    refit.host_dispatch_source = fmt::format(
        "the CPU's time a launch in the PyTorch profiler trace {}, the profiler's own cost per recorded "
        "event taken out (pipesim calibrate --from-trace; docs/trace-import.md)",
        trace_name);
    std::string launches_said;
    try {
      const trace_import::StepProfile step = trace_import::profile_step(trace);
      const trace_import::StepLaunches n = trace_import::step_launches(step);
      const std::string counted = fmt::format("launches a pass counted in the PyTorch profiler trace {} ({}",
                                              trace_name, step.step.empty() ? "the whole trace" : step.step);
      auto layer = [&](const trace_import::LayerLaunchCounts& c, const std::string& which) {
        return sim::LayerLaunches{c.forward, c.backward,
                                  fmt::format("{}; {}; pipesim calibrate --from-trace)", counted, which)};
      };
      refit.embedding = layer(n.embedding, "its embedding's");
      refit.block = layer(
          n.block, fmt::format("the mean of its {} {} blocks", step.layers.size() - 2, step.block_module));
      refit.head = layer(n.head, "its head's, the backward with what ran outside every layer");
      launches_said = fmt::format(
          "launches a block {} forward, {} backward; embedding {} and {}; head {} and {}", n.block.forward,
          n.block.backward, n.embedding.forward, n.embedding.backward, n.head.forward, n.head.backward);
    } catch (const sim::InputError& e) {  // a trace without its layers still times the CPU
      launches_said = fmt::format("its layers' launches kept: {}", e.message());
    }
    const std::string fitted = std::filesystem::path(framework_out).stem().string();
    sim::write_output_file(framework_out, sim::refit_framework(base_framework, fitted, refit));
    std::cout << fmt::format("wrote {} ({} with host_dispatch_us {:.1f}; {})\n", framework_out,
                             base_framework, fit.host_dispatch_us, launches_said);
  }
  return 0;
}

}  // namespace pipesim::cli
