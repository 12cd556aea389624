// A kernel that keeps one GPU thread busy for a given time of the GPU's global timer: the calibration queues
// kernels behind it, the replay times fixed-duration ops with it. Included only by .cu files.
#pragma once

namespace pipesim::calibrate {
namespace {

__global__ void spin_kernel(long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (static_cast<long long>(now - start) < ns);
}

}  // namespace
}  // namespace pipesim::calibrate
