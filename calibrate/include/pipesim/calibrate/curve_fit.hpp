// Shaping measured curves before they go into a profile: where physics says a curve cannot go down (copy
// bandwidth against transfer size, GEMM efficiency against work), noise is removed by isotonic regression
// (pool-adjacent-violators), which changes the measurements as little as possible in least squares.
#pragma once

#include <vector>

namespace pipesim::calibrate {

/// The non-decreasing sequence closest to `y` in least squares (weights 1).
std::vector<double> isotonic_non_decreasing(const std::vector<double>& y);

/// Median and coefficient of variation (stddev / mean) of samples.
struct SampleStats {
  double median = 0;
  double cv = 0;
  int samples = 0;
};
SampleStats summarize(std::vector<double> samples);

}  // namespace pipesim::calibrate
