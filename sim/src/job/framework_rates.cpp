#include "job/framework_rates.hpp"

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

std::int64_t framework_vocab(const Framework& framework, std::int64_t vocab, std::int32_t tp) {
  const std::int64_t multiple = framework.vocab_padding.value * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

}  // namespace pipesim::sim
