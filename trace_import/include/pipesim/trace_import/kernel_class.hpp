// What a GPU kernel does, from its name: the classes a trace's time is reported in and a profile is fitted
// from. Names are those of the libraries PyTorch runs (cuBLAS/cuBLASLt and CUTLASS GEMMs, nvjet, flash and
// cuDNN attention, ATen's element-wise, reduction and optimizer kernels, NCCL).
#pragma once

#include <array>
#include <string_view>

namespace pipesim::trace_import {

enum class KernelClass : unsigned char {
  kGemm,
  kAttention,
  kElementwise,
  kReduction,
  kCopy,
  kOptimizer,
  kCommunication,
  kOther,
};
inline constexpr int kKernelClasses = 8;

const char* to_string(KernelClass c);

/// The class of a kernel named `name`; copies and fills (`copy`) are kCopy whatever their name.
KernelClass classify_kernel(std::string_view name, bool copy = false);

/// Time in each class (indexed by KernelClass).
using ClassTimes = std::array<double, kKernelClasses>;

}  // namespace pipesim::trace_import
