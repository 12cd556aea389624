#include "pipesim/sim/job/collective_probe.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::sim {

CollectiveProbe probe_collective(const HardwareProfile& hw, CollectiveKind kind, std::int32_t gpus_per_node,
                                 std::int32_t nodes, std::int64_t message_bytes) {
  if (gpus_per_node < 1 || gpus_per_node > hw.node.gpus)
    throw InputError(
        Option{"gpus-per-node"}, "",
        fmt::format("{} GPUs a node; valid: 1 to the {} of a {} node", gpus_per_node, hw.node.gpus, hw.name));
  const std::int32_t n = gpus_per_node * nodes;
  if (n < 2) throw InputError(Option{"nodes"}, "", "a collective over one GPU; valid: 2 GPUs or more");
  Plan plan;
  plan.hw = hw;
  plan.nodes = nodes;
  plan.meta.schedule = "collective";
  plan.meta.replicas = "explicit";
  for (std::int32_t r = 0; r < n; ++r) {
    plan.devices.push_back(
        {fmt::format("gpu{}", r), DeviceKind::kGpu, r / gpus_per_node, r % gpus_per_node, 0});
    plan.streams.push_back({r, StreamKind::kCollective, "collective"});
  }
  // As a plan's data-parallel ring (lowering/layout.cpp): where the group leaves the first node (or NVLink
  // domain), each member's neighbour is the member as far along in the next one, and NCCL's rings leave
  // through every member's NIC, each carrying 1/k of a member's bytes, k members a domain.
  auto node_of = [&](std::int32_t r) { return r / gpus_per_node; };
  std::int32_t offset = 1, in_domain = 0;
  for (std::int32_t r = 0; r < n; ++r) in_domain += hw.nvlink_domain_shared(0, node_of(r)) ? 1 : 0;
  for (std::int32_t r = 1; r < n; ++r)
    if (!hw.nvlink_domain_shared(0, node_of(r))) {
      offset = r;
      break;
    }
  const bool leaves = in_domain < n;
  const std::int32_t rails = leaves ? in_domain : 1, domains = leaves ? n / in_domain : 1;
  const bool all_reduce = kind == CollectiveKind::kAllReduce;
  const std::int32_t factor = all_reduce ? 2 : 1;
  CollectiveProbe probe;
  probe.nccl = nccl_timing(hw, kind, n, domains, message_bytes);
  const OpKind op_kind = all_reduce                           ? OpKind::kAllReduce
                         : kind == CollectiveKind::kAllGather ? OpKind::kAllGather
                                                              : OpKind::kReduceScatter;
  for (std::int32_t r = 0; r < n; ++r) {
    TransferWork w;
    w.src = r;
    w.dst = (r + offset) % n;
    const double ring_bytes = static_cast<double>(factor) * (n - 1) * static_cast<double>(message_bytes) / n;
    w.bytes = std::llround(ring_bytes / rails * probe.nccl.wire_factor);
    w.latency_steps = factor * (n - 1);
    set_latency_ns(w, std::llround(probe.nccl.latency_us * 1e3));
    w.group = 0;
    w.group_size = n;
    w.message_bytes = message_bytes;
    plan.ops.emplace_back(r, op_kind, OpTags{}, Payload{w}, -1);
  }
  const Timeline t = Engine{}.run(plan);
  probe.time = *std::max_element(t.end.begin(), t.end.end());
  const double seconds = std::max<double>(1, static_cast<double>(probe.time)) * 1e-9;
  probe.algbw_GBps = static_cast<double>(message_bytes) / seconds / 1e9;
  probe.busbw_GBps = probe.algbw_GBps * factor * (n - 1) / n;
  return probe;
}

}  // namespace pipesim::sim
