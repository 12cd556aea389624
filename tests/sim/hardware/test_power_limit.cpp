// Power limits: a GPU held below its rated board power runs its compute clock at (limit / rating)^(1/k),
// k read off the vendor's ratings of one die at two board powers; GEMMs and fused attention slow with the
// clock, memory-bound kernels keep their pace.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/json_reader.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/hardware/power_limit.hpp"
#include "pipesim/sim/job/job.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

TEST(PowerLimit, TheClockFollowsThePowerByTheProfilesLaw) {
  // P ∝ f^3: an eighth of the power, half the clock.
  EXPECT_NEAR(power_limited_clock(800, 3, 100), 0.5, 1e-15);
  EXPECT_EQ(power_limited_clock(700, 3.32, 700), 1);
  EXPECT_EQ(power_limited_clock(700, 3.32, 900), 1);  // a limit above the rating lowers nothing
  EXPECT_EQ(power_limited_clock(700, 0, 500), 1);     // no law: no limit priced
  EXPECT_EQ(power_limited_clock(0, 3.32, 500), 1);
  // The H100's law gives back the rating it was read from: the H100 NVL's 835.5 TFLOP/s at 400 W.
  const HardwareProfile h100 = load_hardware_profile("h100-sxm-8x");
  EXPECT_NEAR(power_limited_clock(h100.gpu.board_W, h100.gpu.power_clock_exponent, 400) * 989, 835.5, 0.5);
  // And the B200's the HGX B100's 1,750 at 700 W.
  const HardwareProfile b200 = load_hardware_profile("b200-sxm-8x");
  EXPECT_NEAR(power_limited_clock(b200.gpu.board_W, b200.gpu.power_clock_exponent, 700) * 2250, 1750, 2);
}

TEST(PowerLimit, GemmsAndAttentionSlowWithTheClockAndMemoryKeepsItsPace) {
  HardwareProfile hw = load_hardware_profile("h100-sxm-8x");
  hw.gpu.board_W = 800;
  hw.gpu.power_clock_exponent = 3;
  const Duration gemm = hw.compute_ns(1e12, 100, 0, "bf16");
  const Duration memory = hw.memory_ns(std::int64_t{1} << 30);
  const Duration rated = hw.op_ns(2e12, 100, 0, "bf16", 0, 0, 0, 0, 0, 0, 0, 0, 1e12, 400);
  hw.gpu.power_limit_W = 100;
  EXPECT_NEAR(static_cast<double>(hw.compute_ns(1e12, 100, 0, "bf16")), 2.0 * static_cast<double>(gemm), 1);
  EXPECT_EQ(hw.memory_ns(std::int64_t{1} << 30), memory);
  EXPECT_NEAR(static_cast<double>(hw.op_ns(2e12, 100, 0, "bf16", 0, 0, 0, 0, 0, 0, 0, 0, 1e12, 400)),
              2.0 * static_cast<double>(rated), 2);
  // The peak MFU is reported against stays the rated one.
  EXPECT_EQ(hw.peak_flops("bf16"), 989e12);
}

TEST(PowerLimit, AJobAtALimitStretchesItsComputeOpsAtMostByTheClock) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 1, 1, 4);
  j.seq = 1024;
  const Plan rated = testing::plan_of("1f1b", j);
  j.power_limit = 500;
  const Plan limited = testing::plan_of("1f1b", j);
  EXPECT_EQ(limited.hw.gpu.power_limit_W, 500);
  const double share = std::pow(500.0 / 700.0, 1 / 3.32);
  const Timeline a = Engine{}.run(rated), b = Engine{}.run(limited);
  int computes = 0;
  for (std::size_t i = 0; i < rated.ops.size(); ++i) {
    const ComputeWork* w = compute_of(rated.ops[i].payload);
    if (w == nullptr || w->flops <= 0 || rated.ops[i].fixed_duration >= 0) continue;
    const double base = static_cast<double>(a.end[i] - a.start[i]);
    const double now = static_cast<double>(b.end[i] - b.start[i]);
    EXPECT_GT(now, base);
    EXPECT_LE(now, base / share + 2);  // only its compute-bound part slows
    ++computes;
  }
  EXPECT_GT(computes, 0);
  // The plan says the limit it was priced at.
  EXPECT_EQ(parse_hardware_profile(hardware_profile_to_json(limited.hw), "plan.json").gpu.power_limit_W, 500);
}

TEST(PowerLimit, ALimitThatCannotBePricedIsRefusedSayingWhy) {
  JobOptions j = testing::job("llama2-7b", "h100-sxm-8x", 2, 1, 1, 4);
  j.power_limit = 800;
  const std::string above = testing::error_of([&] { testing::plan_of("1f1b", j); });
  EXPECT_NE(above.find("power_limit"), std::string::npos);
  EXPECT_NE(above.find("175 .. 700 W"), std::string::npos);
  j.power_limit = 100;
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", j); }).find("175 .. 700 W"), std::string::npos);
  JobOptions a100 = testing::job("llama2-7b", "a100-80g-sxm-8x", 2, 1, 1, 4);
  a100.power_limit = 300;
  EXPECT_NE(testing::error_of([&] { testing::plan_of("1f1b", a100); }).find("power_clock_exponent"),
            std::string::npos);

  // In a profile: the limit, its law and their sources, each named by its path; the figures survive a write
  // and a read.
  const std::string path = std::string(PIPESIM_SOURCE_DIR) + "/hw_profiles/h100-sxm-8x.json";
  const nlohmann::json profile = nlohmann::json::parse(detail::read_text_file(path));
  auto profile_error = [](auto edit) { return testing::edited_profile_error("h100-sxm-8x", edit); };
  EXPECT_NE(
      profile_error([](nlohmann::json& p) { p["gpu"]["power_limit_W"] = 900; }).find("/gpu/power_limit_W"),
      std::string::npos);
  EXPECT_NE(profile_error([](nlohmann::json& p) {
              p["gpu"]["power_limit_W"] = 500;
              p["gpu"].erase("power_clock_exponent");
              p["gpu"]["sources"].erase("power_clock_exponent");
            }).find("/gpu/power_limit_W"),
            std::string::npos);
  EXPECT_NE(profile_error([](nlohmann::json& p) {
              p["gpu"]["power_clock_exponent"] = 0.1;
            }).find("/gpu/power_clock_exponent"),
            std::string::npos);
  EXPECT_NE(profile_error([](nlohmann::json& p) {
              p["gpu"]["sources"].erase("power_clock_exponent");
            }).find("/gpu/sources/power_clock_exponent"),
            std::string::npos);
  nlohmann::json capped = profile;
  capped["gpu"]["power_limit_W"] = 500;
  capped["gpu"]["sources"]["power_limit_W"] = "the site's limit";
  const HardwareProfile hw = parse_hardware_profile(capped.dump(), "mine.json");
  const HardwareProfile again = parse_hardware_profile(hardware_profile_to_json(hw), "again.json");
  EXPECT_EQ(again.gpu.power_limit_W, 500);
  EXPECT_EQ(again.gpu.power_clock_exponent, 3.32);
  EXPECT_NEAR(again.gpu.compute_clock_share(), std::pow(500.0 / 700.0, 1 / 3.32), 1e-15);
}

}  // namespace
}  // namespace pipesim::sim
