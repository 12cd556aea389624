#include "job/framework_rates.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "pipesim/sim/job/job.hpp"

namespace pipesim::sim {

KernelRate framework_attention_rate(const Framework& framework, const HardwareProfile& hw,
                                    std::int64_t head_dim, std::int64_t seq) {
  const std::string& kernel = framework.attention_kernel.value;
  const auto it = hw.gpu.attention_kernels.find(kernel);
  if (kernel.empty() || it == hw.gpu.attention_kernels.end()) return {};
  KernelRate rate = attention_rate(it->second, head_dim, seq);
  if (framework.attention_mask.value == "dense") {  // every score computed: half the useful rate
    rate.forward_tflops /= 2;
    rate.backward_tflops /= 2;
  }
  return rate;
}

std::shared_ptr<const Framework> with_attention_kernel(std::shared_ptr<const Framework> framework,
                                                       const std::string& kernel) {
  const std::string named = kernel == kGemmRateKernel ? "" : kernel;
  if (framework->attention_kernel.value == named) return framework;
  Framework changed = *framework;
  changed.attention_kernel = {named, "--attention-kernel"};
  return std::make_shared<const Framework>(std::move(changed));
}

std::string attention_kernel_error(const JobOptions& job, const HardwareProfile& hw) {
  if (!job.attention_kernel || *job.attention_kernel == kGemmRateKernel ||
      hw.gpu.attention_kernels.count(*job.attention_kernel))
    return "";
  std::string valid(kGemmRateKernel);
  for (const auto& [name, rates] : hw.gpu.attention_kernels) valid += ", " + name;
  return fmt::format("'{}' has no published rate on {}; valid: {}", *job.attention_kernel, hw.name, valid);
}

Duration framework_tp_collective_host_ns(const Framework& framework, bool sequence_parallel,
                                         Duration dispatch_ns) {
  const HostCollectiveUs& us = framework.host_collective_us.value;
  const double pair_us = sequence_parallel ? us.all_gather + us.reduce_scatter : us.all_reduce;
  if (pair_us <= 0) return 0;
  const Duration launches = (sequence_parallel ? 2 : 1) * dispatch_ns;
  return std::max<Duration>(0, duration_from_us(pair_us) - launches);
}

void set_framework_costs(const Framework& framework, const ScheduleInput& in, std::int64_t head_dim,
                         CostOptions& co) {
  co.composition = framework.kernels;
  co.attention_rate = framework_attention_rate(framework, in.hw, head_dim, in.seq);
  co.tp_collective_host_ns =
      framework_tp_collective_host_ns(framework, co.sequence_parallel, in.host_dispatch_ns);
  co.tp_shard_first_gemms =
      framework.tp_async_gemms.value == "shard-first" && in.overlap_tp_backward && co.sequence_parallel;
  co.selective_every_other_linear = framework.selective_recompute.value == "every-other-linear";
}

std::int64_t framework_vocab(const Framework& framework, std::int64_t vocab, std::int32_t tp) {
  const std::int64_t multiple = framework.vocab_padding.value * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

}  // namespace pipesim::sim
