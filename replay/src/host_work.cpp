#include "host_work.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "pipesim/calibrate/operand_values.hpp"

namespace pipesim::replay {

namespace {

constexpr int kLanes = 64;  // independent FMA chains: enough to keep the FPUs busy
volatile float g_sink = 0;  // keeps the FMA work from being optimized away

template <class F>
double best_rate(double work, F run) {
  double best = 0;
  for (int k = 0; k < 5; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, work / s);
  }
  return best;
}

}  // namespace

void fma_work(double flops) {
  alignas(64) float acc[kLanes];
  for (int k = 0; k < kLanes; ++k) acc[k] = static_cast<float>(k) * 1e-3f;
  const auto rounds = static_cast<std::int64_t>(flops / (2.0 * kLanes));
  for (std::int64_t r = 0; r < rounds; ++r)
    for (int k = 0; k < kLanes; ++k) acc[k] = acc[k] * 0.999999f + 1e-7f;
  float sum = 0;
  for (float a : acc) sum += a;
  g_sink = g_sink + sum;
}

double measure_fma_rate() {
  return best_rate(2e8, [] { fma_work(2e8); });
}

void busy_wait(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
  }
}

void CopyBuffers::copy(double bytes) {
  auto left = static_cast<std::int64_t>(bytes);
  if (left <= 0) return;
  if (from_.empty()) {
    from_.resize(kBytes);
    to_.resize(kBytes);
    for (std::size_t i = 0; i < kBytes; ++i) {
      from_[i] = static_cast<char>(calibrate::operand_byte(9, i));
      to_[i] = static_cast<char>(calibrate::operand_byte(10, i));
    }
  }
  while (left > 0) {
    const auto n = static_cast<std::size_t>(std::min<std::int64_t>(left, static_cast<std::int64_t>(kBytes)));
    std::memcpy(to_.data(), from_.data(), n);
    left -= static_cast<std::int64_t>(n);
  }
}

double measure_copy_rate() {
  CopyBuffers b;
  b.copy(1);  // allocate and touch before timing
  const double bytes = 64.0 * CopyBuffers::kBytes;
  return best_rate(bytes, [&] { b.copy(bytes); });
}

}  // namespace pipesim::replay
