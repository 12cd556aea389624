// What a hardware profile answers once read: peak rates, GEMM and kernel times, memory times, NVLink
// groups and tensor-parallel placement, host-staged bandwidth and the CPU optimizer's rate.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/time.hpp"
#include "pipesim/sim/hardware/hardware.hpp"

namespace pipesim::sim {

double interpolate_log_x(const std::vector<CurvePoint>& curve, double x) {
  if (curve.empty()) return 0;
  if (x <= curve.front().x) return curve.front().y;
  if (x >= curve.back().x) return curve.back().y;
  auto hi =
      std::upper_bound(curve.begin(), curve.end(), x, [](double v, const CurvePoint& p) { return v < p.x; });
  auto lo = hi - 1;
  double t = (std::log(x) - std::log(lo->x)) / (std::log(hi->x) - std::log(lo->x));
  return lo->y + t * (hi->y - lo->y);
}

double HardwareProfile::peak_flops(const std::string& dtype) const {
  auto it = gpu.peak_tflops.find(dtype);
  if (it == gpu.peak_tflops.end())
    throw InputError(origin, "/gpu/peak_tflops", fmt::format("no peak for dtype '{}'", dtype));
  return it->second * 1e12;
}

int HardwareProfile::nvlink_group(int gpu_index) const {
  if (node.nvlink.GBps_per_direction <= 0) return -1;
  if (node.nvlink.groups.empty()) return 0;
  for (std::size_t g = 0; g < node.nvlink.groups.size(); ++g)
    for (int member : node.nvlink.groups[g])
      if (member == gpu_index) return static_cast<int>(g);
  return -1;
}

double HardwareProfile::staged_GBps(int senders) const {
  const double host_memory = host.dram_GBps / (2.0 * std::max(1, senders));
  const double measured = node.pcie.staged_busbw_GBps;
  return measured > 0 ? std::min(measured, host_memory) : host_memory;
}

bool HardwareProfile::nvlink_domain_shared(int node_a, int node_b) const {
  if (node_a == node_b) return true;
  return node.nvlink.GBps_per_direction > 0 && node.nvlink.domain_nodes > 1 &&
         node_a / node.nvlink.domain_nodes == node_b / node.nvlink.domain_nodes;
}

int HardwareProfile::tp_domain_gpus() const {
  return node.nvlink.GBps_per_direction > 0 ? node.gpus * node.nvlink.domain_nodes : node.gpus;
}

std::string HardwareProfile::tp_placement_error(int tp) const {
  // Inside a node a TP group divides its GPUs; beyond it, it spans whole nodes: inside an NVLink domain
  // (packed, the domain's remainder idle) or across domains over the network.
  if (tp >= 1 && (tp <= node.gpus ? node.gpus % tp == 0 : tp % node.gpus == 0)) return "";
  return fmt::format("tp {} must divide the {} GPUs of a node or span whole nodes{}", tp, node.gpus,
                     tp_domain_gpus() > node.gpus ? fmt::format(" (NVLink domains of {} nodes of {})",
                                                                node.nvlink.domain_nodes, node.gpus)
                                                  : "");
}

int HardwareProfile::tp_domain_used_gpus(int tp) const {
  const int domain = tp_domain_gpus();
  return tp > 0 && tp <= domain && domain % tp != 0 ? domain / tp * tp : domain;
}

std::int64_t HardwareProfile::gpu_slot(std::int64_t rank, int tp) const {
  const int domain = tp_domain_gpus(), used = tp_domain_used_gpus(tp);
  return used == domain ? rank : rank / used * domain + rank % used;
}

const std::vector<CurvePoint>& HardwareProfile::gemm_curve(const std::string& dtype) const {
  const auto own = gpu.gemm_efficiency_by_dtype.find(dtype);
  return own == gpu.gemm_efficiency_by_dtype.end() ? gpu.gemm_efficiency : own->second;
}

std::int64_t HardwareProfile::compute_ns(double flops, double gemm_gflop, std::int32_t kernels,
                                         const std::string& dtype) const {
  const double eff = interpolate_log_x(gemm_curve(dtype), std::max(gemm_gflop, 1e-12));
  const double rate = peak_flops(dtype) * std::max(eff, 1e-6) * gpu.compute_clock_share();
  return duration_for_work(flops, rate) + gpu.launch_overhead * kernels;
}

std::int64_t HardwareProfile::op_ns(double flops, double gemm_gflop, std::int32_t kernels,
                                    const std::string& dtype, std::int64_t mem_bytes, double expert_flops,
                                    double expert_gemm_gflop, std::int64_t expert_weight_bytes,
                                    double attention_flops, std::int64_t attention_bytes, double wide_flops,
                                    std::int64_t score_bytes, double rated_flops, double rated_tflops) const {
  // Score GEMMs over materialized scores: the longer of their FLOPs and their score traffic.
  if (attention_bytes <= 0) attention_flops = 0;
  // FP8 recipes run the blocks' (and experts') GEMMs in FP8 and keep attention and the output head in 16
  // bits.
  const bool fp8 = dtype == "fp8";
  const std::string& wide = fp8 ? sixteen_bit_dtype() : dtype;
  if (!fp8) wide_flops = 0;                // one precision: the op's FLOPs are timed together
  if (rated_tflops <= 0) rated_flops = 0;  // no published rate: the GEMM rate
  std::int64_t ns = compute_ns(flops - expert_flops - attention_flops - wide_flops - rated_flops, gemm_gflop,
                               kernels, dtype);
  // Kernels at their own measured rate (flash attention, unaligned GEMMs: both well below the GEMM curve).
  if (rated_flops > 0) ns += duration_for_work(rated_flops, rated_tflops * 1e12 * gpu.compute_clock_share());
  // Of the memory-bound bytes, the softmax, mask and dropout over unfused attention's scores run at the
  // score kernels' own bandwidth.
  const bool own_score_rate = gpu.unfused_attention_efficiency > 0 && score_bytes > 0;
  ns += own_score_rate ? memory_ns(mem_bytes - score_bytes) + score_memory_ns(score_bytes)
                       : memory_ns(mem_bytes);
  if (wide_flops > 0) ns += compute_ns(wide_flops, gemm_gflop, 0, wide);
  if (attention_flops > 0)
    ns += std::max(compute_ns(attention_flops, gemm_gflop, 0, wide), score_memory_ns(attention_bytes));
  if (expert_flops > 0)
    ns += std::max(compute_ns(expert_flops, expert_gemm_gflop, 0, dtype), memory_ns(expert_weight_bytes));
  return ns;
}

const std::string& HardwareProfile::sixteen_bit_dtype() const {
  static const std::string bf16 = "bf16", fp16 = "fp16";
  return gpu.peak_tflops.count("bf16") ? bf16 : fp16;
}

std::int64_t HardwareProfile::memory_ns(std::int64_t bytes) const {
  return duration_for_work(static_cast<double>(bytes), gpu.hbm_GBps * 1e9 * gpu.hbm_efficiency);
}

std::int64_t HardwareProfile::score_memory_ns(std::int64_t bytes) const {
  const double efficiency =
      gpu.unfused_attention_efficiency > 0 ? gpu.unfused_attention_efficiency : gpu.hbm_efficiency;
  return duration_for_work(static_cast<double>(bytes), gpu.hbm_GBps * 1e9 * efficiency);
}

double HardwareProfile::adam_params_per_s(int threads) const {
  return interpolate_log_x(host.adam_params_per_s_by_threads, static_cast<double>(threads));
}

}  // namespace pipesim::sim
