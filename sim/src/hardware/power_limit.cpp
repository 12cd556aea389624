#include "pipesim/sim/hardware/power_limit.hpp"

#include <cmath>

#include <fmt/format.h>

#include "pipesim/sim/hardware/hardware.hpp"

namespace pipesim::sim {

double power_limited_clock(double board_W, double exponent, double limit_W) {
  if (board_W <= 0 || exponent <= 0 || limit_W <= 0 || limit_W >= board_W) return 1;
  return std::pow(limit_W / board_W, 1 / exponent);
}

double GpuSpec::compute_clock_share() const {
  return power_limited_clock(board_W, power_clock_exponent, power_limit_W);
}

std::string power_limit_error(const GpuSpec& gpu, double limit_W) {
  if (gpu.board_W <= 0 || gpu.power_clock_exponent <= 0)
    return fmt::format(
        "{} W: the profile's GPU ({}) states no {}, so a power limit cannot be priced; add it, "
        "with its source, to the profile's gpu",
        limit_W, gpu.model, gpu.board_W <= 0 ? "board_W" : "power_clock_exponent");
  const double lowest = kMinPowerLimitShare * gpu.board_W;
  if (!(limit_W >= lowest && limit_W <= gpu.board_W))
    return fmt::format("{} W; valid: {:g} .. {:g} W (a quarter of the GPU's rated board power up to it)",
                       limit_W, lowest, gpu.board_W);
  return "";
}

}  // namespace pipesim::sim
