#include "pipesim/sim/hardware/nccl_tuning.hpp"

#include <algorithm>
#include <limits>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/hardware/hardware.hpp"

namespace pipesim::sim {

namespace {

// NCCL src/graph/tuning.cc ncclTunerConstantsDefaults, in us, [algorithm][protocol] with the algorithms
// {tree, ring} and the protocols {LL, LL128, Simple}.
constexpr double kBaseLatency[2][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}};
constexpr double kNvlinkLatency[2][3] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}};
constexpr double kPciLatency[2][3] = {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}};
constexpr double kNetLatency[2][3] = {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}};
// aws/aws-ofi-nccl src/tuner/nccl_ofi_model.cpp (@ 2daf7d30), the EFA plugin's tuner for P5: its NVLink
// latencies a tree step (model_platform_params nccl_nvlink_lat, Tree: LL, LL128, Simple) and its tree's
// bandwidth, half the ring's (nccl_ofi_tuner_compute_cost, NCCL_ALGO_TREE: internode_bw x rails x channels /
// 2), less the protocols' flags (0.5 for LL, 0.9375 for LL128).
constexpr double kPluginNvlinkTreeLatency[3] = {0.6, 1.25, 28.0};
constexpr double kPluginTreeRateDivisor = 2.0;
constexpr double kPluginProtocolShare[3] = {0.5, 0.9375, 1.0};  // LL, LL128, Simple: the payload's share
// The plugin's model prices a ring all-reduce's bytes as the message over a GPU's NICs times the channels it
// assumes (include/nccl_ofi_param.h TUNER_NUM_CHANNELS, default 8), not as the ring's bus bytes.
constexpr double kPluginChannels = 8;
// getNetOverhead: the CPU proxy's cost of posting each network step (x86 Intel; AMD hosts 2), tripled for
// Simple.
constexpr double kNetOverheadUs = 1.0;
// NVLS-tree (all-reduces across nodes whose GPUs reduce over NVLink SHARP: each node reduces inside its
// NVSwitch, the nodes' trees carry the result, the NVSwitch multicasts it): no base latency, one NVLink step
// of 25 us and 2 x log2(nodes) network steps of 20.9 us with Simple, its only protocol. On two nodes NCCL's
// model gives the network twice a ring's rate, the tree being one exchange between the pair
// (ncclTopoTuneModel: "Handle 2 node case of NVLSTree", interBw x 2).
constexpr double kNvlsTreeNvlinkLatency = 25.0, kNvlsTreeNetLatency = 20.9;
// PAT (all-gather and reduce-scatter with one GPU a node): 8 us of base latency, the network's tree latency
// over 3.5 a level of the nodes' binary tree, a linear 2.8 us a rank, 0.75 of the ring's bandwidth.
constexpr double kPatBaseLatency = 8.0, kPatPerRankUs = 2.8, kPatEfficiency = 0.75;

// ncclTopoGetAlgoTime's corrections to the model (NVIDIA/nccl src/graph/tuning.cc): a tree all-reduce's
// bandwidth by protocol and log2 of its bytes / 64 (64 B .. 256 MB; "trees are not perfectly sticking to the
// model for medium sizes"), and a Simple ring all-reduce across nodes taking 1.4 times its latency once each
// rank's share of a channel reaches 64 B (1.9 before Ampere; "plateau effect of ring"), NCCL's rings counted
// as its 32 (MAXCHANNELS / 2).
constexpr double kTreeCorrection[3][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
constexpr double kRingPlateauLatency = 1.4;
constexpr std::int64_t kRingChannels = 32;

int row(NcclAlgorithm a) {
  return a == NcclAlgorithm::kTree ? 0 : 1;
}
int column(NcclProtocol p) {
  return static_cast<int>(p);
}

/// What the latency the network's plugin reports adds to NCCL's network step (ncclTopoTuneModel:
/// latencyInter, and again for Simple, whose steps also wait for the receiver's flush).
double reported_step_us(double net_reported_us, NcclProtocol protocol) {
  return net_reported_us * (protocol == NcclProtocol::kSimple ? 2 : 1);
}

int log2_floor(std::int32_t n) {
  int k = 0;
  while (n > 1) n >>= 1, ++k;
  return k;
}

/// Share of the link bandwidth a protocol's payload gets (ncclTopoTuneModel's refinements): LL sends a
/// 4-byte flag with every 4 bytes; LL128 8 bytes in every 128 (0.92 as NCCL counts it); a tree all-reduce
/// loses 8 % more, LL on a tree reaches 1/3.8 of it, LL128 on a tree 120/128 across nodes and 7/9 inside one.
double protocol_efficiency(NcclAlgorithm a, NcclProtocol p, std::int32_t nodes) {
  if (a == NcclAlgorithm::kPat) return kPatEfficiency;
  if (a == NcclAlgorithm::kRing) return p == NcclProtocol::kLL ? 0.5 : p == NcclProtocol::kLL128 ? 0.92 : 1.0;
  const double tree = 0.92;
  if (p == NcclProtocol::kLL) return tree / 3.8;
  if (p == NcclProtocol::kLL128) return tree * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0);
  return tree;
}

/// Inside a node whose profile measured NCCL's all-reduce by size, how many times longer a `kind` collective
/// takes than an all-reduce of the same bus bytes: the profile's own one-node measurement of that kind at its
/// message size (`collective_busbw_by_nodes`, nodes 1) against the all-reduce curve there. NVSwitch's
/// in-network reduction speeds up all-reduces only, so on such nodes all-gathers and reduce-scatters run
/// their rings at a lower bus bandwidth. 1 for all-reduces, and where the profile measured no such point.
double one_node_rate_ratio(const HardwareProfile& hw, CollectiveKind kind) {
  if (kind == CollectiveKind::kAllReduce) return 1.0;
  for (const CurvePoint& p : hw.network.busbw_by_nodes[static_cast<std::size_t>(kind)])
    if (p.x == 1.0) {
      const double all_reduce = interpolate_log_x(hw.node.nvlink.allreduce_busbw_by_size,
                                                  static_cast<double>(hw.network.busbw_message_bytes));
      return all_reduce / p.y;
    }
  return 1.0;
}

/// Where the network's plugin tunes NCCL by its model (a profile giving `step_latency_us`; AWS's plugin does
/// so only on platforms without regions, so not on p5), the model's step latency for what it times:
/// all-reduces over more than two nodes (aws-ofi-nccl @ 2daf7d30: src/tuner/nccl_ofi_model.cpp
/// nccl_ofi_tuner_compute_cost models ncclFuncAllReduce and returns -1, NCCL's own selection, for every other
/// collective, and model_get_coll_info_internal_v3 leaves runs on two nodes or fewer to NCCL); null for the
/// rest, which take NCCL's figures.
const std::array<double, 3>* tuned_step_latency(const NetworkSpec& net, CollectiveKind kind,
                                                std::int32_t nodes) {
  return kind == CollectiveKind::kAllReduce && nodes > 2 ? net.step_latency() : nullptr;
}

/// How many times a ring's NIC rate an NVLS-tree's bytes reach (tuning.cc: interBw, doubled on two nodes).
double nvls_tree_nic_share(std::int32_t nodes) {
  return nodes <= 2 ? 2.0 : 1.0;
}

/// The bus bandwidth of an all-reduce of `message_bytes` inside one of `hw`'s nodes by NVLink SHARP, where
/// its GPUs have it and the profile measured that all-reduce by size; 0 otherwise.
double nvls_busbw_GBps(const HardwareProfile& hw, std::int64_t message_bytes) {
  const NvlinkSpec& nv = hw.node.nvlink;
  if (!nv.nvls || nv.allreduce_busbw_by_size.empty()) return 0;
  return interpolate_log_x(nv.allreduce_busbw_by_size, static_cast<double>(message_bytes));
}

}  // namespace

CollectiveLatency parse_collective_latency(const std::string& word) {
  if (word == "nccl") return CollectiveLatency::kNccl;
  if (word == "steps") return CollectiveLatency::kSteps;
  if (word == "none") return CollectiveLatency::kNone;
  throw InputError("", "", "unknown collective latency '" + word + "'; valid: nccl, steps, none");
}

double nccl_latency_us(CollectiveKind kind, NcclAlgorithm algorithm, NcclProtocol protocol,
                       std::int32_t ranks, std::int32_t nodes, bool nvlink,
                       const std::array<double, 3>* net_step_us, double net_reported_us) {
  nodes = std::clamp(nodes, 1, std::max(1, ranks));
  if (algorithm == NcclAlgorithm::kNvlsTree)
    return kNvlsTreeNvlinkLatency +
           2 * log2_floor(nodes) *
               (kNvlsTreeNetLatency + reported_step_us(net_reported_us, NcclProtocol::kSimple));
  const int a = row(algorithm), p = column(protocol);
  if (algorithm == NcclAlgorithm::kPat)
    return kPatBaseLatency +
           log2_floor(nodes) * ((kNetLatency[0][p] + reported_step_us(net_reported_us, protocol)) / 3.5) +
           ranks * kPatPerRankUs;
  // Where the network's plugin tunes NCCL (its step latency given), its model's NVLink figures stand, which
  // give a tree's Simple steps 28 us.
  const double intra = net_step_us && nvlink && algorithm == NcclAlgorithm::kTree
                           ? kPluginNvlinkTreeLatency[p]
                           : (nvlink ? kNvlinkLatency : kPciLatency)[a][p];
  // With one GPU per node the network latency is fully exposed: NCCL takes the tree's figure.
  // Otherwise NCCL's own figure, plus the latency the network's plugin reports.
  const double inter = net_step_us ? (*net_step_us)[static_cast<std::size_t>(p)]
                                   : (ranks == nodes ? kNetLatency[0][p] : kNetLatency[a][p]) +
                                         reported_step_us(net_reported_us, protocol);
  double latency = kBaseLatency[a][p];
  if (algorithm == NcclAlgorithm::kTree)
    return latency + 2 * ((ranks / nodes - 1) * intra + log2_floor(nodes) * inter);
  const bool all_reduce = kind == CollectiveKind::kAllReduce;
  const std::int32_t steps = all_reduce ? 2 * (ranks - 1) : ranks - 1;
  const std::int32_t inter_steps = nodes == 1 ? 0 : all_reduce ? 2 * (nodes - 1) : nodes - 1;
  const double overhead = nodes > 1 ? kNetOverheadUs * (protocol == NcclProtocol::kSimple ? 3 : 1) : 0;
  latency += (steps - inter_steps) * std::max(intra, overhead) + inter_steps * inter;
  return latency;
}

NcclCollective nccl_collective(CollectiveKind kind, std::int32_t ranks, std::int32_t nodes, bool nvlink,
                               std::int64_t message_bytes, double bus_GBps,
                               const std::array<double, 3>* net_step_us, double net_reported_us,
                               double nvls_GBps) {
  NcclCollective best;
  if (ranks < 2) return best;
  const bool all_reduce = kind == CollectiveKind::kAllReduce;
  const double ring_bus = (all_reduce ? 2.0 : 1.0) * (ranks - 1) / ranks * static_cast<double>(message_bytes);
  // Across nodes each of a node's members sends its share of the ring through its own NIC: NCCL's model of
  // the ring's bus bandwidth is its channels times a NIC's, the node's NICs together (ncclTopoTuneModel:
  // nChannels x bwInter).
  const double nic_bytes_per_us = std::max(1e-9, bus_GBps) * 1e3;
  const double bytes_per_us = nodes > 1 ? nic_bytes_per_us * std::max(1, ranks / nodes) : nic_bytes_per_us;
  // Where the plugin tunes the all-reduce, its model's cost: the message over a GPU's NICs and its channels.
  const bool plugin_tuned = net_step_us != nullptr && all_reduce && nodes > 1;
  double best_us = std::numeric_limits<double>::infinity();
  for (NcclAlgorithm a : {NcclAlgorithm::kRing, NcclAlgorithm::kTree, NcclAlgorithm::kPat}) {
    if (a == NcclAlgorithm::kTree && !all_reduce) continue;  // NCCL's trees run all-reduces only
    if (a == NcclAlgorithm::kPat && (all_reduce || ranks != nodes)) continue;
    for (NcclProtocol p : {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple}) {
      if (a == NcclAlgorithm::kPat && p != NcclProtocol::kSimple) continue;
      // LL128 needs NVLink inside the node (ncclTopoTuneModel: typeIntra <= PATH_NVB).
      if (p == NcclProtocol::kLL128 && !nvlink) continue;
      // A tree moves the whole buffer up and down (2 x bytes per GPU) where a ring moves 2(n-1)/n of it.
      const double shape = a == NcclAlgorithm::kTree ? static_cast<double>(ranks) / (ranks - 1) : 1.0;
      double wire = shape / protocol_efficiency(a, p, nodes);
      // Across nodes the plugin's model runs a tree at half the ring's rate, less LL's and LL128's flags.
      if (net_step_us && a == NcclAlgorithm::kTree && nodes > 1)
        wire = kPluginTreeRateDivisor / kPluginProtocolShare[column(p)];
      double latency = nccl_latency_us(kind, a, p, ranks, nodes, nvlink, net_step_us, net_reported_us);
      if (!plugin_tuned && all_reduce) {
        if (a == NcclAlgorithm::kTree) {
          std::int64_t chunks = message_bytes >> 6;
          int log_size = 0;
          while (chunks >>= 1) ++log_size;
          if (log_size < 23) wire /= kTreeCorrection[column(p)][log_size];
        }
        if (a == NcclAlgorithm::kRing && p == NcclProtocol::kSimple && nodes > 1 &&
            message_bytes / (kRingChannels * ranks) >= 64)
          latency *= kRingPlateauLatency;
      }
      const double us = latency + (plugin_tuned ? static_cast<double>(message_bytes) * wire /
                                                      (nic_bytes_per_us * kPluginChannels)
                                                : ring_bus * wire / bytes_per_us);
      if (us < best_us) best_us = us, best = {a, p, latency, wire};
    }
  }
  // NVLS-tree, where the nodes' GPUs reduce over NVLink SHARP and a node holds several of the group's: the
  // ring's bytes at the slower of the node's NVLS all-reduce and its NICs (twice as fast on two nodes). The
  // plugin's model never takes it: its own NVLS-tree (nccl_ofi_model.cpp: 2 x (23 + log2(nodes) x 23) us, at
  // 20/50 of the ring's rate) is slower than its LL128 tree (217.5 us on 32 nodes, at 0.47 of the ring's).
  if (all_reduce && nodes > 1 && ranks / nodes >= 2 && nvls_GBps > 0 && !plugin_tuned) {
    const double nics = bytes_per_us * nvls_tree_nic_share(nodes);
    const double wire = bytes_per_us / std::min(nvls_GBps * 1e3, nics);
    const double latency = nccl_latency_us(kind, NcclAlgorithm::kNvlsTree, NcclProtocol::kSimple, ranks,
                                           nodes, nvlink, net_step_us, net_reported_us);
    if (latency + ring_bus * wire / bytes_per_us < best_us)
      best = {NcclAlgorithm::kNvlsTree, NcclProtocol::kSimple, latency, wire};
  }
  return best;
}

double network_nic_GBps(const HardwareProfile& hw, CollectiveKind kind, std::int32_t nodes) {
  const NetworkSpec& net = hw.network;
  const auto& curve = net.busbw_by_nodes[static_cast<std::size_t>(kind)];
  if (curve.empty() || nodes < 2) return net.nic_GBps;
  const std::int32_t rails = hw.node.gpus, ranks = nodes * rails;
  const double bus_bytes = (kind == CollectiveKind::kAllReduce ? 2.0 : 1.0) * (ranks - 1) / ranks *
                           static_cast<double>(net.busbw_message_bytes);
  const double measured_us = bus_bytes / (interpolate_log_x(curve, nodes) * 1e3);
  // Through the algorithm NCCL runs there, but on two nodes through the ring or tree it would run over the
  // NICs: NCCL's model gives an NVLS-tree's network twice a ring's rate there, so the node's NVLS all-reduce
  // bounds it and the measured rate tells nothing of the NICs. From three nodes on its network runs at a
  // ring's rate.
  const NcclCollective c =
      nccl_collective(kind, ranks, nodes, hw.node.nvlink.GBps_per_direction > 0, net.busbw_message_bytes,
                      net.nic_GBps, tuned_step_latency(net, kind, nodes), net.reported_latency_us,
                      nodes > 2 ? nvls_busbw_GBps(hw, net.busbw_message_bytes) : 0);
  const double wire_us = measured_us - c.latency_us;
  if (wire_us <= 0) return net.nic_GBps;
  return std::min(net.nic_GBps, bus_bytes * c.wire_factor / rails / (wire_us * 1e3));
}

NcclCollective nccl_timing(const HardwareProfile& hw, CollectiveKind kind, std::int32_t ranks,
                           std::int32_t nodes, std::int64_t message_bytes, std::int32_t sharing_nodes) {
  const bool nvlink = hw.node.nvlink.GBps_per_direction > 0;
  if (nodes > 1) {
    // NCCL picks its algorithm by its model of the links; the NICs then run at the rate the network reaches
    // with as many nodes sending at once, the collective's bytes taking as much longer on them. The measured
    // rate falls with node count because the flows of more nodes share the fabric's links, whichever
    // collectives they belong to: a job's groups that communicate together load it as one group of all
    // their nodes would.
    const double nic = hw.network.nic_GBps, nvls = nvls_busbw_GBps(hw, message_bytes);
    NcclCollective c =
        nccl_collective(kind, ranks, nodes, nvlink, message_bytes, nic,
                        tuned_step_latency(hw.network, kind, nodes), hw.network.reported_latency_us, nvls);
    const double nic_run = network_nic_GBps(hw, kind, std::max(nodes, sharing_nodes));
    if (c.algorithm == NcclAlgorithm::kNvlsTree)  // the slower of the node's NVLS and its NICs as they run
      c.wire_factor = std::max(nic / (nvls_tree_nic_share(nodes) * nic_run), ranks / nodes * nic / nvls);
    else
      c.wire_factor *= nic / nic_run;
    return c;
  }
  if (nvlink && !hw.node.nvlink.allreduce_busbw_by_size.empty()) {
    NcclCollective measured;
    measured.wire_factor = one_node_rate_ratio(hw, kind);
    return measured;
  }
  const double bus_GBps = nvlink                      ? hw.node.nvlink.GBps_per_direction
                          : hw.node.pcie.peer_to_peer ? hw.node.pcie.lane_GBps
                                                      : hw.staged_GBps(hw.node.gpus);
  return nccl_collective(kind, ranks, nodes, nvlink, message_bytes, bus_GBps);
}

}  // namespace pipesim::sim
