// Stragglers: GPUs of one model do not run at one speed (manufacturing and power management: the same kernel
// takes a few percent longer on some than on others), and a synchronous training step waits for the slowest
// GPU at every collective. A GPU's speed is taken as normal around the profile's figure with a coefficient of
// variation; a job of N GPUs runs at the pace of the slowest of N, in expectation.
#pragma once

#include <cstdint>

namespace pipesim::sim {

/// A GPU's speed varying by half its mean across GPUs of one model is beyond any published spread.
inline constexpr double kMaxSpeedCv = 0.5;

/// The expected maximum of `n` independent standard normal variables (0 for one; 1/sqrt(pi) for two;
/// 3 / (2 sqrt(pi)) for three; 3.85 for 10,000), by numerical integration of n x phi(x) Phi(x)^(n-1).
double expected_max_of_normals(std::int64_t n);

/// How much longer a synchronous job's GPU work takes when its `gpus` GPUs' speeds vary with coefficient
/// of variation `speed_cv`: 1 / (1 - speed_cv x the expected maximum of `gpus` standard normals), the
/// expected slowest GPU's time (1 when speed_cv is 0 or one GPU runs the job).
double straggler_slowdown(double speed_cv, std::int64_t gpus);

}  // namespace pipesim::sim
