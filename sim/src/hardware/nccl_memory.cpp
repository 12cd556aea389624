#include "pipesim/sim/hardware/nccl_memory.hpp"

#include "pipesim/sim/hardware/hardware.hpp"

namespace pipesim::sim {

std::int64_t nccl_communicator_bytes(const HardwareProfile& hw, std::int32_t ranks,
                                     std::int32_t local_ranks) {
  const std::int64_t channels = hw.node.nvlink.nccl_channels;
  if (ranks < 2 || channels == 0) return 0;
  const std::int64_t connection = kNcclSendBytes + kNcclReceiveBytes;
  const std::int64_t ring = channels * connection;
  const std::int64_t tree = ranks >= 3 ? channels * connection : 0;
  const std::int64_t nvls =
      hw.node.nvlink.nvls && local_ranks >= 3 ? channels * kNvlsBytesPerChannelHead * local_ranks : 0;
  return ring + tree + nvls;
}

std::int64_t nccl_peer_bytes(const HardwareProfile& hw) {
  return std::int64_t{hw.node.nvlink.nccl_p2p_channels_per_peer} * (kNcclSendBytes + kNcclReceiveBytes);
}

}  // namespace pipesim::sim
