// cuBLAS GEMM throughput at the shapes training runs: the weight GEMMs of two transformer blocks (a
// Llama-3-8B-class one, h 4096, and a Qwen3-1.7B-class one, h 2048) and their output heads, over token counts
// from decoding (1) to long microbatches (8192). Operands are random (a constant buffer runs about 11 %
// faster on an H100 than real data) and each timed loop cycles through enough operand sets to exceed 4x the
// L2 cache, as consecutive layers' weights do: a small GEMM repeated on one cache-resident set would
// measure the cache. The GPU is first heated to the clock its power limit sustains, as in training.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda_benchmarks.hpp"
#include "cuda_timing.cuh"
#include "pipesim/calibrate/curve_fit.hpp"
#include "pipesim/calibrate/timed_buffers.cuh"

namespace pipesim::calibrate {

namespace {

using cuda_check::check;

struct Shape {
  std::string name;
  std::int64_t n, k;  ///< output and input features; m is the token count
};

/// A block's weight GEMMs and its output head.
void add_block(std::vector<Shape>& out, std::int64_t h, std::int64_t kv, std::int64_t ffn,
               std::int64_t vocab) {
  const std::string tag = "h" + std::to_string(h) + "/";
  out.push_back({tag + "qkv", h + 2 * kv, h});
  out.push_back({tag + "attn_out", h, h});
  out.push_back({tag + "mlp_up", 2 * ffn, h});
  out.push_back({tag + "mlp_down", h, ffn});
  out.push_back({tag + "lm_head", vocab, h});
}

}  // namespace

void measure_gemm(CudaCalibration& c, const CudaOptions& o,
                  const std::function<void(const std::string&)>& progress) {
  check(cudaSetDevice(0), "cudaSetDevice");
  std::vector<Shape> shapes;
  add_block(shapes, 4096, 1024, 14336, 128256);  // Llama-3-8B
  add_block(shapes, 2048, 1024, 6144, 151936);   // Qwen3-1.7B
  const std::vector<std::int64_t> tokens =
      o.quick ? std::vector<std::int64_t>{64, 1024, 8192}
              : std::vector<std::int64_t>{1, 16, 64, 128, 512, 1024, 2048, 4096, 8192};
  std::int64_t set_max = 0;  // elements of the largest operand set (X, W and Y)
  for (const Shape& sh : shapes)
    set_max = std::max(set_max, tokens.back() * sh.k + sh.k * sh.n + tokens.back() * sh.n);
  std::size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  const auto l2 = static_cast<std::int64_t>(std::max<std::int64_t>(c.l2_bytes, 1 << 20));
  // Elements for the largest set, and for small sets enough to exceed 4x L2; within a quarter of free memory.
  const std::int64_t pool =
      std::min<std::int64_t>(std::max<std::int64_t>(set_max, 4 * l2), static_cast<std::int64_t>(free_b / 8));
  auto* mem = static_cast<__nv_bfloat16*>(device_random(static_cast<std::size_t>(pool) * 2, 80));
  cublasHandle_t handle{};
  check(cublasCreate(&handle), "cublasCreate");
  cudaStream_t s{};
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cublasSetStream(handle, s), "cublasSetStream");
  const float alpha = 1.0f, beta = 0.0f;
  // bf16 where the GPU has it (Ampere and later), fp16 before: the dtype training runs in.
  int major = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), "cudaDeviceGetAttribute");
  const bool bf16 = major >= 8;
  const cudaDataType_t t = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  auto gemm = [&](const Shape& sh, std::int64_t m, __nv_bfloat16* x) {
    __nv_bfloat16* w = x + m * sh.k;
    __nv_bfloat16* y = w + sh.k * sh.n;
    check(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(sh.n), static_cast<int>(m),
                       static_cast<int>(sh.k), &alpha, w, t, static_cast<int>(sh.n), x, t,
                       static_cast<int>(sh.k), &beta, y, t, static_cast<int>(sh.n), CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  };
  // Training keeps a GPU busy for hours: it runs at the clock its power limit sustains, not at the boost
  // clock of a GPU just woken up. Large GEMMs first, for kHeatSeconds, so that every point is measured hot.
  {
    progress("gemm: heating the GPU to its sustained clock");
    const Shape& big = shapes[2];  // h4096/mlp_up
    const std::int64_t m = std::min<std::int64_t>(tokens.back(), pool / (2 * (big.k + big.n)));
    const double one = time_loop(s, 3, 1, [&] { gemm(big, m, mem); }).front();
    const int n = static_cast<int>(std::clamp((o.quick ? 1.0 : 2.0) / std::max(one, 1e-6), 1.0, 1e5));
    for (int i = 0; i < n; ++i) gemm(big, m, mem);
    check(cudaStreamSynchronize(s), "heating");
  }
  for (const Shape& sh : shapes) {
    for (std::int64_t m : tokens) {
      progress("gemm " + sh.name + " tokens " + std::to_string(m));
      const std::int64_t set = m * sh.k + sh.k * sh.n + m * sh.n;
      if (set > pool) continue;  // a GPU too small for this shape's operands
      const std::int64_t sets =
          std::clamp<std::int64_t>(4 * l2 / (2 * set) + 1, 1, std::max<std::int64_t>(pool / set, 1));
      const double flops =
          2.0 * static_cast<double>(m) * static_cast<double>(sh.n) * static_cast<double>(sh.k);
      const int it = static_cast<int>(std::clamp(2e11 / flops, 2.0, 200.0));
      std::int64_t next = 0;
      // Row-major Y[m,n] = X[m,k] W[k,n] as column-major Y^T = W^T X^T, on the next operand set.
      auto secs = time_loop(s, it, o.samples, [&] { gemm(sh, m, mem + (next++ % sets) * set); });
      std::vector<double> tf;
      for (double v : secs) tf.push_back(flops / v / 1e12);
      const SampleStats st = summarize(tf);
      c.gemm.push_back({sh.name, m, sh.n, sh.k, bf16 ? "bf16" : "fp16", st.median, st.cv, st.samples});
    }
  }
  cublasDestroy(handle);
  cudaStreamDestroy(s);
  cudaFree(mem);
}

}  // namespace pipesim::calibrate
