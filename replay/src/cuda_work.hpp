// What the CUDA replay module issues for an op, decided here on plain data so that the same code runs in the
// module and in the tests that check it against the cost model (no GPU needed): a compute op's GEMMs and
// device copies, a transfer's copies. C++17, no pipesim headers: nvcc compiles the module.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda_replay_abi.hpp"

namespace pipesim::replay::cuda_abi {

/// The operand buffers hold 8192 x 8192 bf16 values each: every GEMM's A, B and C must fit.
inline constexpr std::int64_t kMaxGemmSide = 8192;
inline constexpr std::int64_t kMaxOperandElements = kMaxGemmSide * kMaxGemmSide;
/// Device and pinned copy buffers (per GPU); longer copies loop over them.
inline constexpr std::int64_t kCopyChunkBytes = std::int64_t{64} << 20;

/// `count` GEMMs of m x n x k (2 m n k FLOPs each).
struct GemmCall {
  std::int64_t m = 0, n = 0, k = 0, count = 0;
  double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
           static_cast<double>(count);
  }
};

/// Square GEMM side whose 2n^3 FLOPs match `gflop` (a multiple of 64, 64 .. kMaxGemmSide).
inline std::int64_t square_side(double gflop) {
  const double n = std::cbrt(std::max(gflop, 1e-6) * 1e9 / 2);
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::llround(n / 64)) * 64, 64, kMaxGemmSide);
}

/// Appends `count` GEMMs of m x n x k, tiled so that every operand fits the buffers; the tiles' FLOPs sum to
/// the GEMM's exactly. The output is split only when it does not fit (along its longer side, the shorter kept
/// whole up to kMaxGemmSide); then k, which keeps the tiles as wide as the GEMM: an output head's long k
/// becomes a few full-width GEMMs, not hundreds of skinny ones.
inline void add_tiled(std::vector<GemmCall>& out, std::int64_t m, std::int64_t n, std::int64_t k,
                      std::int64_t count) {
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return;
  std::int64_t tm = m, tn = n;
  if (m * n > kMaxOperandElements) {
    if (m <= n) {
      tm = std::min(m, kMaxGemmSide);
      tn = std::min(n, kMaxOperandElements / tm);
    } else {
      tn = std::min(n, kMaxGemmSide);
      tm = std::min(m, kMaxOperandElements / tn);
    }
  }
  const std::int64_t tk = std::max<std::int64_t>(1, std::min(k, kMaxOperandElements / std::max(tm, tn)));
  // Per dimension: full tiles and the remainder.
  const std::int64_t ms[2] = {tm, m % tm}, ns[2] = {tn, n % tn}, ks[2] = {tk, k % tk};
  const std::int64_t mc[2] = {m / tm, 1}, nc[2] = {n / tn, 1}, kc[2] = {k / tk, 1};
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b)
      for (int c = 0; c < 2; ++c)
        if (ms[a] > 0 && ns[b] > 0 && ks[c] > 0 && mc[a] > 0 && nc[b] > 0 && kc[c] > 0)
          out.push_back({ms[a], ns[b], ks[c], count * mc[a] * nc[b] * kc[c]});
}

/// A compute op's GEMMs: the plan's shapes (tiled to the buffers), then what its FLOPs hold beyond them (the
/// attention core, an op without shapes) as square GEMMs of the op's typical size, one GEMM of that side
/// with a shorter k, and one 1 x 1 x k product: the FLOPs issued equal the op's, to the FLOP (even counts).
inline std::vector<GemmCall> gemm_calls(const Op& op) {
  std::vector<GemmCall> out;
  double shaped = 0;
  for (std::size_t g = 0; g + 3 < op.gemms.size(); g += 4) {
    const GemmCall call{op.gemms[g], op.gemms[g + 1], op.gemms[g + 2], op.gemms[g + 3]};
    if (shaped + call.flops() > op.flops) break;  // scaled counts that overshoot the op: the rest is square
    add_tiled(out, call.m, call.n, call.k, call.count);
    shaped += call.flops();
  }
  auto rest = static_cast<std::int64_t>(std::llround((op.flops - shaped) / 2));  // in multiply-adds
  if (rest <= 0) return out;
  const std::int64_t s = square_side(op.gemm_gflop);
  const std::int64_t cube = s * s * s, square = s * s;
  add_tiled(out, s, s, s, rest / cube);
  rest %= cube;
  add_tiled(out, s, s, rest / square, 1);
  rest %= square;
  add_tiled(out, 1, 1, rest, 1);
  return out;
}

/// FLOPs of a list of GEMMs.
inline double total_flops(const std::vector<GemmCall>& calls) {
  double f = 0;
  for (const auto& c : calls) f += c.flops();
  return f;
}

}  // namespace pipesim::replay::cuda_abi
