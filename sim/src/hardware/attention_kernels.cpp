#include "pipesim/sim/hardware/attention_kernels.hpp"

#include <cmath>

namespace pipesim::sim {

namespace {

double interpolate_log2(double x0, double y0, double x1, double y1, double x) {
  const double t = (std::log2(x) - std::log2(x0)) / (std::log2(x1) - std::log2(x0));
  return y0 + t * (y1 - y0);
}

}  // namespace

KernelRate attention_rate(const AttentionKernelRates& kernel, std::int64_t head_dim, std::int64_t seq) {
  if (kernel.points.empty() || head_dim <= 0 || seq <= 0) return {};
  std::int64_t nearest = kernel.points.front().head_dim;
  auto distance = [&](std::int64_t d) {
    return std::abs(std::log2(static_cast<double>(d)) - std::log2(static_cast<double>(head_dim)));
  };
  for (const auto& p : kernel.points)
    if (distance(p.head_dim) < distance(nearest)) nearest = p.head_dim;
  std::vector<AttentionKernelPoint> row;
  for (const auto& p : kernel.points)
    if (p.head_dim == nearest) row.push_back(p);
  const auto s = static_cast<double>(seq);
  const AttentionKernelPoint* lo = &row.front();
  const AttentionKernelPoint* hi = &row.back();
  KernelRate rate;
  if (s <= static_cast<double>(lo->seq)) {
    rate = {lo->forward_tflops, lo->backward_tflops};
  } else if (s >= static_cast<double>(hi->seq)) {
    rate = {hi->forward_tflops, hi->backward_tflops};
  } else {
    for (std::size_t i = 1; i < row.size(); ++i) {
      if (static_cast<double>(row[i].seq) < s) continue;
      const auto& a = row[i - 1];
      const auto& b = row[i];
      const auto sa = static_cast<double>(a.seq), sb = static_cast<double>(b.seq);
      rate = {interpolate_log2(sa, a.forward_tflops, sb, b.forward_tflops, s),
              interpolate_log2(sa, a.backward_tflops, sb, b.backward_tflops, s)};
      break;
    }
  }
  rate.backward_tflops /= kBenchmarkedBackwardFlopsRatio;
  return rate;
}

}  // namespace pipesim::sim
