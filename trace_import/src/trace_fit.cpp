#include "pipesim/trace_import/trace_fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/trace_import/host_wait.hpp"
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

/// The streaming efficiency from the trace's element-wise ops, into `fit` (or a note why not).
void fit_streaming(const KinetoTrace& trace, double elementwise_share, TraceFit& fit) {
  double bytes = 0, us = 0;
  for (const StreamingTiming& t : streaming_timings(trace))
    if (t.bytes >= kStreamingMinBytes) {
      bytes += t.bytes;
      us += t.gpu_us;
      ++fit.streaming_ops;
    }
  auto& gpu = fit.profile.gpu;
  if (fit.streaming_ops < kStreamingMinOps) {
    fit.notes.push_back(fmt::format(
        "streaming rate kept from the base profile: {} element-wise ops of {} MiB or more with their shapes "
        "and one kernel each (casts, copies, adds, multiplies), {} needed",
        fit.streaming_ops, kStreamingMinBytes / (1 << 20), kStreamingMinOps));
    fit.streaming_ops = 0;
    return;
  }
  fit.streaming_GBps = bytes / us / 1e3;
  gpu.hbm_efficiency = std::clamp(fit.streaming_GBps / (gpu.hbm_GBps * elementwise_share), 0.01, 1.0);
  gpu.sources["hbm_efficiency"] = fmt::format(
      "{} element-wise ops of the PyTorch profiler trace {} ({}) moved {:.3g} GB in {:.4g} ms: {:.0f} GB/s, "
      "where the framework's element-wise kernels reach {:g} of the GPU's streaming rate; over hbm_GBps {:g} "
      "(pipesim calibrate --from-trace)",
      fit.streaming_ops, trace.file, trace.device.empty() ? "GPU unnamed" : trace.device, bytes / 1e9,
      us / 1e3, fit.streaming_GBps, elementwise_share, gpu.hbm_GBps);
  fit.notes.push_back(fmt::format(
      "streaming efficiency {:.3f} from {} element-wise ops: {:.0f} GB/s, over {:g} GB/s and the framework's "
      "share {:g}",
      gpu.hbm_efficiency, fit.streaming_ops, fit.streaming_GBps, gpu.hbm_GBps, elementwise_share));
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

std::vector<StreamingTiming> streaming_timings(const KinetoTrace& trace) {
  std::unordered_map<std::int64_t, std::vector<const StreamingOp*>> by_thread;
  for (const StreamingOp& op : trace.streaming) by_thread[op.tid].push_back(&op);
  for (auto& [tid, ops] : by_thread)
    std::stable_sort(ops.begin(), ops.end(),
                     [](const StreamingOp* a, const StreamingOp* b) { return a->ts < b->ts; });
  // The innermost op holding a launch: the latest to start before it, or one holding that one (an add's
  // dtype-promoting copy_ inside the add); a few steps back suffice for ops nested that shallow.
  auto holder = [&](const Launch& l) -> const StreamingOp* {
    const auto ops = by_thread.find(l.tid);
    if (ops == by_thread.end()) return nullptr;
    const auto& v = ops->second;
    auto it = std::upper_bound(v.begin(), v.end(), l.ts,
                               [](double t, const StreamingOp* op) { return t < op->ts; });
    for (int back = 0; back < 4 && it != v.begin(); ++back) {
      --it;
      if (l.ts <= (*it)->ts + (*it)->dur) return *it;
    }
    return nullptr;
  };
  struct Kernels {
    int count = 0;
    bool streaming = true;
    double gpu_us = 0;
  };
  std::unordered_map<const StreamingOp*, Kernels> kernels;
  std::unordered_map<std::int64_t, const Launch*> launch_of;
  for (const Launch& l : trace.launches) launch_of.emplace(l.correlation, &l);
  for (const GpuActivity& a : trace.gpu) {
    const auto l = launch_of.find(a.correlation);
    if (l == launch_of.end()) continue;
    const StreamingOp* op = holder(*l->second);
    if (op == nullptr) continue;
    Kernels& k = kernels[op];
    const KernelClass c = classify_kernel(trace.names[static_cast<std::size_t>(a.name)]);
    ++k.count;
    k.streaming = k.streaming && a.kind == GpuActivity::Kind::kKernel &&
                  (c == KernelClass::kElementwise || c == KernelClass::kCopy);
    k.gpu_us += a.dur;
  }
  std::vector<StreamingTiming> out;
  for (const StreamingOp& op : trace.streaming) {
    const auto k = kernels.find(&op);
    if (k != kernels.end() && k->second.count == 1 && k->second.streaming && k->second.gpu_us > 0)
      out.push_back({static_cast<double>(op.bytes), k->second.gpu_us});
  }
  return out;
}

TraceFit fit_profile(const KinetoTrace& trace, const sim::HardwareProfile& base, const std::string& dtype,
                     const std::string& name, double elementwise_share) {
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
  fit_streaming(trace, elementwise_share, fit);
  // The framework's CPU cost a launch: the step's CPU time between its launches, the profiler's own taken
  // out (host_wait.hpp). It belongs to the framework, not to this profile: said, not written.
  const HostWait host = replay_host(trace, ProfilerCost{});
  if (host.cpu_us > 0 && host.launches > 0) {
    fit.host_dispatch_us = host.cpu_us / static_cast<double>(host.launches);
    fit.notes.push_back(fmt::format(
        "the CPU's time a launch, the profiler's own cost taken out: {:.1f} us over {} launches (the "
        "framework's host_dispatch_us; simulate --host-dispatch-us)",
        fit.host_dispatch_us, host.launches));
  }
  fit.notes.push_back("kept from the base profile: everything else");
  return fit;
}

}  // namespace pipesim::trace_import
