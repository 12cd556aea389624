// Simulated time: one signed 64-bit integer of nanoseconds everywhere in pipesim.
// Doubles (ms, GB/s, TFLOP/s) are converted only at loaders, with explicit rounding and range checks.
#pragma once

#include <cstdint>

namespace pipesim::sim {

/// A span of simulated time in nanoseconds.
using Duration = std::int64_t;
/// A point of simulated time in nanoseconds since the start of the run.
using TimePoint = std::int64_t;

inline constexpr Duration kNsPerUs = 1'000;
inline constexpr Duration kNsPerMs = 1'000'000;
inline constexpr Duration kNsPerS = 1'000'000'000;

/// Rounds a non-negative time in seconds to the nearest nanosecond; throws std::out_of_range when the value
/// is negative, not finite, or beyond ~292 years.
Duration duration_from_seconds(double seconds);

/// The same for milliseconds and microseconds (the units of workload and hardware files).
Duration duration_from_ms(double ms);
Duration duration_from_us(double us);

/// Nanoseconds needed to do `work` units at `rate_per_s` units per second, rounded up so that no op with
/// positive work ever takes zero time.
Duration duration_for_work(double work, double rate_per_s);

inline double to_seconds(Duration d) {
  return static_cast<double>(d) / static_cast<double>(kNsPerS);
}
inline double to_ms(Duration d) {
  return static_cast<double>(d) / static_cast<double>(kNsPerMs);
}
inline double to_us(Duration d) {
  return static_cast<double>(d) / static_cast<double>(kNsPerUs);
}

}  // namespace pipesim::sim
