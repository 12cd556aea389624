#include "pipesim/trace_import/kernel_class.hpp"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string>

namespace pipesim::trace_import {

const char* to_string(KernelClass c) {
  switch (c) {
    case KernelClass::kGemm:
      return "gemm";
    case KernelClass::kAttention:
      return "attention";
    case KernelClass::kElementwise:
      return "elementwise";
    case KernelClass::kReduction:
      return "reduction";
    case KernelClass::kCopy:
      return "copy";
    case KernelClass::kOptimizer:
      return "optimizer";
    case KernelClass::kCommunication:
      return "communication";
    case KernelClass::kOther:
      break;
  }
  return "other";
}

KernelClass classify_kernel(std::string_view name, bool copy) {
  if (copy) return KernelClass::kCopy;
  std::string n(name);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  auto has = [&](std::initializer_list<const char*> words) {
    return std::any_of(words.begin(), words.end(),
                       [&](const char* w) { return n.find(w) != std::string::npos; });
  };
  // First match wins: attention kernels are GEMMs too (cuDNN's wgmma), NCCL's are reductions.
  if (has({"nccl"})) return KernelClass::kCommunication;
  if (has({"flash", "fmha", "sdpa", "attention", "cudnn::fusion"})) return KernelClass::kAttention;
  if (has({"multi_tensor_apply", "adam", "optimizer"})) return KernelClass::kOptimizer;
  if (has({"gemm", "nvjet", "cutlass", "xmma", "cublas", "matmul", "splitk", "ampere_bf16", "sm80_",
           "sm90_"}))
    return KernelClass::kGemm;
  if (has({"reduce", "softmax", "norm", "gammabeta", "nll_loss", "cub::", "sum_", "scan", "sort"}))
    return KernelClass::kReduction;
  if (has({"copy", "cat", "transpose", "gather", "scatter", "index", "embedding"})) return KernelClass::kCopy;
  if (has({"elementwise", "dropout", "fill", "philox", "vectorized", "unrolled"}))
    return KernelClass::kElementwise;
  return KernelClass::kOther;
}

}  // namespace pipesim::trace_import
