// Power limits: a GPU held below its rated board power (`nvidia-smi -pl`, a site's default, a cooling
// budget) lowers its clocks until it draws no more. Kernels that keep the tensor cores busy draw the board's
// full rating at the rated clock, so they slow with the clock; kernels bound by memory bandwidth draw less
// and keep their pace. The sustained clock follows the power as P ∝ f^k, k the profile's
// `gpu.power_clock_exponent`, read off the vendor's ratings of one die at two board powers.
#pragma once

#include <string>

namespace pipesim::sim {

struct GpuSpec;

/// The lowest limit priced: a quarter of the rated power. The exponents come from ratings at 57 % (Hopper),
/// 70 % (B200) and 83 % (GB200) of the larger one; far below, the clocks reach their floor and the law no
/// longer holds.
inline constexpr double kMinPowerLimitShare = 0.25;

/// The compute clock of a GPU rated `board_W` and run at `limit_W`, as a share of its rated clock:
/// (limit_W / board_W)^(1 / exponent); 1 at or above the rating, or where either figure is unknown (0).
double power_limited_clock(double board_W, double exponent, double limit_W);

/// Empty when `limit_W` is a limit `gpu`'s profile can price; otherwise what is wrong and what is valid.
std::string power_limit_error(const GpuSpec& gpu, double limit_W);

}  // namespace pipesim::sim
