// Collectives as NCCL runs them: for each collective NCCL picks an algorithm (ring, or a tree for an
// all-reduce) and a protocol (LL, LL128, Simple) by its own cost model, a fixed latency plus the bytes over
// the bandwidth that protocol reaches, and pipesim times the collective the same way: NCCL's latency for the
// chosen pair, and the bytes the protocol puts on the wire (LL's 4-byte flags beside every 4 bytes of data,
// LL128's 8 in every 128) through pipesim's network. Figures: NCCL src/graph/tuning.cc
// (ncclTunerConstantsDefaults and ncclTopoTuneModel, NVIDIA/nccl @ 5067397c, 2026-06-11).
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace pipesim::sim {

struct HardwareProfile;

enum class CollectiveKind : std::uint8_t { kAllReduce, kAllGather, kReduceScatter };
/// How a job prices collectives' latency (--collective-latency): NCCL's model (nccl), the path's latency once
/// per ring step (steps), or none (bandwidth only).
enum class CollectiveLatency : std::uint8_t { kNccl, kSteps, kNone };
/// Parses nccl | steps | none; throws InputError naming the valid words.
CollectiveLatency parse_collective_latency(const std::string& word);
enum class NcclAlgorithm : std::uint8_t { kRing, kTree, kPat, kNvlsTree };
enum class NcclProtocol : std::uint8_t { kLL, kLL128, kSimple };

struct NcclCollective {
  NcclAlgorithm algorithm = NcclAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
  double latency_us = 0;  ///< NCCL's fixed cost of one such collective
  /// Bytes the collective puts on each link per byte a Simple ring would: the protocol's flags, and a tree
  /// all-reduce sending the whole buffer up and down where a ring sends 2(n-1)/n of it.
  double wire_factor = 1;
};

/// How NCCL runs one collective of `message_bytes` over `ranks` GPUs spread evenly over `nodes` nodes whose
/// GPUs talk over NVLink (`nvlink`) or PCIe, each GPU's link reaching `bus_GBps` (its NIC across nodes,
/// where NCCL's model runs the ring at the NICs of a node's members together): the pair of algorithm and
/// protocol with the least latency + bus bytes x wire factor / bandwidth, with NCCL's corrections of its time
/// (ncclTopoGetAlgoTime: a tree all-reduce's bandwidth by its size, a Simple ring all-reduce's latency across
/// nodes), which the returned latency and wire factor hold. Rings for every collective; trees
/// for all-reduces; PAT (Simple only) for all-gathers and reduce-scatters with one GPU a node, where NCCL
/// enables it (ncclPatEnable).
/// `net_step_us`: the network's latency a step by protocol (LL, LL128, Simple) where the network's NCCL
/// plugin models its own (AWS EFA), else null for NCCL's InfiniBand figures. With it the plugin's model also
/// gives a tree's NVLink steps (28 us with Simple), runs a tree across nodes at half the ring's rate and
/// chooses an all-reduce across nodes by its own cost, the message over a GPU's NICs times its 8 channels
/// (aws-ofi-nccl src/tuner/nccl_ofi_model.cpp). `net_reported_us`: where NCCL times the collective itself,
/// the latency the network's plugin reports to it, which it adds to each network step (twice with Simple).
/// `nvls_GBps`: where the nodes' GPUs reduce over NVLink SHARP, the bus bandwidth of an all-reduce of this
/// size inside one node; an all-reduce across nodes with several of the group's GPUs a node may then run as
/// NVLS-tree (Simple only; tuning.cc's NVLS_TREE), its wire factor the ring's rate over its own.
NcclCollective nccl_collective(CollectiveKind kind, std::int32_t ranks, std::int32_t nodes, bool nvlink,
                               std::int64_t message_bytes, double bus_GBps,
                               const std::array<double, 3>* net_step_us = nullptr, double net_reported_us = 0,
                               double nvls_GBps = 0);

/// How pipesim times one collective on `hw`: nccl_collective over the ring's bus bandwidth (a NIC's across
/// nodes, an NVLink port's inside one, else a PCIe lane's, or host memory's where GPUs stage through it).
/// Inside a node whose profile measured NCCL's all-reduce bus bandwidth by size, the ring runs at that rate,
/// which holds NCCL's latency and protocol at each size already: no latency of its own, wire factor 1, or,
/// for an all-gather or reduce-scatter the profile also measured on one node (`collective_busbw_by_nodes`),
/// the all-reduce curve's rate at that message size over the measured one.
/// `sharing_nodes`: the nodes whose traffic crosses the network at the same time as this collective's (a
/// job's groups communicate at once: all its nodes); where the profile measured the network by node count
/// the NICs run at the rate it reaches with that many nodes, never fewer than the group's own (0: alone).
NcclCollective nccl_timing(const HardwareProfile& hw, CollectiveKind kind, std::int32_t ranks,
                           std::int32_t nodes, std::int64_t message_bytes, std::int32_t sharing_nodes = 0);

/// The rate a NIC reaches in `kind` collectives over `nodes` nodes on `hw`'s network: its `nic_GBps`, or,
/// where the profile measured that kind's bus bandwidth by node count, the rate at which pipesim's time of
/// the measured collective (every GPU of `nodes` nodes, NCCL's latency and each GPU's share through its NIC)
/// is the measured time, never above `nic_GBps`.
double network_nic_GBps(const HardwareProfile& hw, CollectiveKind kind, std::int32_t nodes);

/// NCCL's latency of one collective by algorithm and protocol (tuning.cc's latency model), in us. NVLS-tree
/// takes NCCL's figures whatever `net_step_us` says.
double nccl_latency_us(CollectiveKind kind, NcclAlgorithm algorithm, NcclProtocol protocol,
                       std::int32_t ranks, std::int32_t nodes, bool nvlink,
                       const std::array<double, 3>* net_step_us = nullptr, double net_reported_us = 0);

}  // namespace pipesim::sim
