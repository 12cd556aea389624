#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "pipesim/calibrate/cpu_adam.hpp"

namespace pipesim::calibrate {
namespace {

struct Shard {
  std::vector<float> master, m, v, g32;
  std::vector<std::uint16_t> g16, out;
  Shard(std::size_t n, GradType t, unsigned seed) : master(n), m(n), v(n), g32(n), g16(n), out(n, 0) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> w(0.0f, 0.02f), g(0.0f, 1e-3f);
    for (std::size_t i = 0; i < n; ++i) {
      master[i] = w(rng);
      m[i] = g(rng) * 0.1f;
      v[i] = std::fabs(g(rng)) * 1e-3f;
      g32[i] = g(rng);
      g16[i] = t == GradType::kFp16 ? float_to_fp16(g32[i]) : float_to_bf16(g32[i]);
    }
  }
  AdamBuffers buffers(GradType t) {
    return {master.data(),
            m.data(),
            v.data(),
            t == GradType::kFp32 ? static_cast<const void*>(g32.data()) : g16.data(),
            t == GradType::kFp32 ? nullptr : out.data(),
            master.size(),
            t};
  }
};

TEST(CpuAdam, EveryIsaAndThreadCountGivesBitIdenticalResults) {
  const std::size_t n = 4096 + 77;  // a tail that no vector width divides
  for (GradType t : {GradType::kFp32, GradType::kFp16, GradType::kBf16}) {
    Shard ref(n, t, 7);
    AdamConfig cfg;
    for (int step = 1; step <= 3; ++step) {
      cfg.step = step;
      adam_step(cfg, ref.buffers(t), Isa::kScalar, 1);
    }
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
      if (!isa_supported(isa)) {
        GTEST_LOG_(INFO) << to_string(isa) << " not supported by this CPU; skipped";
        continue;
      }
      for (int threads : {1, 3}) {
        Shard s(n, t, 7);
        for (int step = 1; step <= 3; ++step) {
          cfg.step = step;
          adam_step(cfg, s.buffers(t), isa, threads);
        }
        ASSERT_EQ(0, std::memcmp(s.master.data(), ref.master.data(), n * 4))
            << to_string(isa) << " " << to_string(t);
        ASSERT_EQ(0, std::memcmp(s.m.data(), ref.m.data(), n * 4));
        ASSERT_EQ(0, std::memcmp(s.v.data(), ref.v.data(), n * 4));
        ASSERT_EQ(s.out, ref.out) << to_string(isa) << " " << to_string(t);
      }
    }
  }
}

TEST(CpuAdam, MatchesTheAdamWFormulaInDoublePrecision) {
  const std::size_t n = 1000;
  Shard s(n, GradType::kFp32, 3);
  std::vector<double> p(s.master.begin(), s.master.end()), m(s.m.begin(), s.m.end()),
      v(s.v.begin(), s.v.end());
  AdamConfig c;
  for (int step = 1; step <= 5; ++step) {
    c.step = step;
    adam_step(c, s.buffers(GradType::kFp32), best_isa(), 2);
    for (std::size_t i = 0; i < n; ++i) {
      double g = s.g32[i];
      m[i] = c.beta1 * m[i] + (1 - c.beta1) * g;
      v[i] = c.beta2 * v[i] + (1 - c.beta2) * g * g;
      double mh = m[i] / (1 - std::pow(c.beta1, step)), vh = v[i] / (1 - std::pow(c.beta2, step));
      p[i] -= c.lr * (mh / (std::sqrt(vh) + c.eps) + c.weight_decay * p[i]);
    }
  }
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(s.master[i], p[i], 1e-6 * std::max(1.0, std::fabs(p[i])));
  // The 16-bit weight copy is the rounded master weight.
  Shard b(64, GradType::kBf16, 5);
  adam_step(c, b.buffers(GradType::kBf16), best_isa(), 1);
  for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(b.out[i], float_to_bf16(b.master[i]));
}

TEST(CpuAdam, BytesPerParam) {
  EXPECT_EQ(adam_bytes_per_param(GradType::kBf16, true), 28);  // fp32 master, m, v read and written, bf16 gradient read: ~28 B/param moved
  EXPECT_EQ(adam_bytes_per_param(GradType::kFp32, false), 28);
  EXPECT_EQ(adam_bytes_per_param(GradType::kFp16, false), 26);
  EXPECT_THROW(adam_step(AdamConfig{}, AdamBuffers{}, Isa::kScalar, 0), std::invalid_argument);
}

TEST(HalfPrecision, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  auto f = [](std::uint32_t bits) {
    float x;
    std::memcpy(&x, &bits, 4);
    return x;
  };
  EXPECT_EQ(float_to_bf16(f(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(float_to_bf16(f(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(float_to_bf16(f(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  EXPECT_EQ(bf16_to_float(0x4049), 3.140625f);
}

TEST(HalfPrecision, Fp16RoundTripsEveryHalfAndMatchesHardware) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    float x = fp16_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(x))));
      continue;
    }
    ASSERT_EQ(float_to_fp16(x), h) << std::hex << h;
  }
#if defined(__x86_64__)
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no F16C on this CPU to compare against";
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    std::uint32_t u = bits(rng);
    if (i % 3 == 0) u = (u & 0x807fffffu) | ((100u + u % 60u) << 23);  // many values near the half range
    float x;
    std::memcpy(&x, &u, 4);
    if (std::isnan(x)) continue;
    std::uint16_t hw = static_cast<std::uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
    ASSERT_EQ(float_to_fp16(x), hw) << std::hex << u;
  }
#endif
}

}  // namespace
}  // namespace pipesim::calibrate
