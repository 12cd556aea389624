// Sharded data parallelism (ZeRO stages 1-3, PyTorch FSDP and its hybrid HSDP form) and offload of the
// optimizer and the parameters to host memory (ZeRO-Offload, ZeRO-Infinity): what a data-parallel group
// shards, and the bytes each GPU and its host keep for it.
#pragma once

#include <cstdint>
#include <string>

namespace pipesim::sim {

/// What the data-parallel group shards (ZeRO paper, Rajbhandari et al. 2020): 0 nothing (plain DDP, a
/// gradient all-reduce), 1 the optimizer state, 2 also the gradients, 3 also the parameters.
enum class ZeroStage : std::uint8_t { k0, k1, k2, k3 };

struct DataParallelSharding {
  ZeroStage stage = ZeroStage::k0;
  /// Data-parallel ranks that share one shard: the whole group (ZeRO, FSDP full shard) or the ranks on one
  /// node (HSDP: shard inside a node, replicate across nodes). 0 until the job is resolved.
  std::int32_t shard_group = 0;
  bool hybrid = false;  ///< HSDP: shards replicated across nodes, gradients all-reduced between them
  bool offload_optimizer = false;    ///< fp32 master weights and Adam moments on the host, CPU Adam
  bool offload_params = false;       ///< 16-bit parameter shards on the host, fetched before each gather
  bool offload_to_nvme = false;      ///< the offloaded state lives on the node's NVMe volume (ZeRO-Infinity)
  std::int32_t prefetch_layers = 1;  ///< ZeRO-3: layers gathered ahead of the one computing
};

/// Mixed-precision Adam per trained parameter (ZeRO paper): 2 B 16-bit weight, 2 B 16-bit gradient, K = 12 B
/// of fp32 master weight, momentum and variance.
inline constexpr std::int64_t kShardWeightBytes = 2, kShardGradBytes = 2, kShardOptimizerBytes = 12;

/// Bytes one GPU and its host keep for `weights` parameters of which `trainable` are trained (the rest are
/// frozen: weights only), when `s.shard_group` ranks share them.
struct ShardedStateBytes {
  std::int64_t weights = 0, grads = 0, optimizer = 0;  ///< on the GPU
  std::int64_t host = 0;                               ///< offloaded to host memory
  std::int64_t nvme = 0;                               ///< offloaded to the NVMe volume instead
  std::int64_t gpu() const { return weights + grads + optimizer; }
};
ShardedStateBytes sharded_state_bytes(std::int64_t weights, std::int64_t trainable,
                                      const DataParallelSharding& s);

/// "ddp", "zero-1", "zero-2", "zero-3" or "fsdp-hybrid", with "+offload-optimizer", "+offload-params" or
/// "+offload-both", and "@nvme" when offloaded there: how plans and reports name the data-parallel mode.
std::string describe(const DataParallelSharding& s);

}  // namespace pipesim::sim
