#include "pipesim/sim/workload/sharding.hpp"

#include <algorithm>
#include <utility>

namespace pipesim::sim {

namespace {

std::int64_t shard(std::int64_t bytes, std::int32_t ranks) {
  return (bytes + ranks - 1) / ranks;  // the last shard is padded, as ZeRO and FSDP flatten and pad
}

}  // namespace

ShardedStateBytes sharded_state_bytes(std::int64_t weights, std::int64_t trainable,
                                      const DataParallelSharding& s) {
  const std::int32_t n = std::max(1, s.shard_group);
  ShardedStateBytes b;
  const std::int64_t opt = kShardOptimizerBytes * trainable, grads = kShardGradBytes * trainable,
                     w = kShardWeightBytes * weights;
  b.optimizer = s.stage >= ZeroStage::k1 ? shard(opt, n) : opt;
  b.grads = s.stage >= ZeroStage::k2 ? shard(grads, n) : grads;
  b.weights = s.stage >= ZeroStage::k3 ? shard(w, n) : w;
  if (s.offload_optimizer) {
    // Master weights and moments move to the host, beside staging for the gradients going down and the
    // updated 16-bit weights coming back (the parameters themselves when they are offloaded too).
    b.host += b.optimizer + shard(grads, s.stage >= ZeroStage::k1 ? n : 1);
    if (!s.offload_params) b.host += shard(kShardWeightBytes * trainable, s.stage >= ZeroStage::k1 ? n : 1);
    b.optimizer = 0;
  }
  if (s.offload_params) {
    b.host += b.weights;
    b.weights = 0;
  }
  if (s.offload_to_nvme) std::swap(b.host, b.nvme);  // host memory keeps only transfer buffers
  return b;
}

std::string describe(const DataParallelSharding& s) {
  std::string out = s.hybrid                   ? "fsdp-hybrid"
                    : s.stage == ZeroStage::k0 ? "ddp"
                                               : "zero-" + std::to_string(static_cast<int>(s.stage));
  if (s.offload_optimizer && s.offload_params)
    out += "+offload-both";
  else if (s.offload_optimizer)
    out += "+offload-optimizer";
  else if (s.offload_params)
    out += "+offload-params";
  if (s.offload_to_nvme) out += "@nvme";
  return out;
}

}  // namespace pipesim::sim
