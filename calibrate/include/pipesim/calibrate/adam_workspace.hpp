// The CPU optimizer step as the replay backends run it: the calibration's Adam kernel over shards as large as
// the calibration's own step (kAdamShardParams, far beyond the caches), each shard split over the threads
// once. Small shards would measure something else: threads started and joined for every shard, and arrays
// that stay in cache (a 1.72 B-parameter step in 1 M-parameter shards ran 4.7x slower than calibrated).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "pipesim/calibrate/cpu_adam.hpp"

namespace pipesim::calibrate {

/// Parameters per Adam shard: the calibration's default step size.
inline constexpr std::size_t kAdamShardParams = std::size_t{64} << 20;

class AdamWorkspace {
 public:
  /// Adam over `params` bf16-gradient parameters on `threads` threads; the buffers (random, sized
  /// min(params, kAdamShardParams)) are allocated on first use and reused.
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
