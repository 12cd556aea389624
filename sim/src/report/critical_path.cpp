#include "pipesim/sim/report/critical_path.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <boost/graph/dag_shortest_paths.hpp>

#include "hardware/topology.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "plan/endpoints.hpp"
#include "plan/op_graph.hpp"

namespace pipesim::sim {

CriticalPath critical_path(const Plan& plan, const Timeline& tl) {
  const std::size_t n = plan.ops.size();
  Graph g = op_graph(plan);
  // A source vertex feeds every op; every edge into an op weighs that op's simulated duration.
  const Vertex source = boost::add_vertex(g);
  for (std::size_t i = 0; i < n; ++i) boost::add_edge(source, i, 0, g);
  auto weight = boost::get(boost::edge_weight, g);
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    const Vertex t = boost::target(*e, g);
    weight[*e] = t < n ? tl.end[t] - tl.start[t] : 0;
  }
  std::vector<std::int64_t> dist(boost::num_vertices(g));
  std::vector<Vertex> pred(boost::num_vertices(g));
  boost::dag_shortest_paths(g, source,
                            boost::distance_map(dist.data())
                                .predecessor_map(pred.data())
                                .distance_compare(std::greater<std::int64_t>())
                                .distance_inf(std::numeric_limits<std::int64_t>::min())
                                .distance_zero(std::int64_t{0}));
  std::size_t last = 0;
  for (std::size_t i = 1; i < n; ++i)
    if (dist[i] > dist[last] || (dist[i] == dist[last] && tl.end[i] > tl.end[last])) last = i;
  CriticalPath cp;
  if (n == 0) return cp;
  for (Vertex v = last; v != source; v = pred[v]) {
    cp.ops.push_back(static_cast<OpId>(v));
    if (pred[v] == v) break;
  }
  std::reverse(cp.ops.begin(), cp.ops.end());
  cp.length_s = static_cast<double>(dist[last]) / 1e9;
  cp.step_time_s = sim::compute_metrics(plan, tl).run_time_s;

  Topology topo(plan.hw, plan.nodes);
  std::map<std::string, std::int64_t> by;
  for (OpId id : cp.ops) {
    const auto i = static_cast<std::size_t>(id);
    const Op& op = plan.ops[i];
    const auto& dev =
        plan.devices[static_cast<std::size_t>(plan.streams[static_cast<std::size_t>(op.stream)].device)];
    std::string what;
    if (const auto* t = std::get_if<TransferWork>(&op.payload)) {
      const auto& a = plan.devices[static_cast<std::size_t>(t->src)];
      const auto& b = plan.devices[static_cast<std::size_t>(t->dst)];
      const Endpoint ea = endpoint_of(a), eb = endpoint_of(b);
      Path p = sim::is_collective(op.kind) ? topo.ring_path(ea, eb, t->bytes, t->message_bytes)
                                           : topo.path(ea, eb, t->bytes);
      // Name the narrowest link of the path: the one to widen first.
      std::string link = "no link";
      double narrowest = std::numeric_limits<double>::infinity();
      for (auto l : p.links)
        if (topo.links()[static_cast<std::size_t>(l)].bytes_per_ns < narrowest)
          narrowest = topo.links()[static_cast<std::size_t>(l)].bytes_per_ns, link = topo.link_name(l);
      what = fmt::format("{} {} ({})", sim::to_string(op.kind),
                         sim::is_collective(op.kind) ? a.name : a.name + " -> " + b.name, link);
      if (sim::is_collective(op.kind)) what = fmt::format("{} collectives ({})", a.name, link);
    } else if (std::holds_alternative<CpuWork>(op.payload)) {
      what = fmt::format("{} CPU optimizer", dev.name);
    } else {
      what = op.tags.stage >= 0 ? fmt::format("stage {} compute ({})", op.tags.stage, dev.name)
                                : fmt::format("{} {}", dev.name, sim::to_string(op.kind));
    }
    by[what] += tl.end[i] - tl.start[i];
  }
  for (const auto& [what, ns] : by)
    cp.by_resource.push_back(
        {what, static_cast<double>(ns) / 1e9,
         dist[last] > 0 ? static_cast<double>(ns) / static_cast<double>(dist[last]) : 0});
  std::stable_sort(cp.by_resource.begin(), cp.by_resource.end(),
                   [](const PathShare& a, const PathShare& b) { return a.seconds > b.seconds; });
  if (!cp.by_resource.empty())
    cp.advice = fmt::format("speed up {} first: {:.1f}% of the critical path", cp.by_resource.front().what,
                            100 * cp.by_resource.front().share);
  return cp;
}

}  // namespace pipesim::sim
