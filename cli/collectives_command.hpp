// `pipesim collectives --hw PROFILE`: a collective alone at each message size, as nccl-tests reports it
// (time, algorithm bandwidth, bus bandwidth) and as every simulated plan times it, so that a hardware profile
// can be held to the nccl-tests results of the machine it describes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pipesim::cli {

struct CollectivesOptions {
  std::string hw = "h100-sxm-8x";
  std::string op = "all-reduce";   ///< all-reduce | all-gather | reduce-scatter
  std::int32_t gpus_per_node = 0;  ///< 0: the node's GPUs
  std::int32_t nodes = 1;
  std::int64_t min_bytes = 1 << 20, max_bytes = std::int64_t{1} << 30;
  std::int32_t step_factor = 2;
  std::string format = "table";
  /// An nccl-tests output to hold the profile to: its collective, nodes, GPUs a node and sizes are priced,
  /// and each size's measured bus bandwidth printed beside the prediction (empty: none).
  std::string against;
};

int run_collectives(const CollectivesOptions& options);

/// `pipesim calibrate --from-nccl-tests FILE...`: writes `base` (a profile name or file; default: the shipped
/// profile of the GPU the outputs name) with its network's bus bandwidth by node count taken from the
/// nccl-tests outputs at `message_bytes` (0: the largest size every output ran), as profile `name` to `out`.
int run_calibrate_from_nccl_tests(const std::vector<std::string>& files, const std::string& base,
                                  const std::string& out, const std::string& name,
                                  std::int64_t message_bytes);

}  // namespace pipesim::cli
