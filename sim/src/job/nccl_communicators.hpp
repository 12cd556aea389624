// The NCCL communicators a framework opens on a job's rank 0, and the device memory they hold
// (hardware/nccl_memory.hpp). Each process group a framework runs an NCCL operation on gets a communicator of
// its own when that first operation runs (PyTorch's ProcessGroupNCCL makes them lazily), and each peer it
// sends to or receives from singly gets a two-rank one (ProcessGroupNCCL::pointToPoint, keyed by the pair).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pipesim::sim {

struct HardwareProfile;

/// Rank 0's place in the job: the parallel sizes and whether data-parallel replicas sit inside pipeline
/// stages (rank order tp-cp-dp-pp) or the other way (tp-cp-pp-dp).
struct RankLayout {
  std::int32_t tp = 1, cp = 1, dp = 1, pp = 1, virtual_stages = 1;
  bool dp_inside_pp = false;
};

/// Throws InputError unless `group` is one of the groups a framework file may name: world, tp, cp, dp, pp,
/// tp-pp (a replica's model-parallel GPUs), first-last-stage (the first and the last stage's GPU of rank 0's
/// replica and TP rank: tied embeddings) or pp-neighbours (its send/receive peers in the pipeline).
void check_communicator_group(const std::string& group);

/// Device memory rank 0 holds for the communicators of `groups` (a framework's `nccl_communicators`, in the
/// order it makes them): each `world` entry a communicator of its own; any other group one communicator per
/// distinct set of ranks (a group of the same ranks as an earlier one is that one: nanotron keeps one
/// process group per rank set); nothing for a group of one GPU (the runtime's own memory counts the
/// one-rank communicator); pp-neighbours a two-rank communicator and its send/receive channels for each
/// stage rank 0 exchanges activations with (the next; with interleaved stages over 3 or more, also the
/// last). GPUs sit on nodes of `hw.node.gpus` in rank order.
std::int64_t rank0_communicator_bytes(const std::vector<std::string>& groups, const RankLayout& layout,
                                      const HardwareProfile& hw);

}  // namespace pipesim::sim
