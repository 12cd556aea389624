#include "pipesim/replay/refit.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::replay {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// `base` with its points inside the measured range replaced by the measured medians (x strictly increasing).
std::vector<sim::CurvePoint> merge(const std::vector<sim::CurvePoint>& base,
                                   const std::map<double, std::vector<double>>& measured, double ymax) {
  if (measured.empty()) return base;
  const double lo = measured.begin()->first, hi = measured.rbegin()->first;
  std::vector<sim::CurvePoint> out;
  for (const auto& p : base)
    if (p.x < lo || p.x > hi) out.push_back(p);
  for (const auto& [x, ys] : measured) out.push_back({x, std::clamp(median(ys), 1e-9, ymax)});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.x < b.x; });
  return out;
}

/// The GEMM efficiency that makes the cost model give `measured_ns` for this compute op, or 0 when the op's
/// time is all launches and memory traffic. Every FLOP counts as a GEMM's, kernels the plan prices at a rate
/// of their own (fused attention) too: the CUDA replay runs them as GEMMs (cuda_work.hpp gemm_calls).
double efficiency_of(const sim::HardwareProfile& hw, const sim::ComputeWork& c, const std::string& dtype,
                     double measured_ns) {
  const double fixed =
      static_cast<double>(hw.gpu.launch_overhead * c.kernels + hw.memory_ns(c.mem_bytes - c.score_bytes) +
                          hw.score_memory_ns(c.score_bytes));
  const double attention = c.attention_bytes > 0 ? c.attention_flops : 0;
  const double dense = c.flops - c.expert_flops - attention;
  const double peak = hw.peak_flops(dtype) / 1e9;  // FLOP per ns
  // Attention's score GEMMs are compute-bound (they share the efficiency) unless their bytes take longer.
  double eff = measured_ns > fixed ? (dense + attention) / (peak * (measured_ns - fixed)) : 0;
  const double score_ns = static_cast<double>(hw.score_memory_ns(c.attention_bytes));
  if (attention > 0 && eff > 0 && attention / (peak * eff) < score_ns)
    eff = measured_ns > fixed + score_ns ? dense / (peak * (measured_ns - fixed - score_ns)) : 0;
  return eff;
}

}  // namespace

RefitReport refit_profile(const sim::Plan& plan, const TimelineFile& m, const sim::HardwareProfile& base,
                          const std::string& name) {
  if (m.ops.size() != plan.ops.size())
    throw sim::InputError(
        m.path, "/ops",
        fmt::format("{} ops, but the plan has {}: not a replay of this plan", m.ops.size(), plan.ops.size()));
  RefitReport r;
  r.profile = base;
  r.profile.name = name;
  std::map<double, std::vector<double>> eff, h2d, d2h, adam;
  int skipped_moe = 0;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const sim::Op& op = plan.ops[i];
    if (m.ops[i].kind != sim::to_string(op.kind) || m.ops[i].stream != op.stream)
      throw sim::InputError(
          m.path, fmt::format("/ops/{}", i),
          fmt::format("{} on stream {}, but the plan has {} on stream {}: not a replay of this "
                      "plan",
                      m.ops[i].kind, m.ops[i].stream, sim::to_string(op.kind), op.stream));
    const double ns = static_cast<double>(m.ops[i].end_ns - m.ops[i].start_ns);
    if (op.fixed_duration >= 0 || ns <= 0) continue;  // profiled times say nothing about the hardware
    if (const auto* c = sim::compute_of(op.payload); c && c->flops > 0) {
      if (c->expert_flops > 0) {
        ++skipped_moe;
        continue;
      }
      if (const double e = efficiency_of(base, *c, plan.meta.dtype, ns); e > 0 && c->gemm_gflop > 0) {
        eff[c->gemm_gflop].push_back(e);
        ++r.compute_ops;
      }
    } else if (const auto* t = std::get_if<sim::TransferWork>(&op.payload);
               t && t->bytes > 0 && (op.kind == sim::OpKind::kH2D || op.kind == sim::OpKind::kD2H)) {
      const double moving = ns - static_cast<double>(base.node.pcie.latency);
      if (moving <= 0) continue;
      (op.kind == sim::OpKind::kH2D ? h2d : d2h)[static_cast<double>(t->bytes)].push_back(
          static_cast<double>(t->bytes) / moving);
      ++r.copy_ops;
    } else if (const auto* w = std::get_if<sim::CpuWork>(&op.payload); w && w->params > 0) {
      adam[static_cast<double>(w->threads)].push_back(static_cast<double>(w->params) / (ns / 1e9));
      ++r.optimizer_ops;
    }
  }
  const std::string how = fmt::format("refit from the replay {} of a {} plan", m.path, plan.meta.schedule);
  auto& gpu = r.profile.gpu;
  if (!eff.empty()) {
    gpu.gemm_efficiency = merge(base.gpu.gemm_efficiency, eff, 1.0);
    gpu.sources["gemm_efficiency"] =
        fmt::format("{}: {} compute ops, {} GEMM sizes (other sizes from the base profile)", how,
                    r.compute_ops, eff.size());
  } else {
    r.notes.push_back("GEMM efficiency kept: no measured compute op with FLOPs");
  }
  auto& pcie = r.profile.node.pcie;
  if (!h2d.empty() || !d2h.empty()) {
    pcie.h2d_GBps_by_size = merge(base.node.pcie.h2d_GBps_by_size, h2d, 1e5);
    pcie.d2h_GBps_by_size = merge(base.node.pcie.d2h_GBps_by_size, d2h, 1e5);
    pcie.sources["h2d_GBps_by_size"] = pcie.sources["d2h_GBps_by_size"] =
        fmt::format("{}: {} copies", how, r.copy_ops);
  } else {
    r.notes.push_back("copy bandwidth kept: no measured host<->GPU copy");
  }
  if (!adam.empty()) {
    r.profile.host.adam_params_per_s_by_threads = merge(base.host.adam_params_per_s_by_threads, adam, 1e13);
    r.profile.host.sources["adam_params_per_s_by_threads"] =
        fmt::format("{}: {} CPU steps", how, r.optimizer_ops);
  } else {
    r.notes.push_back("CPU Adam rate kept: no measured CPU optimizer step");
  }
  if (skipped_moe > 0)
    r.notes.push_back(
        fmt::format("{} MoE compute ops not used (their expert share has its own roofline)", skipped_moe));
  r.notes.push_back("launch overhead and link bandwidths kept from the base profile");
  return r;
}

}  // namespace pipesim::replay
