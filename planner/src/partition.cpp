#include "pipesim/planner/partition.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/dag_shortest_paths.hpp>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/workload/rated_work.hpp"
#include "pipesim/sim/workload/sharding.hpp"

namespace pipesim::planner {

namespace {

struct CutWeight {
  std::int64_t weight = 0;
};
/// Edges arrive sorted by source (stage, then first layer), each source's in the order they are made: a
/// compressed graph keeps that out-edge order (so the path search breaks ties as it always has) without a
/// heap allocation per edge.
using Graph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, CutWeight>;

/// Prefix sums of the per-layer figures, and a sparse table for the largest working set of a layer range.
struct Prefix {
  std::vector<std::int64_t> time, resident, activation, weight_grad;
  std::vector<std::vector<std::int64_t>> working_max;  // [k][l]: max of working_bytes[l .. l + 2^k)
  explicit Prefix(const PartitionProblem& p)
      : time(1, 0), resident(1, 0), activation(1, 0), weight_grad(1, 0) {
    for (std::size_t l = 0; l < p.time_ns.size(); ++l) {
      time.push_back(time.back() + p.time_ns[l]);
      resident.push_back(resident.back() + p.resident_bytes[l]);
      activation.push_back(activation.back() + p.activation_bytes[l]);
      weight_grad.push_back(weight_grad.back() + (p.weight_grad_bytes.empty() ? 0 : p.weight_grad_bytes[l]));
    }
    working_max.push_back(p.working_bytes.empty() ? std::vector<std::int64_t>(p.time_ns.size(), 0)
                                                  : p.working_bytes);
    for (std::size_t w = 2; w <= p.time_ns.size(); w *= 2) {
      const auto& prev = working_max.back();
      std::vector<std::int64_t> next(p.time_ns.size() - w + 1);
      for (std::size_t l = 0; l < next.size(); ++l) next[l] = std::max(prev[l], prev[l + w / 2]);
      working_max.push_back(std::move(next));
    }
  }
  /// The largest per-layer working set of layers [i, j): recompute re-materializes one layer at a time.
  std::int64_t max_working(std::size_t i, std::size_t j) const {
    std::size_t k = 0;
    while ((std::size_t{2} << k) <= j - i) ++k;
    return std::max(working_max[k][i], working_max[k][j - (std::size_t{1} << k)]);
  }
};

std::int64_t stage_time(const PartitionProblem& p, const Prefix& s, std::int32_t i, std::int32_t j) {
  const auto n = static_cast<std::int32_t>(p.time_ns.size());
  return s.time[static_cast<std::size_t>(j)] - s.time[static_cast<std::size_t>(i)] +
         (j < n ? p.boundary_ns[static_cast<std::size_t>(j - 1)] : 0);
}

std::int64_t stage_mem(const PartitionProblem& p, const Prefix& s, std::int32_t stage, std::int32_t i,
                       std::int32_t j) {
  const auto k = static_cast<std::size_t>(stage), b = static_cast<std::size_t>(i),
             e = static_cast<std::size_t>(j);
  // One backward at a time re-materializes the recomputed activations of one layer on top of the rest.
  return s.resident[e] - s.resident[b] + s.max_working(b, e) +
         p.inflight[k] * (s.activation[e] - s.activation[b]) +
         (p.deferred.empty() ? 0 : p.deferred[k] * (s.weight_grad[e] - s.weight_grad[b]));
}

PartitionResult finish(const PartitionProblem& p, const Prefix& s,
                       std::vector<std::pair<std::int32_t, std::int32_t>> ranges) {
  PartitionResult r;
  r.feasible = true;
  r.ranges = std::move(ranges);
  for (std::size_t k = 0; k < r.ranges.size(); ++k) {
    auto [i, j] = r.ranges[k];
    std::int32_t blocks = 0;
    for (std::int32_t l = i; l < j; ++l) blocks += p.is_block[static_cast<std::size_t>(l)] ? 1 : 0;
    r.blocks.push_back(blocks);
    r.stage_ns.push_back(stage_time(p, s, i, j));
    r.stage_mem_bytes.push_back(stage_mem(p, s, static_cast<std::int32_t>(k), i, j));
    r.bottleneck_ns = std::max(r.bottleneck_ns, r.stage_ns.back());
    if (p.memory_cap > 0 && r.stage_mem_bytes.back() > p.memory_cap) r.feasible = false;
  }
  return r;
}

/// Min-max path over cut positions with a per-layer weight `w` (time, or parameters for DeepSpeed's method).
std::vector<std::pair<std::int32_t, std::int32_t>> bottleneck_path(const PartitionProblem& p, const Prefix& s,
                                                                   bool by_params, bool check_memory) {
  const auto n = static_cast<std::int32_t>(p.time_ns.size());
  const std::int32_t k = p.stages;
  std::vector<std::int64_t> params_prefix(1, 0);
  for (auto v : p.params) params_prefix.push_back(params_prefix.back() + v);
  auto vertex = [&](std::int32_t stage, std::int32_t cut) {
    return static_cast<std::size_t>(stage * (n + 1) + cut);
  };
  std::vector<std::pair<std::size_t, std::size_t>> edges;
  std::vector<CutWeight> weights;
  for (std::int32_t st = 0; st < k; ++st) {
    // Stage st starts at cut i and ends at cut j; each stage keeps at least one layer.
    for (std::int32_t i = st; i <= n - (k - st); ++i) {
      if (st == 0 && i != 0) break;
      const std::int32_t j_max = st == k - 1 ? n : n - (k - st - 1);
      for (std::int32_t j = st == k - 1 ? n : i + 1; j <= j_max; ++j) {
        if (check_memory && p.memory_cap > 0 && stage_mem(p, s, st, i, j) > p.memory_cap) continue;
        const std::int64_t w = by_params ? params_prefix[static_cast<std::size_t>(j)] -
                                               params_prefix[static_cast<std::size_t>(i)]
                                         : stage_time(p, s, i, j);
        edges.emplace_back(vertex(st, i), vertex(st + 1, j));
        weights.push_back({w});
      }
    }
  }
  const Graph g(boost::edges_are_sorted, edges.begin(), edges.end(), weights.begin(),
                static_cast<std::size_t>((k + 1) * (n + 1)));
  const std::size_t nv = boost::num_vertices(g);
  std::vector<std::int64_t> dist(nv);
  std::vector<std::size_t> pred(nv);
  const std::int64_t inf = std::numeric_limits<std::int64_t>::max();
  boost::dag_shortest_paths(
      g, vertex(0, 0),
      boost::weight_map(boost::get(&CutWeight::weight, g))
          .distance_map(dist.data())
          .predecessor_map(pred.data())
          .distance_compare(std::less<std::int64_t>())
          .distance_combine([](std::int64_t a, std::int64_t b) { return std::max(a, b); })
          .distance_inf(inf)
          .distance_zero(std::int64_t{0}));
  std::vector<std::pair<std::int32_t, std::int32_t>> ranges;
  std::size_t v = vertex(k, n);
  if (dist[v] == inf) return ranges;
  while (v != vertex(0, 0)) {
    std::size_t u = pred[v];
    ranges.push_back({static_cast<std::int32_t>(u % static_cast<std::size_t>(n + 1)),
                      static_cast<std::int32_t>(v % static_cast<std::size_t>(n + 1))});
    v = u;
  }
  std::reverse(ranges.begin(), ranges.end());
  return ranges;
}

}  // namespace

PartitionResult optimal_partition(const PartitionProblem& p) {
  Prefix s(p);
  auto ranges = bottleneck_path(p, s, false, true);
  if (ranges.empty()) return PartitionResult{};  // infeasible: no partition fits memory
  return finish(p, s, std::move(ranges));
}

PartitionResult evaluate_partition(const PartitionProblem& p, const std::vector<std::int32_t>& blocks) {
  Prefix s(p);
  const auto n = static_cast<std::int32_t>(p.time_ns.size());
  std::vector<std::pair<std::int32_t, std::int32_t>> ranges;
  std::int32_t first_block = 0;
  while (first_block < n && !p.is_block[static_cast<std::size_t>(first_block)]) ++first_block;
  std::int32_t at = first_block;
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    std::int32_t b = k == 0 ? 0 : at, e = at + blocks[k];
    if (k + 1 == blocks.size()) e = n;
    at += blocks[k];
    ranges.push_back({b, e});
  }
  return finish(p, s, std::move(ranges));
}

std::vector<std::int32_t> parameters_partition(const PartitionProblem& p) {
  Prefix s(p);
  auto ranges = bottleneck_path(p, s, true, false);
  PartitionResult r = finish(p, s, std::move(ranges));
  return r.blocks;
}

PartitionProblem make_partition_problem(const sim::ScheduleInput& in, const sim::ScheduleDescriptor& schedule,
                                        double mem_fraction) {
  if (schedule.partitioner.rule != sim::PartitionRule::kContiguousStages)
    throw sim::InputError(sim::Option{"schedule"}, "",
                          fmt::format("{} partitions by its own rule", schedule.name));
  PartitionProblem p;
  const auto& layers = in.costs.front();
  const std::int32_t t = in.tp;
  const auto& hw = in.hw;
  // Pipeline hops stay inside a node while the pipeline does; p2p goes over NVLink, else PCIe, else the NIC.
  const bool in_node = std::int64_t{in.pp} * in.tp <= hw.tp_domain_gpus();  // a node, or its NVLink domain
  // Over PCIe without peer-to-peer, GPU traffic is staged through host memory (every GPU's TP ring at once).
  auto pcie_GBps = [&](int senders) {
    return hw.node.pcie.peer_to_peer ? hw.node.pcie.lane_GBps : hw.staged_GBps(senders);
  };
  const bool nvlink = hw.node.nvlink.GBps_per_direction > 0;
  const double link_GBps =
      in_node ? (nvlink ? hw.node.nvlink.GBps_per_direction : pcie_GBps(1)) : hw.network.nic_GBps;
  const double tp_GBps = nvlink ? hw.node.nvlink.GBps_per_direction : pcie_GBps(hw.node.gpus);
  for (const sim::LayerCost& l : layers) {
    std::int64_t ns;
    if (l.fwd_ns >= 0) {
      ns = l.fwd_ns + l.bwd_input_ns + l.bwd_weight_ns + std::max<sim::Duration>(0, l.recompute_ns);
    } else {
      // Kernels at a published rate of their own (fused attention, unaligned GEMMs) take their time at it, as
      // the simulator runs them.
      const sim::KernelRate& a = l.fused_attention_rate;
      const sim::KernelRate& u = l.unaligned_gemm_rate;
      sim::RatedWork fwd, bwd, recompute;
      fwd.add(l.fused_attention_fwd_flops / t, a.forward_tflops);
      fwd.add(l.unaligned_fwd_flops / t, u.forward_tflops);
      bwd.add(l.fused_attention_bwd_flops / t, a.backward_tflops);
      bwd.add((l.unaligned_bwd_input_flops + l.unaligned_bwd_weight_flops) / t, u.backward_tflops);
      recompute.add(l.fused_attention_recompute_flops / t, a.forward_tflops);
      ns = hw.op_ns(l.fwd_flops / t, l.gemm_gflop, l.kernels, in.dtype, 0, l.expert_fwd_flops / t,
                    l.expert_gemm_gflop, l.expert_weight_bytes, 0, 0, l.wide_fwd_flops / t, 0, fwd.flops,
                    fwd.tflops()) +
           hw.op_ns((l.bwd_input_flops + l.bwd_weight_flops) / t, l.gemm_gflop, 2 * l.kernels, in.dtype, 0,
                    (l.expert_bwd_input_flops + l.expert_bwd_weight_flops) / t, l.expert_gemm_gflop,
                    2 * l.expert_weight_bytes, 0, 0, (l.wide_bwd_input_flops + l.wide_bwd_weight_flops) / t,
                    0, bwd.flops, bwd.tflops()) +
           (l.recompute_flops > 0
                ? hw.op_ns(l.recompute_flops / t, l.gemm_gflop, l.kernels, in.dtype, 0,
                           l.expert_recompute_flops / t, l.expert_gemm_gflop, l.expert_weight_bytes, 0, 0,
                           l.wide_recompute_flops / t, 0, recompute.flops, recompute.tflops())
                : 0) +
           hw.memory_ns(l.fwd_mem_bytes + l.bwd_mem_bytes + l.recompute_mem_bytes);
      // TP collectives: forward and backward each move the layer's bus bytes.
      ns += sim::duration_for_work(2.0 * static_cast<double>(l.tp_bus_bytes), tp_GBps * 1e9);
    }
    p.time_ns.push_back(ns);
    p.boundary_ns.push_back(
        in.p2p_fixed_ns >= 0
            ? in.p2p_fixed_ns
            : 2 * sim::duration_for_work(static_cast<double>(l.output_bytes), link_GBps * 1e9));
    p.resident_bytes.push_back(l.param_bytes);
    p.activation_bytes.push_back(l.stored_activation_bytes);
    p.working_bytes.push_back(l.recompute_extra_bytes);
    p.weight_grad_bytes.push_back(sim::weight_grad_activation_bytes(l));
    p.params.push_back(l.params);
    p.is_block.push_back(l.role == sim::LayerRole::kBlock);
  }
  const std::int32_t v = in.virtual_stages;
  p.stages = in.pp * v;
  // What each stage position holds at its peak: the schedule says, or its task order tells (GPipe all M,
  // 1F1B min(M, p - k), ZB-H1 that plus the weight-gradient passes it defers).
  const sim::ScheduleShape shape{in.pp, in.microbatches, v};
  const auto& hints = schedule.partitioner;
  for (std::int32_t k = 0; k < p.stages; ++k) {
    sim::StageLoad load;
    if (hints.activations_in_flight) {
      load.activations_in_flight = hints.activations_in_flight(shape, k);
      load.deferred_weight_grads = hints.deferred_weight_grads ? hints.deferred_weight_grads(shape, k) : 0;
    } else if (schedule.kind == sim::ScheduleKind::kOrderBased) {
      load = sim::peak_stage_load(schedule, shape, k);
    } else {
      load.activations_in_flight = in.microbatches;  // no order to tell: assume every microbatch is held
    }
    p.inflight.push_back(load.activations_in_flight);
    p.deferred.push_back(load.deferred_weight_grads);
  }
  p.memory_cap = static_cast<std::int64_t>(mem_fraction * static_cast<double>(hw.gpu_tensor_capacity())) / v;
  return p;
}

void shard_resident_bytes(PartitionProblem& problem, const sim::ScheduleInput& in) {
  const auto& layers = in.costs.front();
  const std::int64_t t = in.tp;
  for (std::size_t l = 0; l < layers.size() && l < problem.resident_bytes.size(); ++l) {
    const sim::LayerCost& c = layers[l];
    const std::int64_t trainable = (c.trainable_params + t - 1) / t;
    const std::int64_t weights = (c.params + t - 1) / t + (in.lora_rank > 0 ? trainable : 0);
    problem.resident_bytes[l] = sim::sharded_state_bytes(weights, trainable, in.sharding).gpu() +
                                c.grad_buffer_bytes + c.fp8_weight_bytes;
  }
}

}  // namespace pipesim::planner
