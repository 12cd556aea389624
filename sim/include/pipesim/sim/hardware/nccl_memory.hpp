// The device memory NCCL's communicators hold outside the framework's tensors: buffers for every connection
// to a peer, one connection each way per channel, and NVLink SHARP's (NVLS) buffers, all allocated when the
// communicator is made and kept until it is destroyed. PyTorch's caching allocator does not see them
// (torch.cuda.memory_reserved leaves them out); they take the GPU's memory from the tensors all the same.
// Figures: NVIDIA/nccl v2.21.5-1 (the release PyTorch 2.5 and 2.6 ship), which connects the rings and the
// trees of every channel when the communicator is made (src/init.cc initTransportsRank).
#pragma once

#include <cstdint>

namespace pipesim::sim {

struct HardwareProfile;

/// Bytes the receiving GPU holds for one connection: the LL (512 KiB), LL128 (4.69 MiB) and Simple (4 MiB)
/// buffers and the connection's head, rounded up to CUDA's 2 MiB (src/init.cc DEFAULT_*_BUFFSIZE,
/// src/transport/p2p.cc p2pRecvSetup, ALIGN_SIZE to CUDA_IPC_MIN).
inline constexpr std::int64_t kNcclReceiveBytes = std::int64_t{10} << 20;
/// Bytes the sending GPU holds for one connection: its ncclSendMem rounded up to 2 MiB (p2pSendSetup; on
/// GPUs after Ampere NCCL writes into the receiver's buffers rather than reading from the sender's).
inline constexpr std::int64_t kNcclSendBytes = std::int64_t{2} << 20;
/// NVLS bytes a channel holds for each GPU of the node in the communicator: two buffers of 8 steps of its
/// 128 KiB chunk, each with 2 MiB of head and tail (src/transport/nvls.cc ncclNvlsSetup: nvlsPerRankSize =
/// nChannels x 2 x (buffSize + memSize), times nHeads).
inline constexpr std::int64_t kNvlsBytesPerChannelHead =
    2 * ((std::int64_t{128} << 10) * 8 + (std::int64_t{2} << 20));

/// Device memory one GPU holds for a communicator of `ranks` GPUs, `local_ranks` of them on its node, on
/// `hw` (its `nccl_channels` and `nvls`): a ring's send and receive connection on every channel; for three
/// ranks or more the tree's connections the other way along the chain (a middle rank's; for two the tree
/// is the ring's pair); NVLS buffers where the node runs NVLS and the communicator has three GPUs or more
/// there (src/transport/nvls.cc ncclNvlsInit leaves NVLS off for two). 0 for one rank, or where the profile
/// does not state NCCL's channels.
std::int64_t nccl_communicator_bytes(const HardwareProfile& hw, std::int32_t ranks, std::int32_t local_ranks);

/// Device memory one GPU holds for sending to and receiving from one peer (pipeline stages' activations and
/// gradients): a send and a receive connection on each of `nccl_p2p_channels_per_peer` channels, all made
/// by the first operation with that peer (src/enqueue.cc). 0 where the profile does not state them.
std::int64_t nccl_peer_bytes(const HardwareProfile& hw);

}  // namespace pipesim::sim
