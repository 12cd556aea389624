// The mean of several steps of one trace (step_profile.hpp: mean_of_steps).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/trace_import/step_profile.hpp"

namespace pipesim::trace_import {

namespace {

/// The mean of one pass over the steps: `of` gives it for each.
template <typename Of>
PassProfile mean_pass(const std::vector<StepProfile>& steps, Of of) {
  PassProfile mean;
  double launches = 0;
  for (const StepProfile& s : steps) {
    const PassProfile& p = of(s);
    mean.gpu_us += p.gpu_us;
    mean.host_wait_us += p.host_wait_us;
    launches += p.launches;
    for (std::size_t c = 0; c < mean.classes.size(); ++c) mean.classes[c] += p.classes[c];
  }
  const auto n = static_cast<double>(steps.size());
  mean.gpu_us /= n;
  mean.host_wait_us /= n;
  mean.launches = static_cast<std::int32_t>(std::llround(launches / n));
  for (double& t : mean.classes) t /= n;
  return mean;
}

/// The step's own totals as a pass, to average them alike.
PassProfile step_totals(const StepProfile& s) {
  PassProfile p;
  p.gpu_us = s.gpu_us;
  p.launches = s.launches;
  p.classes = s.classes;
  p.host_wait_us = s.host_wait_us;
  return p;
}

}  // namespace

StepProfile mean_of_steps(const std::vector<StepProfile>& steps, const std::string& file) {
  if (steps.empty()) throw sim::InputError(file, "/traceEvents", "no step to average");
  StepProfile out = steps.back();
  if (steps.size() == 1) return out;
  for (const StepProfile& s : steps)
    if (s.block_module != out.block_module || s.layers.size() != out.layers.size())
      throw sim::InputError(file, "/traceEvents",
                            fmt::format("{} runs {} blocks of {}, {} {} of {}: the steps averaged must run "
                                        "one model; import one with --step",
                                        s.step, s.layers.size() - 2, s.block_module, out.step,
                                        out.layers.size() - 2, out.block_module));
  const auto n = static_cast<double>(steps.size());
  for (std::size_t l = 0; l < out.layers.size(); ++l) {
    LayerProfile& layer = out.layers[l];
    layer.forward =
        mean_pass(steps, [&](const StepProfile& s) -> const PassProfile& { return s.layers[l].forward; });
    layer.backward =
        mean_pass(steps, [&](const StepProfile& s) -> const PassProfile& { return s.layers[l].backward; });
    layer.forward_flops = 0;
    for (const StepProfile& s : steps) layer.forward_flops += s.layers[l].forward_flops / n;
  }
  out.optimizer = mean_pass(steps, [](const StepProfile& s) -> const PassProfile& { return s.optimizer; });
  out.unattributed =
      mean_pass(steps, [](const StepProfile& s) -> const PassProfile& { return s.unattributed; });
  const PassProfile totals = mean_pass(steps, step_totals);
  out.gpu_us = totals.gpu_us;
  out.launches = totals.launches;
  out.classes = totals.classes;
  out.host_wait_us = totals.host_wait_us;
  out.host_cpu_us = out.replayed_step_us = 0;
  for (const StepProfile& s : steps) {
    out.host_cpu_us += s.host_cpu_us / n;
    out.replayed_step_us += s.replayed_step_us / n;
    out.peak_allocated_bytes = std::max(out.peak_allocated_bytes, s.peak_allocated_bytes);
    out.peak_reserved_bytes = std::max(out.peak_reserved_bytes, s.peak_reserved_bytes);
  }
  out.averaged_steps = static_cast<std::int32_t>(steps.size());
  out.step = fmt::format("{} to {}", steps.front().step, steps.back().step);
  return out;
}

}  // namespace pipesim::trace_import
