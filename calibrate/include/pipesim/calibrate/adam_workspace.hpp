// The CPU optimizer step as the replay backends run it: the calibration's Adam kernel over shards as large as
// the calibration's own step (adam_step_params: far beyond the caches), each shard split over the threads
// once. Small shards would measure something else: threads started and joined for every shard, and arrays
// that stay in cache (a 1.72 B-parameter step in 1 M-parameter shards ran 4.7x slower than calibrated).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "pipesim/calibrate/cpu_adam.hpp"

namespace pipesim::calibrate {

/// Bytes an Adam step keeps per parameter: fp32 master weight and two moments, bf16 gradient and weight copy.
inline constexpr std::int64_t kAdamResidentBytesPerParam = 4 + 4 + 4 + 2 + 2;

/// Parameters of one calibrated Adam step on a machine with this last-level cache: at least 64 M (16 M when
/// quick), and enough that its arrays exceed kCacheMultiple x the cache.
std::size_t adam_step_params(std::int64_t last_level_cache_bytes, bool quick = false);

class AdamWorkspace {
 public:
  /// Adam over `params` bf16-gradient parameters on `threads` threads; the buffers (random, sized
  /// min(params, adam_step_params of this machine)) are allocated on first use and reused.
  void step(std::int64_t params, int threads);
  std::size_t capacity() const { return capacity_; }

 private:
  void reserve(std::size_t n, int threads);
  std::size_t capacity_ = 0;
  std::unique_ptr<float[]> master_, m_, v_;
  std::unique_ptr<std::uint16_t[]> grad_, weight_;
  int step_ = 0;
};

}  // namespace pipesim::calibrate
