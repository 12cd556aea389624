#include "pipesim/calibrate/adam_workspace.hpp"

#include <algorithm>

#include "parallel_for.hpp"
#include "pipesim/calibrate/host_info.hpp"
#include "pipesim/calibrate/operand_values.hpp"

namespace pipesim::calibrate {

std::size_t adam_step_params(std::int64_t last_level_cache_bytes, bool quick) {
  const std::size_t least = quick ? std::size_t{16} << 20 : std::size_t{64} << 20;
  const auto cache = static_cast<std::size_t>(std::max<std::int64_t>(last_level_cache_bytes, 0));
  return std::max(least, kCacheMultiple * cache / static_cast<std::size_t>(kAdamResidentBytesPerParam) + 1);
}

void AdamWorkspace::reserve(std::size_t n, int threads) {
  if (n <= capacity_) return;
  master_.reset(new float[n]);
  m_.reset(new float[n]);
  v_.reset(new float[n]);
  grad_.reset(new std::uint16_t[n]);
  weight_.reset(new std::uint16_t[n]);
  // Touched first by the threads that will stream each block; values of a model in training.
  detail::parallel_for(n, threads, 64, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      master_[i] = 0.02f * operand_value(1, i);
      m_[i] = 1e-4f * operand_value(2, i);
      v_[i] = 1e-8f * (1.5f + operand_value(3, i));
      grad_[i] = float_to_bf16(1e-3f * operand_value(4, i));
      weight_[i] = float_to_bf16(master_[i]);
    }
  });
  capacity_ = n;
}

void AdamWorkspace::step(std::int64_t params, int threads) {
  if (params <= 0) return;
  threads = std::max(1, threads);
  static const std::size_t shard = adam_step_params(last_level_cache_bytes());
  reserve(std::min(static_cast<std::size_t>(params), shard), threads);
  AdamConfig config;
  config.step = ++step_;
  for (std::int64_t left = params; left > 0;) {
    const auto n =
        static_cast<std::size_t>(std::min<std::int64_t>(left, static_cast<std::int64_t>(capacity_)));
    adam_step(config,
              AdamBuffers{master_.get(), m_.get(), v_.get(), grad_.get(), weight_.get(), n, GradType::kBf16},
              best_isa(), threads);
    left -= static_cast<std::int64_t>(n);
  }
}

}  // namespace pipesim::calibrate
