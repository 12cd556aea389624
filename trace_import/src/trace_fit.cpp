#include "pipesim/trace_import/trace_fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/trace_import/kernel_class.hpp"

namespace pipesim::trace_import {

namespace {

bool is_gemm_op(WeightUse::Op op) {
  return op == WeightUse::Op::kLinear || op == WeightUse::Op::kAddmm || op == WeightUse::Op::kMatmul;
}

/// Two significant digits: GEMMs of one shape (and of shapes a few per cent apart) share a point.
double round_size(double gflop) {
  return std::stod(fmt::format("{:.2g}", gflop));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::vector<GemmTiming> gemm_timings(const KinetoTrace& trace) {
  // Each thread's GEMM ops by start; one inside another (a linear's addmm) is the outer one's.
  std::unordered_map<std::int64_t, std::vector<const WeightUse*>> by_thread;
  for (const WeightUse& w : trace.weights)
    if (is_gemm_op(w.op) && w.flops > 0) by_thread[w.tid].push_back(&w);
  std::unordered_map<std::int64_t, std::vector<std::pair<const WeightUse*, GemmTiming>>> outer;
  for (auto& [tid, ops] : by_thread) {
    std::stable_sort(ops.begin(), ops.end(),
                     [](const WeightUse* a, const WeightUse* b) { return a->ts < b->ts; });
    double end = -1e300;
    for (const WeightUse* w : ops) {
      if (w->ts < end) continue;
      end = w->ts + w->dur;
      outer[tid].push_back({w, GemmTiming{w->flops, 0}});
    }
  }
  // Each GEMM kernel to the op whose span holds its launch.
  std::unordered_map<std::int64_t, const Launch*> launch_of;
  for (const Launch& l : trace.launches) launch_of.emplace(l.correlation, &l);
  for (const GpuActivity& a : trace.gpu) {
    if (a.kind != GpuActivity::Kind::kKernel ||
        classify_kernel(trace.names[static_cast<std::size_t>(a.name)]) != KernelClass::kGemm)
      continue;
    const auto l = launch_of.find(a.correlation);
    if (l == launch_of.end()) continue;
    const auto ops = outer.find(l->second->tid);
    if (ops == outer.end()) continue;
    auto& v = ops->second;
    auto it = std::upper_bound(v.begin(), v.end(), l->second->ts,
                               [](double t, const auto& p) { return t < p.first->ts; });
    if (it == v.begin()) continue;
    --it;
    if (l->second->ts <= it->first->ts + it->first->dur) it->second.gpu_us += a.dur;
  }
  std::vector<GemmTiming> out;
  for (auto& [tid, v] : outer)
    for (const auto& [w, t] : v)
      if (t.gpu_us > 0 && w->aligned) out.push_back(t);
  std::sort(out.begin(), out.end(), [](const GemmTiming& a, const GemmTiming& b) {
    return a.flops != b.flops ? a.flops < b.flops : a.gpu_us < b.gpu_us;
  });
  return out;
}

TraceFit fit_profile(const KinetoTrace& trace, const sim::HardwareProfile& base, const std::string& dtype,
                     const std::string& name) {
  const std::vector<GemmTiming> gemms = gemm_timings(trace);
  if (gemms.empty())
    throw sim::InputError(
        trace.file, "/traceEvents",
        "no GEMM with its shapes and kernels; profile with record_shapes=True and CUDA activity");
  const double peak = base.peak_flops(dtype);  // FLOP/s; throws for a dtype the profile lacks
  std::map<double, std::vector<double>> by_size;
  for (const GemmTiming& g : gemms)
    by_size[round_size(g.flops / 1e9)].push_back(std::min(1.0, g.flops / (g.gpu_us * 1e-6) / peak));
  TraceFit fit;
  fit.profile = base;
  fit.profile.name = name;
  fit.gemms = static_cast<int>(gemms.size());
  const double lo = by_size.begin()->first, hi = by_size.rbegin()->first;
  std::vector<sim::CurvePoint> curve;
  for (const auto& p : base.gpu.gemm_efficiency)
    if (p.x < lo || p.x > hi) curve.push_back(p);
  for (const auto& [size, effs] : by_size) curve.push_back({size, std::max(1e-6, median(effs))});
  std::sort(curve.begin(), curve.end(), [](const auto& a, const auto& b) { return a.x < b.x; });
  fit.profile.gpu.gemm_efficiency = curve;
  fit.profile.gpu.sources["gemm_efficiency"] = fmt::format(
      "{} GEMMs of the PyTorch profiler trace {} ({}), at the {} peak, medians by size from {:g} to "
      "{:g} GFLOP (pipesim calibrate --from-trace); outside that range: {}",
      fit.gemms, trace.file, trace.device.empty() ? "GPU unnamed" : trace.device, dtype, lo, hi,
      base.gpu.sources.count("gemm_efficiency") ? base.gpu.sources.at("gemm_efficiency") : base.name);
  fit.notes.push_back(fmt::format("GEMM efficiency from {} GEMMs at {} sizes, {:g} to {:g} GFLOP", fit.gemms,
                                  by_size.size(), lo, hi));
  fit.notes.push_back(
      "kept from the base profile: element-wise streaming rate, launch overhead and everything else (a "
      "profiled "
      "trace's CPU times are the profiler's, and its element-wise kernels' bytes are not recorded)");
  return fit;
}

}  // namespace pipesim::trace_import
