// The real work the host replay backend does for an op, and the rates it does it at on this CPU (measured,
// for the host backend's own hardware profile).
#pragma once

#include <cstddef>
#include <vector>

namespace pipesim::replay {

/// `flops` of fused multiply-adds (2 FLOPs each) over independent accumulators, on the calling thread.
void fma_work(double flops);
/// FLOP/s of fma_work on one thread (best of a few short runs).
double measure_fma_rate();
void busy_wait(double seconds);

/// Two buffers of one stream; copies of any size loop over them.
class CopyBuffers {
 public:
  static constexpr std::size_t kBytes = std::size_t{4} << 20;
  void copy(double bytes);  ///< memcpy `bytes` in all (allocates on first use)

 private:
  std::vector<char> from_, to_;
};

/// Bytes per second CopyBuffers::copy moves on one thread (best of a few runs).
double measure_copy_rate();

}  // namespace pipesim::replay
