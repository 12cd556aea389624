#include "pipesim/calibrate/cpu_adam.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "parallel_for.hpp"

// Every kernel evaluates the update in the same order with separate multiplies and adds (this file is built
// with -ffp-contract=off), so the scalar, AVX2 and AVX-512 paths agree bit for bit.

namespace pipesim::calibrate {

const char* to_string(GradType t) {
  switch (t) {
    case GradType::kFp32:
      return "fp32";
    case GradType::kFp16:
      return "fp16";
    case GradType::kBf16:
      return "bf16";
  }
  return "?";
}

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

#if defined(__x86_64__)
/// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
#endif

bool isa_supported(Isa isa) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && has_f16c();
    case Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }
  return false;
#else
  return isa == Isa::kScalar;
#endif
}

Isa best_isa() {
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

std::int64_t adam_bytes_per_param(GradType grad_type, bool writes_weight_copy) {
  const std::int64_t grad = grad_type == GradType::kFp32 ? 4 : 2;
  const std::int64_t copy = writes_weight_copy && grad_type != GradType::kFp32 ? 2 : 0;
  return 24 + grad + copy;
}

namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

std::uint16_t float_to_bf16(float f) {
  std::uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float bf16_to_float(std::uint16_t h) {
  return float_of(static_cast<std::uint32_t>(h) << 16);
}

std::uint16_t float_to_fp16(float f) {
  std::uint32_t x = bits_of(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {
    if (x > 0x7f800000u)
      return static_cast<std::uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));  // quiet NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  }
  if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504: infinity
  if (x < 0x38800000u) {                                                    // below 2^-14: subnormal or zero
    if (x < 0x33000000u) return static_cast<std::uint16_t>(sign);
    const std::uint32_t e = x >> 23, mant = (x & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - e;
    std::uint32_t half = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = (x - 0x38000000u) >> 13;
  const std::uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<std::uint16_t>(sign | half);
}

float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    if (m == 0) return float_of(sign);
    // Subnormal: normalize.
    e = 113;
    while (!(m & 0x400u)) {
      m <<= 1;
      --e;
    }
    m &= 0x3ffu;
    return float_of(sign | (e << 23) | (m << 13));
  }
  if (e == 31) return float_of(sign | 0x7f800000u | (m << 13));
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

namespace {

/// Constants of one step, shared by every kernel.
struct StepConstants {
  float b1, omb1, b2, omb2, eps, step_size, inv_bc2_sqrt, lr_wd, grad_scale;
  explicit StepConstants(const AdamConfig& c)
      : b1(c.beta1),
        omb1(1.0f - c.beta1),
        b2(c.beta2),
        omb2(1.0f - c.beta2),
        eps(c.eps),
        step_size(c.lr / (1.0f - std::pow(c.beta1, static_cast<float>(c.step)))),
        inv_bc2_sqrt(1.0f / std::sqrt(1.0f - std::pow(c.beta2, static_cast<float>(c.step)))),
        lr_wd(c.lr * c.weight_decay),
        grad_scale(c.grad_scale) {}
};

float load_grad(const void* grad, GradType t, std::size_t i) {
  switch (t) {
    case GradType::kFp32:
      return static_cast<const float*>(grad)[i];
    case GradType::kFp16:
      return fp16_to_float(static_cast<const std::uint16_t*>(grad)[i]);
    case GradType::kBf16:
      return bf16_to_float(static_cast<const std::uint16_t*>(grad)[i]);
  }
  return 0;
}

void scalar_range(const StepConstants& k, const AdamBuffers& b, std::size_t begin, std::size_t end) {
  for (std::size_t i = begin; i < end; ++i) {
    const float g = load_grad(b.grad, b.grad_type, i) * k.grad_scale;
    const float mi = k.b1 * b.m[i] + k.omb1 * g;
    const float gg = g * g;
    const float vi = k.b2 * b.v[i] + k.omb2 * gg;
    const float d = std::sqrt(vi) * k.inv_bc2_sqrt + k.eps;
    float p = b.master[i];
    const float u = (mi / d) * k.step_size;
    const float w = p * k.lr_wd;
    p = p - u;
    p = p - w;
    b.m[i] = mi;
    b.v[i] = vi;
    b.master[i] = p;
    if (b.weight_out) {
      auto* out = static_cast<std::uint16_t*>(b.weight_out);
      out[i] = b.grad_type == GradType::kFp16 ? float_to_fp16(p) : float_to_bf16(p);
    }
  }
}

#if defined(__x86_64__)

__attribute__((target("avx2,f16c"))) void avx2_range(const StepConstants& k, const AdamBuffers& b,
                                                     std::size_t begin, std::size_t end) {
  const __m256 b1 = _mm256_set1_ps(k.b1), omb1 = _mm256_set1_ps(k.omb1), b2 = _mm256_set1_ps(k.b2),
               omb2 = _mm256_set1_ps(k.omb2), eps = _mm256_set1_ps(k.eps), step = _mm256_set1_ps(k.step_size),
               ibc2 = _mm256_set1_ps(k.inv_bc2_sqrt), lrwd = _mm256_set1_ps(k.lr_wd),
               gs = _mm256_set1_ps(k.grad_scale);
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
  std::size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    __m256 g;
    if (b.grad_type == GradType::kFp32) {
      g = _mm256_loadu_ps(static_cast<const float*>(b.grad) + i);
    } else {
      __m128i h =
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(b.grad) + i));
      g = b.grad_type == GradType::kFp16
              ? _mm256_cvtph_ps(h)
              : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    g = _mm256_mul_ps(g, gs);
    __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(b.m + i)), _mm256_mul_ps(omb1, g));
    __m256 gg = _mm256_mul_ps(g, g);
    __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(b.v + i)), _mm256_mul_ps(omb2, gg));
    __m256 d = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), ibc2), eps);
    __m256 p = _mm256_loadu_ps(b.master + i);
    __m256 u = _mm256_mul_ps(_mm256_div_ps(mi, d), step);
    __m256 w = _mm256_mul_ps(p, lrwd);
    p = _mm256_sub_ps(_mm256_sub_ps(p, u), w);
    _mm256_storeu_ps(b.m + i, mi);
    _mm256_storeu_ps(b.v + i, vi);
    _mm256_storeu_ps(b.master + i, p);
    if (b.weight_out) {
      auto* out = static_cast<std::uint16_t*>(b.weight_out) + i;
      __m128i h;
      if (b.grad_type == GradType::kFp16) {
        h = _mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      } else {
        __m256i x = _mm256_castps_si256(p);
        __m256i r = _mm256_srli_epi32(
            _mm256_add_epi32(x, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(x, 16), one))), 16);
        __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(p, p, _CMP_UNORD_Q));
        r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet), nan);
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
        h = _mm256_castsi256_si128(packed);
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), h);
    }
  }
  scalar_range(k, b, i, end);
}

__attribute__((target("avx512f,avx512bw"))) void avx512_range(const StepConstants& k, const AdamBuffers& b,
                                                              std::size_t begin, std::size_t end) {
  const __m512 b1 = _mm512_set1_ps(k.b1), omb1 = _mm512_set1_ps(k.omb1), b2 = _mm512_set1_ps(k.b2),
               omb2 = _mm512_set1_ps(k.omb2), eps = _mm512_set1_ps(k.eps), step = _mm512_set1_ps(k.step_size),
               ibc2 = _mm512_set1_ps(k.inv_bc2_sqrt), lrwd = _mm512_set1_ps(k.lr_wd),
               gs = _mm512_set1_ps(k.grad_scale);
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
  std::size_t i = begin;
  for (; i + 16 <= end; i += 16) {
    __m512 g;
    if (b.grad_type == GradType::kFp32) {
      g = _mm512_loadu_ps(static_cast<const float*>(b.grad) + i);
    } else {
      __m256i h =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const std::uint16_t*>(b.grad) + i));
      g = b.grad_type == GradType::kFp16
              ? _mm512_cvtph_ps(h)
              : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    g = _mm512_mul_ps(g, gs);
    __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(b.m + i)), _mm512_mul_ps(omb1, g));
    __m512 gg = _mm512_mul_ps(g, g);
    __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(b.v + i)), _mm512_mul_ps(omb2, gg));
    __m512 d = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), ibc2), eps);
    __m512 p = _mm512_loadu_ps(b.master + i);
    __m512 u = _mm512_mul_ps(_mm512_div_ps(mi, d), step);
    __m512 w = _mm512_mul_ps(p, lrwd);
    p = _mm512_sub_ps(_mm512_sub_ps(p, u), w);
    _mm512_storeu_ps(b.m + i, mi);
    _mm512_storeu_ps(b.v + i, vi);
    _mm512_storeu_ps(b.master + i, p);
    if (b.weight_out) {
      auto* out = static_cast<std::uint16_t*>(b.weight_out) + i;
      __m256i h;
      if (b.grad_type == GradType::kFp16) {
        h = _mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      } else {
        __m512i x = _mm512_castps_si512(p);
        __m512i r = _mm512_srli_epi32(
            _mm512_add_epi32(x, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(x, 16), one))), 16);
        __mmask16 nan = _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q);
        r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(x, 16), quiet));
        h = _mm512_cvtepi32_epi16(r);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), h);
    }
  }
  scalar_range(k, b, i, end);
}

#endif

}  // namespace

void adam_step(const AdamConfig& config, const AdamBuffers& b, Isa isa, int threads) {
  if (!isa_supported(isa)) throw std::invalid_argument(std::string("CPU does not support ") + to_string(isa));
  if (threads < 1) throw std::invalid_argument("threads must be >= 1");
  if (b.grad_type == GradType::kFp32 && b.weight_out)
    throw std::invalid_argument(
        "a weight copy is written in the gradient's 16-bit type; fp32 gradients have none");
  const StepConstants k(config);
  detail::parallel_for(b.n, threads, 64, [&](std::size_t begin, std::size_t end) {
    switch (isa) {
#if defined(__x86_64__)
      case Isa::kAvx512:
        avx512_range(k, b, begin, end);
        return;
      case Isa::kAvx2:
        avx2_range(k, b, begin, end);
        return;
#endif
      default:
        scalar_range(k, b, begin, end);
        return;
    }
  });
}

}  // namespace pipesim::calibrate
