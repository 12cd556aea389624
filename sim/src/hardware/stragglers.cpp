#include "pipesim/sim/hardware/stragglers.hpp"

#include <algorithm>
#include <cmath>

namespace pipesim::sim {

double expected_max_of_normals(std::int64_t n) {
  if (n <= 1) return 0;
  // E[max] = integral of x n phi(x) Phi(x)^(n-1) dx; the integrand vanishes outside [-9, 9] for every n up to
  // billions (Phi^(n-1) is negligible below -9 + a few, phi above 9). Simpson's rule on 18,000 intervals is
  // exact to far below the figures' precision.
  constexpr double lo = -9, hi = 9;
  constexpr int intervals = 18000;
  const double step = (hi - lo) / intervals, count = static_cast<double>(n);
  auto f = [&](double x) {
    const double phi = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    if (cdf <= 0) return 0.0;
    return x * count * phi * std::exp((count - 1) * std::log(cdf));
  };
  double sum = f(lo) + f(hi);
  for (int i = 1; i < intervals; ++i) sum += (i % 2 == 1 ? 4 : 2) * f(lo + i * step);
  return sum * step / 3;
}

double straggler_slowdown(double speed_cv, std::int64_t gpus) {
  if (speed_cv <= 0 || gpus <= 1) return 1;
  // A GPU at speed 1 - cv z takes 1 / (1 - cv z) as long; the job waits for the largest z.
  const double slowest = speed_cv * expected_max_of_normals(gpus);
  return 1 / std::max(0.05, 1 - slowest);
}

}  // namespace pipesim::sim
