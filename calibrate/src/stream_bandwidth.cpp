#include "pipesim/calibrate/stream_bandwidth.hpp"

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "parallel_for.hpp"
#include "pipesim/calibrate/cpu_adam.hpp"
#include "pipesim/calibrate/operand_values.hpp"

// Tuned-STREAM practice: non-temporal stores where the CPU has them, so the destination is written without
// first being read (no write-allocate traffic) and the counted bytes are the bytes that cross the bus.

namespace pipesim::calibrate {

namespace {

void copy_scalar(double* a, const double* b, std::size_t begin, std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) a[i] = b[i];
}
void triad_scalar(double* a, const double* b, const double* c, double s, std::size_t begin, std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) a[i] = b[i] + s * c[i];
}

void update_scalar(double* a, const double* b, double s, std::size_t begin, std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) a[i] = a[i] + s * b[i];
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void update_avx512(double* a, const double* b, double s, std::size_t begin,
                                                      std::size_t end) {
  const __m512d vs = _mm512_set1_pd(s);
  std::size_t i = begin;
  for (; i + 8 <= end; i += 8)
    _mm512_storeu_pd(a + i, _mm512_add_pd(_mm512_loadu_pd(a + i), _mm512_mul_pd(vs, _mm512_loadu_pd(b + i))));
  update_scalar(a, b, s, i, end);
}

__attribute__((target("avx2"))) void update_avx2(double* a, const double* b, double s, std::size_t begin,
                                                 std::size_t end) {
  const __m256d vs = _mm256_set1_pd(s);
  std::size_t i = begin;
  for (; i + 4 <= end; i += 4)
    _mm256_storeu_pd(a + i, _mm256_add_pd(_mm256_loadu_pd(a + i), _mm256_mul_pd(vs, _mm256_loadu_pd(b + i))));
  update_scalar(a, b, s, i, end);
}

/// First index >= begin at which a is 64-byte aligned (or end).
std::size_t aligned_start(const double* a, std::size_t begin, std::size_t end) {
  std::size_t i = begin;
  while (i < end && (reinterpret_cast<std::uintptr_t>(a + i) & 63u) != 0) ++i;
  return i;
}

__attribute__((target("avx512f"))) void copy_avx512(double* a, const double* b, std::size_t begin,
                                                    std::size_t end) {
  std::size_t i = aligned_start(a, begin, end);
  copy_scalar(a, b, begin, i);
  for (; i + 8 <= end; i += 8) _mm512_stream_pd(a + i, _mm512_loadu_pd(b + i));
  copy_scalar(a, b, i, end);
  _mm_sfence();
}

__attribute__((target("avx512f"))) void triad_avx512(double* a, const double* b, const double* c, double s,
                                                     std::size_t begin, std::size_t end) {
  const __m512d vs = _mm512_set1_pd(s);
  std::size_t i = aligned_start(a, begin, end);
  triad_scalar(a, b, c, s, begin, i);
  for (; i + 8 <= end; i += 8)
    _mm512_stream_pd(a + i, _mm512_add_pd(_mm512_loadu_pd(b + i), _mm512_mul_pd(vs, _mm512_loadu_pd(c + i))));
  triad_scalar(a, b, c, s, i, end);
  _mm_sfence();
}

__attribute__((target("avx2"))) void copy_avx2(double* a, const double* b, std::size_t begin,
                                               std::size_t end) {
  std::size_t i = aligned_start(a, begin, end);
  copy_scalar(a, b, begin, i);
  for (; i + 4 <= end; i += 4) _mm256_stream_pd(a + i, _mm256_loadu_pd(b + i));
  copy_scalar(a, b, i, end);
  _mm_sfence();
}

__attribute__((target("avx2"))) void triad_avx2(double* a, const double* b, const double* c, double s,
                                                std::size_t begin, std::size_t end) {
  const __m256d vs = _mm256_set1_pd(s);
  std::size_t i = aligned_start(a, begin, end);
  triad_scalar(a, b, c, s, begin, i);
  for (; i + 4 <= end; i += 4)
    _mm256_stream_pd(a + i, _mm256_add_pd(_mm256_loadu_pd(b + i), _mm256_mul_pd(vs, _mm256_loadu_pd(c + i))));
  triad_scalar(a, b, c, s, i, end);
  _mm_sfence();
}
#endif

}  // namespace

void stream_copy(double* a, const double* b, std::size_t n, int threads) {
  const Isa isa = best_isa();
  detail::parallel_for(n, threads, 64, [&](std::size_t begin, std::size_t end) {
#if defined(__x86_64__)
    if (isa == Isa::kAvx512) return copy_avx512(a, b, begin, end);
    if (isa == Isa::kAvx2) return copy_avx2(a, b, begin, end);
#endif
    copy_scalar(a, b, begin, end);
  });
}

void stream_triad(double* a, const double* b, const double* c, double scalar, std::size_t n, int threads) {
  const Isa isa = best_isa();
  detail::parallel_for(n, threads, 64, [&](std::size_t begin, std::size_t end) {
#if defined(__x86_64__)
    if (isa == Isa::kAvx512) return triad_avx512(a, b, c, scalar, begin, end);
    if (isa == Isa::kAvx2) return triad_avx2(a, b, c, scalar, begin, end);
#endif
    triad_scalar(a, b, c, scalar, begin, end);
  });
}

void stream_update(double* a, const double* b, double scalar, std::size_t n, int threads) {
  const Isa isa = best_isa();
  detail::parallel_for(n, threads, 64, [&](std::size_t begin, std::size_t end) {
#if defined(__x86_64__)
    if (isa == Isa::kAvx512) return update_avx512(a, b, scalar, begin, end);
    if (isa == Isa::kAvx2) return update_avx2(a, b, scalar, begin, end);
#endif
    update_scalar(a, b, scalar, begin, end);
  });
}

void parallel_fill_random(double* x, std::size_t n, std::uint64_t seed, int threads) {
  detail::parallel_for(n, threads, 64, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) x[i] = operand_value(seed, i);
  });
}

}  // namespace pipesim::calibrate
