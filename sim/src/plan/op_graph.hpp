// A plan as a Boost.Graph: an edge for every dependency and for every pair of consecutive ops on one stream
// (a stream runs its ops in order). The cycle check and the critical path both walk it.
#pragma once

#include <cstdint>

#include <boost/graph/adjacency_list.hpp>

#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::sim {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                                    boost::property<boost::edge_weight_t, std::int64_t>>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;

/// Dependencies plus stream order; vertex i is op i.
inline Graph op_graph(const Plan& plan) {
  Graph g(plan.ops.size());
  std::vector<OpId> last_on_stream(plan.streams.size(), -1);
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    for (OpId d : op.deps) boost::add_edge(static_cast<Vertex>(d), i, 0, g);
    auto& prev = last_on_stream[static_cast<std::size_t>(op.stream)];
    if (prev >= 0) boost::add_edge(static_cast<Vertex>(prev), i, 0, g);
    prev = static_cast<OpId>(i);
  }
  return g;
}

}  // namespace pipesim::sim
