// The job's options from their text (as the command line, the Python module and sweep files give them) to
// the cost model's types. Each throws InputError naming the option and listing the valid words.
#pragma once

#include <string>

#include "pipesim/sim/workload/cost_model.hpp"

namespace pipesim::sim {

Recompute parse_recompute(const std::string& s);                 ///< none, selective, full
AttentionKernel parse_attention(const std::string& s);           ///< unfused, flash
GradAccumulation parse_grad_accumulation(const std::string& s);  ///< fused, main-grad, autograd
BiasKernels parse_bias_kernels(const std::string& s);            ///< fused, separate
NormBackward parse_norm_backward(const std::string& s);          ///< one-pass, two-pass
CpAttention parse_cp_attention(const std::string& s);            ///< ring, allgather

}  // namespace pipesim::sim
