// STREAM-style host memory bandwidth kernels over doubles, split over threads in contiguous blocks:
// copy a = b and triad a = b + s*c (non-temporal stores where available), and update a = a + s*b, the
// in-place read-modify-write pattern optimizer kernels use. Bytes counted as STREAM does: 16 per element for
// copy, 24 for triad and update.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pipesim::calibrate {

void stream_copy(double* a, const double* b, std::size_t n, int threads);
void stream_triad(double* a, const double* b, const double* c, double scalar, std::size_t n, int threads);
void stream_update(double* a, const double* b, double scalar, std::size_t n, int threads);
/// Fills x[i] = operand_value(seed, i) on `threads` threads (first touch places pages near the threads that
/// will use them).
void parallel_fill_random(double* x, std::size_t n, std::uint64_t seed, int threads);

}  // namespace pipesim::calibrate
