// The NCCL collectives the calibration measures: bus bandwidth as nccl-tests reports it, and what a hardware
// profile takes from it. The measurement itself needs GPUs (calibrate/src/cuda_collectives.cu).
#include <gtest/gtest.h>

#include "pipesim/calibrate/collective_bandwidth.hpp"

namespace pipesim::calibrate {
namespace {

TEST(Collectives, BusBandwidthFactorsAreNcclTests) {
  // nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n.
  EXPECT_DOUBLE_EQ(collective_bus_factor("all_reduce", 8), 1.75);
  EXPECT_DOUBLE_EQ(collective_bus_factor("all_gather", 8), 0.875);
  EXPECT_DOUBLE_EQ(collective_bus_factor("reduce_scatter", 2), 0.5);
  EXPECT_DOUBLE_EQ(collective_bus_factor("all_reduce", 2), 1.0);
  EXPECT_EQ(collective_bus_factor("all_reduce", 1), 0);  // one rank copies locally
  EXPECT_EQ(collective_bus_factor("broadcast", 8), 0);
}

CudaCalibration measured(int ranks) {
  CudaCalibration c;
  c.collectives_note = "NCCL 2.28.3 (libnccl.so.2), 8 GPUs";
  for (std::int64_t bytes : {std::int64_t{1} << 20, std::int64_t{16} << 20, std::int64_t{256} << 20}) {
    const double algbw = bytes == (1 << 20) ? 40 : bytes == (16 << 20) ? 200 : 270;
    c.collectives.push_back(
        {"all_reduce", bytes, ranks, algbw, algbw * collective_bus_factor("all_reduce", ranks), 0.01, 5});
    c.collectives.push_back({"all_gather", bytes, ranks, algbw, algbw * 0.875, 0.01, 5});
  }
  return c;
}

TEST(Collectives, MeasuredAllReduceBecomesTheNvlinkBusBandwidthBySize) {
  sim::HardwareProfile hw = sim::load_hardware_profile("h100-sxm-8x");
  ASSERT_TRUE(merge_collectives(measured(8), hw, "calibrated: test"));
  const auto& curve = hw.node.nvlink.allreduce_busbw_by_size;
  ASSERT_EQ(curve.size(), 3u);
  EXPECT_DOUBLE_EQ(curve[0].x, 1 << 20);
  EXPECT_DOUBLE_EQ(curve[0].y, 70);  // 40 GB/s of algorithm bandwidth x 1.75
  EXPECT_DOUBLE_EQ(curve[2].y, 472.5);
  EXPECT_DOUBLE_EQ(hw.node.nvlink.allreduce_busbw_GBps, 472.5);
  EXPECT_NE(hw.node.nvlink.sources.at("allreduce_busbw_by_size").find("NCCL all-reduce over 8 GPUs"),
            std::string::npos);
  // The profile still reads back.
  EXPECT_NO_THROW(sim::parse_hardware_profile(sim::hardware_profile_to_json(hw), "again.json"));
}

TEST(Collectives, OneRankOrNoNvlinkLeavesTheProfileAsItWas) {
  sim::HardwareProfile hw = sim::load_hardware_profile("h100-sxm-8x");
  const auto before = hw.node.nvlink.allreduce_busbw_by_size;
  EXPECT_FALSE(merge_collectives(measured(1), hw, "calibrated: test"));
  EXPECT_EQ(hw.node.nvlink.allreduce_busbw_by_size.size(), before.size());
  sim::HardwareProfile pcie = sim::load_hardware_profile("rtx4090-8x");  // no NVLink: rings priced per link
  EXPECT_FALSE(merge_collectives(measured(8), pcie, "calibrated: test"));
  EXPECT_TRUE(pcie.node.nvlink.allreduce_busbw_by_size.empty());
}

}  // namespace
}  // namespace pipesim::calibrate
