#include <cmath>

#include <gtest/gtest.h>

#include "test_helpers.hpp"

#include "core/json_reader.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/hardware/hardware.hpp"

namespace pipesim::sim {
namespace {

TEST(Hardware, ShippedProfilesLoadAndRoundTrip) {
  auto names = shipped_hardware_profiles();
  for (const char* want : {"rtx4090-8x", "a100-80g-sxm-8x", "h100-sxm-8x"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  for (const auto& n : names) {
    HardwareProfile hw = load_hardware_profile(n);
    std::string once = hardware_profile_to_json(hw);
    HardwareProfile again = parse_hardware_profile(once, "again.json");
    EXPECT_EQ(hardware_profile_to_json(again), once) << n;
    // Efficiency and copy curves never exceed physics.
    for (const auto& p : hw.gpu.gemm_efficiency) EXPECT_LE(p.y, 1.0);
  }
}

TEST(Hardware, CurvesInterpolateInLogSpaceAndClamp) {
  std::vector<CurvePoint> c{{1, 0.1}, {100, 0.5}};
  EXPECT_DOUBLE_EQ(interpolate_log_x(c, 0.5), 0.1);
  EXPECT_DOUBLE_EQ(interpolate_log_x(c, 1000), 0.5);
  EXPECT_NEAR(interpolate_log_x(c, 10), 0.3, 1e-12);
}

TEST(Hardware, StrictSchema) {
  HardwareProfile hw = load_hardware_profile("rtx4090-8x");
  std::string good = hardware_profile_to_json(hw);
  auto err = [](const std::string& text) {
    return testing::error_of([&] { parse_hardware_profile(text, "hw.json"); });
  };
  EXPECT_EQ(err(good), "no error");
  std::string typo = good;
  typo.replace(typo.find("\"hbm_GBps\""), 10, "\"hbm_GBs\"");
  EXPECT_NE(err(typo).find("hw.json: /gpu/hbm_GBps: missing required key"), std::string::npos) << err(typo);
  std::string nosource = good;
  nosource.replace(nosource.find("\"nic_GBps\": \"one"), 12, "\"nic_Gbps\": ");
  EXPECT_NE(err(nosource).find("/network/sources"), std::string::npos) << err(nosource);
  std::string twice = good;
  // Each GPU on its own root port: the second "switch" names GPU 0 again.
  twice.replace(twice.find("[\n          1\n"), 13, "[\n          0\n");
  EXPECT_NE(err(twice).find("GPU 0 is already under switch 0"), std::string::npos) << err(twice);
}

TEST(Hardware, FP8GemmsRunOnTheirOwnMeasuredCurve) {
  // h100-sxm-8x holds Azure's FP8 cuBLASLt measurement: 8192^3 (1,099.5 GFLOP) at 1,290.1 TFLOP/s of the
  // 1,979 FP8 peak. A GEMM of that size in FP8 takes its FLOPs over that rate; in bf16 it stays on the
  // shared curve (0.75 of 989 from 1,000 GFLOP).
  const HardwareProfile h100 = load_hardware_profile("h100-sxm-8x");
  const double gflop = 2.0 * 8192 * 8192 * 8192 / 1e9;
  EXPECT_NEAR(interpolate_log_x(h100.gemm_curve("fp8"), gflop), 1290.1 / 1979, 1e-4);
  EXPECT_EQ(&h100.gemm_curve("bf16"), &h100.gpu.gemm_efficiency);
  const double fp8_ns = static_cast<double>(h100.compute_ns(gflop * 1e9, gflop, 0, "fp8"));
  EXPECT_NEAR(fp8_ns, gflop * 1e9 / 1290.1e12 * 1e9, fp8_ns * 1e-4);
  EXPECT_EQ(h100.compute_ns(gflop * 1e9, gflop, 0, "bf16"),
            static_cast<std::int64_t>(std::ceil(gflop * 1e9 / (989e12 * 0.75) * 1e9)));
  // A curve for a dtype the profile has no peak for, and one without a source, are one line each.
  nlohmann::json j = nlohmann::json::parse(hardware_profile_to_json(h100));
  auto err = [](const nlohmann::json& p) {
    return testing::error_of([&] { parse_hardware_profile(p.dump(), "hw.json"); });
  };
  j["gpu"]["gemm_efficiency_by_dtype"]["fp4"] = j["gpu"]["gemm_efficiency_by_dtype"]["fp8"];
  EXPECT_NE(
      err(j).find("hw.json: /gpu/gemm_efficiency_by_dtype/fp4: no peak_tflops for this dtype; valid: bf16"),
      std::string::npos)
      << err(j);
  j["gpu"]["gemm_efficiency_by_dtype"].erase("fp4");
  j["gpu"]["sources"].erase("gemm_efficiency_by_dtype");
  EXPECT_NE(err(j).find("/gpu/sources/gemm_efficiency_by_dtype"), std::string::npos) << err(j);
}

TEST(Hardware, WhatTheRuntimeHoldsIsMeasuredAndLeavesRoomForTensors) {
  // h100-sxm-8x and h200-sxm-8x carry what the CUDA context, cuBLAS and a NCCL communicator held on an H200;
  // the figure names its source and must leave the tensors some memory.
  const HardwareProfile h200 = load_hardware_profile("h200-sxm-8x");
  EXPECT_EQ(h200.gpu.runtime_reserved_bytes, 1'303'183'360);
  EXPECT_EQ(h200.gpu_tensor_capacity(), h200.gpu.hbm_bytes - 1'303'183'360);
  EXPECT_EQ(load_hardware_profile("rtx4090-8x").gpu.runtime_reserved_bytes, 0);  // not measured
  nlohmann::json j = nlohmann::json::parse(hardware_profile_to_json(h200));
  auto err = [](const nlohmann::json& p) {
    return testing::error_of([&] { parse_hardware_profile(p.dump(), "hw.json"); });
  };
  j["gpu"]["runtime_reserved_bytes"] = j["gpu"]["hbm_bytes"];
  EXPECT_NE(err(j).find("/gpu/runtime_reserved_bytes"), std::string::npos) << err(j);
  j["gpu"]["runtime_reserved_bytes"] = 1'303'183'360;
  j["gpu"]["sources"].erase("runtime_reserved_bytes");
  EXPECT_NE(err(j).find("/gpu/sources/runtime_reserved_bytes"), std::string::npos) << err(j);
}

}  // namespace
}  // namespace pipesim::sim
