// The values every timed buffer holds (calibration GEMMs and streams, replay operands and copies, the CPU
// Adam and STREAM arrays): pseudo-random, from a fixed seed, so that timings are reproducible and reflect
// real data. A buffer of one constant (or zeros) makes GEMMs faster than on real operands (less switching in
// the multipliers), so nothing timed may hold one. Compiles for the host and, under nvcc, for the device.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PIPESIM_HOST_DEVICE __host__ __device__
#else
#define PIPESIM_HOST_DEVICE
#endif

namespace pipesim::calibrate {

/// SplitMix64 of (seed, index): independent 64-bit values for every element of every buffer.
PIPESIM_HOST_DEVICE inline std::uint64_t operand_bits(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A value uniform in [-1, 1) with 24 random mantissa bits: operands of the magnitude of normalized
/// activations and initialized weights, never denormal, never a constant.
PIPESIM_HOST_DEVICE inline float operand_value(std::uint64_t seed, std::uint64_t index) {
  const auto bits = static_cast<std::uint32_t>(operand_bits(seed, index) >> 40);  // 24 bits
  return static_cast<float>(bits) * (1.0f / 8388608.0f) - 1.0f;
}

/// Raw bytes for buffers that are only copied (their contents matter only in not being constant).
PIPESIM_HOST_DEVICE inline unsigned char operand_byte(std::uint64_t seed, std::uint64_t index) {
  return static_cast<unsigned char>(operand_bits(seed, index) >> 56);
}

}  // namespace pipesim::calibrate
