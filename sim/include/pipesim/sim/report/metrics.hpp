// Metrics of a run: step time, bubble fraction (with warm-up / intra / drain
// breakdown), tokens/s, TFLOP/s per GPU, MFU/HFU, peak memory and OOM. Used by the CLI, planner and
// notebooks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan.hpp"
#include "pipesim/sim/report/time_breakdown.hpp"

namespace pipesim::sim {

struct GpuMetrics {
  std::string device;
  double busy_s = 0;
  double warmup_s = 0;  ///< before the GPU's first compute op
  double intra_s = 0;   ///< idle between its first and last compute op
  double drain_s = 0;   ///< after its last compute op
  std::int64_t peak_mem_bytes = 0;
};

struct LinkUtilization {
  std::string link;
  double utilization = 0;  ///< carried bytes / (capacity x run time)
};

struct Metrics {
  std::string schedule;
  std::int32_t num_gpus = 0;
  std::int32_t simulated_gpus = 0;
  std::int32_t iterations = 1;
  double step_time_s = 0;  ///< steady state when iterations > 1, else the single step
  /// step_time_s as an exact fraction, step_span_ns / step_span_iterations (for exact comparisons).
  Duration step_span_ns = 0;
  std::int32_t step_span_iterations = 1;
  double first_step_time_s = 0;         ///< first op start to the end of iteration 0 (cold)
  double steady_state_step_time_s = 0;  ///< (end of last iteration - end of first) / (iterations - 1)
  double run_time_s = 0;                ///< first op start to last op end over all iterations
  double cpu_optimizer_busy_s = 0;      ///< per iteration: time some host core runs the optimizer
  double cpu_optimizer_exposed_s = 0;   ///< per iteration: optimizer time with every GPU's compute idle
  std::vector<LinkUtilization> pcie_utilization;  ///< PCIe lanes and switch uplinks that carried traffic
  double bubble_fraction = 0;
  double bubble_warmup_fraction = 0;
  double bubble_intra_fraction = 0;
  double bubble_drain_fraction = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  std::int64_t peak_gpu_mem_bytes = 0;
  /// GPU memory for the job's tensors (Plan::gpu_tensor_capacity: the profile's less what the runtime and
  /// the framework's NCCL communicators hold), what peak_gpu_mem_bytes is held to.
  std::int64_t gpu_mem_capacity_bytes = 0;
  std::int64_t peak_host_mem_bytes = 0;
  std::int64_t peak_nvme_bytes = 0;  ///< ZeRO-Infinity's offloaded state on a node's NVMe volume
  bool oom = false;
  std::string oom_device;
  double oom_time_s = 0;
  std::int64_t oom_bytes_over = 0;
  std::int64_t ops = 0;
  std::uint64_t events = 0;
  std::vector<GpuMetrics> gpus;
  TimeBreakdown time;  ///< where the simulated GPUs' time goes, over the whole run
};

Metrics compute_metrics(const Plan& plan, const Timeline& timeline);

/// One JSON object with the `simulate --format json` keys; `sim_wall_s` is the only non-deterministic field.
std::string metrics_to_json(const Plan& plan, const Metrics& m, double sim_wall_s, int indent = 2);

}  // namespace pipesim::sim
