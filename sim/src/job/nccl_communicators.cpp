#include "job/nccl_communicators.hpp"

#include <algorithm>
#include <array>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/hardware/nccl_memory.hpp"

namespace pipesim::sim {

namespace {

constexpr std::array<const char*, 8> kGroups = {
    "world", "tp", "cp", "dp", "pp", "tp-pp", "first-last-stage", "pp-neighbours"};

struct Strides {
  std::int64_t tp = 1, cp = 1, dp = 1, pp = 1;
};

Strides strides_of(const RankLayout& l) {
  Strides s;
  s.cp = l.tp;
  const std::int64_t inner = std::int64_t{l.tp} * l.cp;
  s.dp = l.dp_inside_pp ? inner : inner * l.pp;
  s.pp = l.dp_inside_pp ? inner * l.dp : inner;
  return s;
}

/// The ranks of rank 0's `group` (any but `world`), sorted.
std::vector<std::int64_t> ranks_of(const std::string& group, const RankLayout& l, const Strides& s) {
  std::vector<std::int64_t> ranks;
  auto line = [&](std::int32_t size, std::int64_t stride) {
    for (std::int32_t k = 0; k < size; ++k) ranks.push_back(k * stride);
  };
  if (group == "tp") {
    line(l.tp, s.tp);
  } else if (group == "cp") {
    line(l.cp, s.cp);
  } else if (group == "dp") {
    line(l.dp, s.dp);
  } else if (group == "pp") {
    line(l.pp, s.pp);
  } else if (group == "tp-pp") {
    for (std::int32_t i = 0; i < l.tp; ++i)
      for (std::int32_t j = 0; j < l.pp; ++j) ranks.push_back(i * s.tp + j * s.pp);
  } else if (group == "first-last-stage") {
    ranks = {0};
    if (l.pp > 1) ranks.push_back((l.pp - 1) * s.pp);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

std::int32_t on_first_node(const std::vector<std::int64_t>& ranks, std::int32_t gpus_per_node) {
  return static_cast<std::int32_t>(
      std::count_if(ranks.begin(), ranks.end(), [&](std::int64_t r) { return r < gpus_per_node; }));
}

/// The two-rank communicator and send/receive channels of each pipeline peer rank 0 exchanges with.
std::int64_t pipeline_peer_bytes(const RankLayout& l, const Strides& s, const HardwareProfile& hw) {
  if (l.pp < 2) return 0;
  std::vector<std::int64_t> peers = {s.pp};
  if (l.virtual_stages > 1 && l.pp > 2) peers.push_back((l.pp - 1) * s.pp);
  std::int64_t bytes = 0;
  for (std::int64_t peer : peers)
    bytes += nccl_communicator_bytes(hw, 2, on_first_node({0, peer}, hw.node.gpus)) + nccl_peer_bytes(hw);
  return bytes;
}

}  // namespace

void check_communicator_group(const std::string& group) {
  if (std::find(kGroups.begin(), kGroups.end(), group) == kGroups.end())
    throw InputError("", "",
                     "unknown group '" + group +
                         "'; valid: world, tp, cp, dp, pp, tp-pp, first-last-stage, pp-neighbours");
}

std::int64_t rank0_communicator_bytes(const std::vector<std::string>& groups, const RankLayout& layout,
                                      const HardwareProfile& hw) {
  const Strides s = strides_of(layout);
  std::vector<std::vector<std::int64_t>> made;
  std::int64_t bytes = 0;
  for (const std::string& group : groups) {
    if (group == "pp-neighbours") {
      bytes += pipeline_peer_bytes(layout, s, hw);
      continue;
    }
    if (group == "world") {  // every rank, the first node's all on it; never shared
      const std::int64_t gpus = std::int64_t{layout.tp} * layout.cp * layout.dp * layout.pp;
      bytes += nccl_communicator_bytes(hw, static_cast<std::int32_t>(gpus),
                                       static_cast<std::int32_t>(std::min<std::int64_t>(gpus, hw.node.gpus)));
      continue;
    }
    const std::vector<std::int64_t> ranks = ranks_of(group, layout, s);
    if (std::find(made.begin(), made.end(), ranks) != made.end()) continue;
    made.push_back(ranks);
    bytes += nccl_communicator_bytes(hw, static_cast<std::int32_t>(ranks.size()),
                                     on_first_node(ranks, hw.node.gpus));
  }
  return bytes;
}

}  // namespace pipesim::sim
