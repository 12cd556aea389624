// What a framework changes in the model's costs beside its kernels: the rate of the attention kernel it runs
// on this GPU, and the vocabulary its output layer computes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "pipesim/sim/core/time.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/job/framework.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/workload/cost_model.hpp"

namespace pipesim::sim {

/// The framework's attention kernel's published rates on this GPU at `head_dim` and `seq` (a context-parallel
/// rank's queries: their keys span the whole sequence), in the model's useful FLOPs: halved where the
/// framework's explicit mask makes the kernel compute every score. None when the profile does not list it.
KernelRate framework_attention_rate(const Framework& framework, const HardwareProfile& hw,
                                    std::int64_t head_dim, std::int64_t seq);

/// `framework` with `kernel` as its attention kernel (kGemmRateKernel: none, the GEMM rate): the framework
/// itself where it already names that kernel.
std::shared_ptr<const Framework> with_attention_kernel(std::shared_ptr<const Framework> framework,
                                                       const std::string& kernel);

/// CPU time to issue one forward TP collective pair (an all-reduce; under sequence parallelism an all-gather
/// and a reduce-scatter) beyond the `dispatch_ns` per launch the pair's kernels already cost; 0 where the
/// framework states no such cost.
Duration framework_tp_collective_host_ns(const Framework& framework, bool sequence_parallel,
                                         Duration dispatch_ns);

/// The cost model's options the framework decides for a job (`in`: its GPU, sequence, dispatch cost and TP
/// overlap) over a model of `head_dim`: its kernels, its attention kernel's rate, the CPU cost of its TP
/// collectives, and whether its asynchronous TP linears compute the local rows first (under sequence
/// parallelism: `co.sequence_parallel` set before).
void set_framework_costs(const Framework& framework, const ScheduleInput& in, std::int64_t head_dim,
                         CostOptions& co);

/// The vocabulary the framework's output layer computes and its embedding holds: `vocab` padded to its
/// multiple times tp.
std::int64_t framework_vocab(const Framework& framework, std::int64_t vocab, std::int32_t tp);

}  // namespace pipesim::sim
