// CPU Adam(W) step over fp32 master weights and moments with fp32, fp16 or bf16 gradients: the kernel the
// simulator's `optimizer` ops stand for, measured by `pipesim calibrate` and run by the host replay backend.
// Vectorized for AVX-512 and AVX2 (chosen at run time) with a scalar fallback; all three give bit-identical
// results, and the work is split over threads in contiguous blocks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pipesim::calibrate {

enum class GradType { kFp32, kFp16, kBf16 };
enum class Isa { kScalar, kAvx2, kAvx512 };

const char* to_string(GradType t);
const char* to_string(Isa isa);
/// The widest instruction set this CPU runs (AVX-512 needs F+BW, AVX2 needs FMA-era AVX2 + F16C).
Isa best_isa();
bool isa_supported(Isa isa);

struct AdamConfig {
  float lr = 1e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  int step = 1;             ///< 1-based step number for bias correction
  float grad_scale = 1.0f;  ///< multiplies the gradient first (1 / loss scale)
};

/// One optimizer shard. `grad` holds `n` values of `grad_type`; when `weight_out` is not null the updated
/// weights are also written there in the gradient's 16-bit type (the copy the GPU uploads).
struct AdamBuffers {
  float* master = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  const void* grad = nullptr;
  void* weight_out = nullptr;
  std::size_t n = 0;
  GradType grad_type = GradType::kBf16;
};

/// Runs one Adam step on `threads` threads (>= 1) with `isa` (must be supported).
void adam_step(const AdamConfig& config, const AdamBuffers& buffers, Isa isa, int threads);

/// DRAM bytes one step moves per parameter: master, m, v read and written (24), the gradient, the weight
/// copy.
std::int64_t adam_bytes_per_param(GradType grad_type, bool writes_weight_copy);

/// 16-bit conversions used by the kernel (round to nearest even), exposed for tests and the replay backend.
std::uint16_t float_to_bf16(float f);
float bf16_to_float(std::uint16_t h);
std::uint16_t float_to_fp16(float f);
float fp16_to_float(std::uint16_t h);

}  // namespace pipesim::calibrate
