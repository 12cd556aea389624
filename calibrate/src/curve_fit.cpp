#include "pipesim/calibrate/curve_fit.hpp"

#include <algorithm>
#include <cmath>

namespace pipesim::calibrate {

std::vector<double> isotonic_non_decreasing(const std::vector<double>& y) {
  struct Block {
    double sum;
    int count;
  };
  std::vector<Block> blocks;
  for (double v : y) {
    blocks.push_back({v, 1});
    // Merge while the last block's mean is below the previous one's.
    while (blocks.size() > 1) {
      const Block& b = blocks.back();
      const Block& a = blocks[blocks.size() - 2];
      if (a.sum / a.count <= b.sum / b.count) break;
      Block merged{a.sum + b.sum, a.count + b.count};
      blocks.pop_back();
      blocks.back() = merged;
    }
  }
  std::vector<double> out;
  out.reserve(y.size());
  for (const Block& b : blocks) out.insert(out.end(), static_cast<std::size_t>(b.count), b.sum / b.count);
  return out;
}

SampleStats summarize(std::vector<double> samples) {
  SampleStats s;
  s.samples = static_cast<int>(samples.size());
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  s.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  double mean = 0;
  for (double v : samples) mean += v;
  mean /= static_cast<double>(n);
  double var = 0;
  for (double v : samples) var += (v - mean) * (v - mean);
  var = n > 1 ? var / static_cast<double>(n - 1) : 0;
  s.cv = mean != 0 ? std::sqrt(var) / std::fabs(mean) : 0;
  return s;
}

}  // namespace pipesim::calibrate
