#include "pipesim/sim/plan/plan_check.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <boost/graph/depth_first_search.hpp>

#include "pipesim/sim/core/error.hpp"
#include "plan/op_graph.hpp"
#include "plan/plan_validator.hpp"

namespace pipesim::sim {

namespace {

struct CycleFinder : boost::default_dfs_visitor {
  std::vector<Vertex>* parent;
  std::vector<Vertex>* cycle;
  void tree_edge(boost::graph_traits<Graph>::edge_descriptor e, const Graph& g) const {
    (*parent)[boost::target(e, g)] = boost::source(e, g);
  }
  void back_edge(boost::graph_traits<Graph>::edge_descriptor e, const Graph& g) const {
    if (!cycle->empty()) return;
    Vertex from = boost::source(e, g), to = boost::target(e, g);
    for (Vertex v = from; v != to; v = (*parent)[v]) cycle->push_back(v);
    cycle->push_back(to);
    std::reverse(cycle->begin(), cycle->end());
  }
};

std::string describe(const Plan& plan, std::size_t i) {
  const Op& op = plan.ops[i];
  const auto& st = plan.streams[static_cast<std::size_t>(op.stream)];
  std::string s = fmt::format("op {} {} on {}/{}", i, sim::to_string(op.kind),
                              plan.devices[static_cast<std::size_t>(st.device)].name, st.name);
  if (op.tags.microbatch >= 0) s += fmt::format(" mb {}", op.tags.microbatch);
  return s;
}

}  // namespace

void validate_plan(const Plan& plan, const std::string& file) {
  PlanValidator check(plan, file);
  for (std::size_t i = 0; i < plan.ops.size(); ++i) check.op(i);
  check.finish();
}

void check_plan_order(const Plan& plan, const std::string& file) {
  Graph g = op_graph(plan);
  std::vector<Vertex> parent(boost::num_vertices(g)), cycle;
  CycleFinder vis;
  vis.parent = &parent;
  vis.cycle = &cycle;
  boost::depth_first_search(g, boost::visitor(vis));
  if (cycle.empty()) return;
  std::string msg =
      fmt::format("{}the plan can never finish: a cycle of {} ops through dependencies and stream order:",
                  file.empty() ? "" : file + ": ", cycle.size());
  for (std::size_t k = 0; k < cycle.size() && k < 8; ++k)
    msg += (k ? " -> " : " ") + describe(plan, cycle[k]);
  if (cycle.size() > 8) msg += " -> ...";
  msg += " -> back to the first";
  throw DeadlockError(msg);
}

}  // namespace pipesim::sim
