// The "kernels" object of a framework file: the framework's own element-wise kernels and saved tensors per
// layer and pass (workload/kernel_composition.hpp), each entry with its source.
#pragma once

#include <memory>

#include "core/json_reader.hpp"
#include "pipesim/sim/workload/kernel_composition.hpp"

namespace pipesim::sim {

/// Reads `kernels` of the framework object `root` when present (null when absent).
std::shared_ptr<const KernelComposition> parse_framework_kernels(detail::JsonObject& root);

}  // namespace pipesim::sim
