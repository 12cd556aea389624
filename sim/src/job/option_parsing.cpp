#include "pipesim/sim/job/option_parsing.hpp"

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::sim {

Recompute parse_recompute(const std::string& s) {
  if (s == "none") return Recompute::kNone;
  if (s == "selective") return Recompute::kSelective;
  if (s == "full") return Recompute::kFull;
  throw InputError(Option{"recompute"}, "",
                   fmt::format("unknown policy '{}'; valid: none, selective, full", s));
}

AttentionKernel parse_attention(const std::string& s) {
  if (s == "unfused") return AttentionKernel::kUnfused;
  if (s == "flash") return AttentionKernel::kFlash;
  throw InputError(Option{"attention"}, "",
                   fmt::format("unknown attention kernel '{}'; valid: unfused, flash", s));
}

GradAccumulation parse_grad_accumulation(const std::string& s) {
  if (s == "fused") return GradAccumulation::kFused;
  if (s == "main-grad") return GradAccumulation::kMainGrad;
  if (s == "autograd") return GradAccumulation::kAutograd;
  throw InputError(Option{"grad_accumulation"}, "",
                   fmt::format("unknown mode '{}'; valid: fused, main-grad, autograd", s));
}

BiasKernels parse_bias_kernels(const std::string& s) {
  if (s == "fused") return BiasKernels::kFused;
  if (s == "separate") return BiasKernels::kSeparate;
  throw InputError(Option{"bias_kernels"}, "",
                   fmt::format("unknown kernels '{}'; valid: fused, separate", s));
}

NormBackward parse_norm_backward(const std::string& s) {
  if (s == "one-pass") return NormBackward::kOnePass;
  if (s == "two-pass") return NormBackward::kTwoPass;
  throw InputError(Option{"norm_backward"}, "",
                   fmt::format("unknown norm backward '{}'; valid: one-pass, two-pass", s));
}

CpAttention parse_cp_attention(const std::string& s) {
  if (s == "ring") return CpAttention::kRing;
  if (s == "allgather") return CpAttention::kAllGather;
  throw InputError(Option{"cp_attention"}, "",
                   fmt::format("unknown context-parallel attention '{}'; valid: ring, allgather", s));
}

}  // namespace pipesim::sim
