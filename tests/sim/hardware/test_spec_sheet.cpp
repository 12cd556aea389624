// Spec-sheet profiles (`pipesim-spec`): datasheet figures completed with stated default efficiencies.
#include <cmath>

#include <gtest/gtest.h>

#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/job/job.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

// An H100 SXM server as its datasheets describe it.
const char* kH100Sheet = R"({
  "format": "pipesim-spec", "version": 1, "name": "h100-from-spec", "gpu_hour_usd": 3.0,
  "gpu": {"model": "H100 SXM", "peak_tflops": {"bf16": 989, "fp16": 989, "fp8": 1979, "fp32": 67},
          "hbm_GB": 80, "hbm_TBps": 3.35, "board_W": 700},
  "node": {"gpus": 8, "pcie_gen": 5, "nvlink_GBps": 900},
  "host": {"memory_GB": 2048, "cores": 112},
  "network": {"nic_Gbps": 400}
})";

TEST(SpecSheet, DatasheetFiguresAreKeptAndTheRestCompletedWithStatedDefaults) {
  const HardwareProfile hw = parse_hardware_profile(kH100Sheet, "h100.json");
  EXPECT_EQ(hw.name, "h100-from-spec");
  EXPECT_DOUBLE_EQ(hw.gpu.peak_tflops.at("fp8"), 1979);
  EXPECT_EQ(hw.gpu.hbm_bytes, 80000000000);
  EXPECT_DOUBLE_EQ(hw.gpu.hbm_GBps, 3350);
  EXPECT_DOUBLE_EQ(hw.gpu.board_W, 700);
  EXPECT_DOUBLE_EQ(hw.node.pcie.lane_GBps, 55);              // Gen5 x16 pinned copies
  EXPECT_DOUBLE_EQ(hw.node.nvlink.GBps_per_direction, 450);  // 900 bidirectional
  EXPECT_DOUBLE_EQ(hw.network.nic_GBps, 50);                 // 400 Gb/s
  EXPECT_EQ(hw.node.pcie.switches.size(), 4u);
  // At H100's peak the default GEMM and bus-bandwidth curves are the h100-sxm-8x ones.
  const HardwareProfile ref = load_hardware_profile("h100-sxm-8x");
  ASSERT_EQ(hw.gpu.gemm_efficiency.size(), ref.gpu.gemm_efficiency.size());
  for (std::size_t i = 0; i < ref.gpu.gemm_efficiency.size(); ++i) {
    EXPECT_DOUBLE_EQ(hw.gpu.gemm_efficiency[i].x, ref.gpu.gemm_efficiency[i].x);
    EXPECT_DOUBLE_EQ(hw.gpu.gemm_efficiency[i].y, ref.gpu.gemm_efficiency[i].y);
  }
  ASSERT_EQ(hw.node.nvlink.allreduce_busbw_by_size.size(), ref.node.nvlink.allreduce_busbw_by_size.size());
  EXPECT_DOUBLE_EQ(hw.node.nvlink.allreduce_busbw_by_size[2].y, 423);
  // Adam: 0.25 G params/s per thread up to 90% of the default 300 GB/s over 28 B (9.64 G params/s).
  EXPECT_DOUBLE_EQ(hw.adam_params_per_s(8), 2e9);
  EXPECT_DOUBLE_EQ(hw.adam_params_per_s(112), std::round(0.9 * 300e9 / 28));
  // Every completed figure says where it came from.
  EXPECT_NE(hw.gpu.sources.at("gemm_efficiency").find("default:"), std::string::npos);
  EXPECT_EQ(hw.gpu.sources.at("hbm_GBps"), "spec sheet");
  // A GPU at twice the peak needs GEMMs twice the size to reach the same share of it.
  std::string fast = kH100Sheet;
  fast.replace(fast.find("\"bf16\": 989"), 11, "\"bf16\": 1978");
  EXPECT_DOUBLE_EQ(parse_hardware_profile(fast, "fast.json").gpu.gemm_efficiency[3].x, 200);
}

TEST(SpecSheet, PredictsLikeTheCalibratedProfileOfTheSameGpu) {
  // The shipped H100 profile differs in figures a spec sheet does not have: usable HBM, host CPU, NVMe, and a
  // 3 us kernel launch where the default is 4 us.
  auto step_on = [](const HardwareProfile& hw) {
    JobOptions j = testing::job("llama3-8b", "h100-sxm-8x", 2, 4, 1, 8);
    j.loaded_hw = std::make_shared<const HardwareProfile>(hw);
    return static_cast<double>(
        testing::step_ns(testing::simulate("1f1b", make_schedule_input(j, find_schedule("1f1b")))));
  };
  HardwareProfile spec = parse_hardware_profile(kH100Sheet, "h100.json");
  const HardwareProfile ref = load_hardware_profile("h100-sxm-8x");
  EXPECT_NEAR(step_on(spec) / step_on(ref), 1.0, 0.05);
  spec.gpu.launch_overhead = ref.gpu.launch_overhead;
  EXPECT_NEAR(step_on(spec) / step_on(ref), 1.0, 0.005);
}

TEST(SpecSheet, NvlinkDomainsAndBadFigures) {
  std::string rack = kH100Sheet;
  rack.replace(rack.find("\"gpus\": 8"), 9, "\"gpus\": 4, \"nvlink_domain_gpus\": 72");
  EXPECT_EQ(parse_hardware_profile(rack, "rack.json").node.nvlink.domain_nodes, 18);
  auto err = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return testing::error_of([&] { parse_hardware_profile(text, "s.json"); });
  };
  EXPECT_NE(err(kH100Sheet, "\"hbm_GB\"", "\"hbm_Gb\"").find("s.json: /gpu"), std::string::npos);
  EXPECT_NE(err(kH100Sheet, "\"pcie_gen\": 5", "\"pcie_gen\": 7").find("/node/pcie_gen"), std::string::npos);
  EXPECT_NE(err(rack, "72", "70").find("/node/nvlink_domain_gpus: 70 GPUs"), std::string::npos);
  EXPECT_NE(err(kH100Sheet, "\"bf16\": 989, \"fp16\": 989, ", "").find("needs the dense bf16 or fp16"),
            std::string::npos);
}

}  // namespace
}  // namespace pipesim::sim
