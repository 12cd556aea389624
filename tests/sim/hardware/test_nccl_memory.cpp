// The device memory of NCCL's communicators, counted by hand from NVIDIA/nccl v2.21.5-1 for an HGX H100 node
// (24 collective channels, 32 send/receive channels a peer, NVLS).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/hardware/nccl_memory.hpp"
#include "test_helpers.hpp"

namespace pipesim::sim {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

TEST(NcclMemory, ACommunicatorsBuffersCountedByHand) {
  // A connection's receiver holds the LL (8 lines x 512 threads x 8 steps x 16 B), LL128 (120 x 640 x 8 x
  // 8 B) and Simple (4 MiB) buffers and a head, rounded up to 2 MiB: 10 MiB; its sender 2 MiB.
  const std::int64_t protocols = 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8 + (std::int64_t{1} << 22);
  EXPECT_EQ(kNcclReceiveBytes, (protocols + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB));
  EXPECT_EQ(kNcclReceiveBytes, 10 * kMiB);
  const HardwareProfile hw = load_hardware_profile("h100-p5-8x");
  ASSERT_EQ(hw.node.nvlink.nccl_channels, 24);
  // Two ranks: a send and a receive connection to the other on each of 24 channels, 24 x 12 MiB; the tree is
  // the same pair; no NVLS for two GPUs.
  EXPECT_EQ(nccl_communicator_bytes(hw, 2, 2), 288 * kMiB);
  // Four: the ring's 288 MiB, the tree's other direction 288 MiB, NVLS 24 x 2 x (1 + 2) MiB for each of
  // the 4 GPUs: 576 MiB.
  EXPECT_EQ(nccl_communicator_bytes(hw, 4, 4), 1152 * kMiB);
  EXPECT_EQ(nccl_communicator_bytes(hw, 8, 8), 1728 * kMiB);
  // Sixteen over two nodes: NVLS over the node's eight.
  EXPECT_EQ(nccl_communicator_bytes(hw, 16, 8), 1728 * kMiB);
  // Two GPUs of a node in a group across nodes: no NVLS.
  EXPECT_EQ(nccl_communicator_bytes(hw, 16, 2), 576 * kMiB);
  EXPECT_EQ(nccl_communicator_bytes(hw, 1, 1), 0);
  // A peer: a send and a receive connection on each of 32 channels.
  EXPECT_EQ(nccl_peer_bytes(hw), 384 * kMiB);
  // A profile that does not state NCCL's channels counts nothing.
  const HardwareProfile a100 = load_hardware_profile("a100-80g-sxm-8x");
  EXPECT_EQ(nccl_communicator_bytes(a100, 8, 8), 0);
  EXPECT_EQ(nccl_peer_bytes(a100), 0);
}

TEST(NcclMemory, AProfilesChannelsComeAsAPair) {
  const nlohmann::json p5 = nlohmann::json::parse(
      detail::read_text_file(std::string(PIPESIM_SOURCE_DIR) + "/hw_profiles/h100-p5-8x.json"));
  auto err = [](const nlohmann::json& j) {
    return testing::error_of([&] { parse_hardware_profile(j.dump(), "p5.json"); });
  };
  nlohmann::json j = p5;
  j["node"]["nvlink"].erase("nccl_p2p_channels_per_peer");
  EXPECT_EQ(err(j).rfind("p5.json: /node/nvlink/nccl_channels: NCCL's channels come as a pair", 0), 0u);
  j = p5;
  j["node"]["nvlink"].erase("nccl_channels");
  j["node"]["nvlink"].erase("nccl_p2p_channels_per_peer");
  EXPECT_EQ(err(j).rfind("p5.json: /node/nvlink/nvls: NVLS buffers are sized by NCCL's channels", 0), 0u);
  j = p5;
  j["node"]["nvlink"]["nccl_channels"] = 0;
  EXPECT_EQ(err(j).rfind("p5.json: /node/nvlink/nccl_channels: ", 0), 0u);
  // Written back as read.
  const HardwareProfile hw = parse_hardware_profile(p5.dump(), "p5.json");
  const HardwareProfile again = parse_hardware_profile(hardware_profile_to_json(hw), "again.json");
  EXPECT_EQ(again.node.nvlink.nccl_channels, 24);
  EXPECT_EQ(again.node.nvlink.nccl_p2p_channels_per_peer, 32);
  EXPECT_TRUE(again.node.nvlink.nvls);
}

}  // namespace
}  // namespace pipesim::sim
