#include "pipesim/sim/core/time.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::sim {

namespace {
constexpr double kMaxSeconds = 9.2e9;  // int64 nanoseconds hold ~292 years
}

Duration duration_from_seconds(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > kMaxSeconds)
    throw InputError("time", "", "time in seconds must be finite, >= 0 and < 9.2e9");
  return static_cast<Duration>(std::llround(seconds * 1e9));
}

Duration duration_from_ms(double ms) {
  if (!std::isfinite(ms) || ms < 0 || ms > kMaxSeconds * 1e3)
    throw InputError("time", "", "time in milliseconds must be finite, >= 0 and < 9.2e12");
  return static_cast<Duration>(std::llround(ms * 1e6));
}

Duration duration_from_us(double us) {
  if (!std::isfinite(us) || us < 0 || us > kMaxSeconds * 1e6)
    throw InputError("time", "", "time in microseconds must be finite, >= 0 and < 9.2e15");
  return static_cast<Duration>(std::llround(us * 1000.0));
}

Duration duration_for_work(double work, double rate_per_s) {
  if (work <= 0) return 0;
  if (!(rate_per_s > 0) || !std::isfinite(rate_per_s))
    throw InputError("rate", "", fmt::format("{} per second is not a positive finite rate", rate_per_s));
  double ns = std::ceil(work / rate_per_s * 1e9);
  if (!(ns <= kMaxSeconds * 1e9))
    throw InputError(
        "duration", "",
        fmt::format("{:.3g} units of work at {:.3g} per second last beyond the simulated time range "
                    "(about 292 years)",
                    work, rate_per_s));
  return static_cast<Duration>(ns);
}

}  // namespace pipesim::sim
