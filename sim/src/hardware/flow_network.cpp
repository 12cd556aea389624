#include "hardware/flow_network.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::sim {

FlowNetwork::FlowNetwork(std::vector<double> capacity) : links_(capacity.size()), carried_(capacity.size()) {
  for (std::size_t l = 0; l < capacity.size(); ++l) links_[l].capacity = capacity[l];
}

void FlowNetwork::advance(Flow& f, TimePoint now) {
  if (now > f.updated) {
    double moved = std::min(f.remaining, f.rate * static_cast<double>(now - f.updated));
    f.remaining -= moved;
    for (auto l : f.links) carried_[static_cast<std::size_t>(l)] += moved;
    f.updated = now;
  }
}

FlowId FlowNetwork::add(const PathLinks& links, double bytes, double cap, TimePoint now,
                        std::int32_t priority) {
  FlowId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
    flow_mark_.push_back(-1);
  }
  Flow& f = flows_[static_cast<std::size_t>(id)];
  f.links = links;  // whole: rebuilt id by id, its bytes were read back before the stores had landed
  f.remaining = bytes;
  f.rate = 0;
  f.cap = cap;
  f.priority = priority;
  f.updated = now;
  f.live = true;
  ++active_;
  // Alone, progressive filling gives it the tightest link's capacity or its cap, whichever is lower.
  double alone = std::numeric_limits<double>::infinity();
  for (auto l : f.links) {
    LinkState& link = links_[static_cast<std::size_t>(l)];
    link.flows.push_back(id);
    alone = std::min(alone, std::max(0.0, link.capacity));
  }
  if (cap > 0 && cap < alone) alone = cap;
  f.alone = std::isfinite(alone) ? alone : 0.0;
  if (batching_) {
    pending_flows_.push_back(id);
    changed_.clear();
  } else {
    recompute(std::span<const std::int32_t>(f.links.data(), f.links.size()), now);
  }
  return id;
}

void FlowNetwork::remove(FlowId id, TimePoint now) {
  Flow& f = flows_[static_cast<std::size_t>(id)];
  advance(f, now);
  f.live = false;
  --active_;
  for (auto l : f.links) {
    auto& v = links_[static_cast<std::size_t>(l)].flows;
    if (v.size() == 1) {  // the usual case: it was alone there
      v.clear();
      continue;
    }
    auto* at = std::find(v.begin(), v.end(), id);
    v.erase(at, at + 1);
  }
  // The links seed the recomputation (the flow is off them already). While batching, a link left without
  // flows (the usual end of a transfer on private links) has nothing to re-rate and is not noted.
  if (batching_) {
    for (std::int32_t l : f.links)
      if (!links_[static_cast<std::size_t>(l)].flows.empty()) pending_links_.push_back(l);
    changed_.clear();
  } else {
    recompute(std::span<const std::int32_t>(f.links.data(), f.links.size()), now);
  }
  free_ids_.push_back(id);  // its links stay until the id is reused: nothing reads a finished flow's
}

void FlowNetwork::flush(TimePoint now) {
  // Both seed lists keep their buffers from one flush to the next.
  flush_seeds_.swap(pending_links_);
  flush_flows_.swap(pending_flows_);
  // One recomputation per connected group: progressive filling over a merged group would cost the product of
  // their sizes. Rates depend only on each group's flows, so the order of the seeds changes nothing.
  ++flush_epoch_;
  flush_changed_.clear();
  for (FlowId f : flush_flows_) {
    const Flow& flow = flows_[static_cast<std::size_t>(f)];
    // A flow over no link is rated by no link (as when its links were the seeds); one that ended within the
    // instant has left them.
    if (flow.live && !flow.links.empty()) flush_seed(flow.links[0], f, now);
  }
  for (std::int32_t l : flush_seeds_) {
    if (links_[static_cast<std::size_t>(l)].flows.empty()) continue;  // its flows started and ended at once
    flush_seed(l, sole_flow(l), now);
  }
  flush_seeds_.clear();
  flush_flows_.clear();
  // Ascending ids. Flows started together usually arrive in one order or its reverse (ids are reused last
  // freed first), so two linear checks spare most sorts.
  auto& c = flush_changed_;
  if (std::is_sorted(c.begin(), c.end(), std::greater<>{}))
    std::reverse(c.begin(), c.end());
  else if (!std::is_sorted(c.begin(), c.end()))
    std::sort(c.begin(), c.end());
  changed_.swap(flush_changed_);
}

void FlowNetwork::flush_seed(std::int32_t l, FlowId f, TimePoint now) {
  if (links_[static_cast<std::size_t>(l)].flush_mark == flush_epoch_) return;  // its group is rated
  if (f >= 0 && is_sole(flows_[static_cast<std::size_t>(f)])) {
    // The usual case: a flow alone on private links (a GPU's NVLink port or NIC).
    Flow& flow = flows_[static_cast<std::size_t>(f)];
    advance(flow, now);
    flow.rate = flow.alone;
    for (std::int32_t g : flow.links) links_[static_cast<std::size_t>(g)].flush_mark = flush_epoch_;
    flush_changed_.push_back(f);
    return;
  }
  one_link_.assign(1, l);
  recompute(one_link_, now);
  for (std::int32_t g : scratch_links_) links_[static_cast<std::size_t>(g)].flush_mark = flush_epoch_;
  flush_changed_.insert(flush_changed_.end(), changed_.begin(), changed_.end());
}

bool FlowNetwork::is_sole(const Flow& f) const {
  if (f.priority < 0) return false;  // rated by no class of the filling: it keeps its rate
  // A link listed twice on the flow's path lists the flow twice there too.
  for (std::int32_t l : f.links)
    if (links_[static_cast<std::size_t>(l)].flows.size() != 1) return false;
  return true;
}

FlowId FlowNetwork::sole_flow(std::int32_t link) const {
  const auto& on = links_[static_cast<std::size_t>(link)].flows;
  if (on.size() != 1) return -1;
  return is_sole(flows_[static_cast<std::size_t>(on[0])]) ? on[0] : -1;
}

TimePoint FlowNetwork::finish_time(FlowId id) const {
  const Flow& f = flows_[static_cast<std::size_t>(id)];
  if (f.remaining <= 0) return f.updated;
  if (f.rate <= 0) return std::numeric_limits<TimePoint>::max();
  // std::ceil, spelled out: without SSE4.1 at compile time it is a call through the dynamic linker, and this
  // runs for every rated flow. Quotients of 2^53 or more are whole numbers already.
  double ns = f.remaining / f.rate;
  if (ns < 9007199254740992.0) {
    const double whole = static_cast<double>(static_cast<std::int64_t>(ns));
    ns = whole < ns ? whole + 1 : whole;
  }
  const double end = static_cast<double>(f.updated) + ns;
  if (!(end < 9.2e18))
    throw InputError(
        "plan", "",
        fmt::format("a transfer of {:.3g} bytes at {:.3g} bytes/ns ends beyond the simulated time "
                    "range (about 292 years)",
                    f.remaining, f.rate));
  return static_cast<TimePoint>(end);
}

std::vector<double> FlowNetwork::carried_bytes(TimePoint now) {
  for (auto& f : flows_)
    if (f.live) advance(f, now);
  return carried_;
}

void FlowNetwork::recompute(std::span<const std::int32_t> seed_links, TimePoint now) {
  // Gather the connected component of links and flows reachable from the seed links.
  ++epoch_;
  // Scratch vectors are members: this runs for every flow start and end.
  auto& links = scratch_links_;
  auto& flows = changed_;
  auto& stack = scratch_stack_;
  links.clear();
  flows.clear();
  stack.assign(seed_links.begin(), seed_links.end());
  while (!stack.empty()) {
    std::int32_t l = stack.back();
    stack.pop_back();
    if (links_[static_cast<std::size_t>(l)].link_mark == epoch_) continue;
    links_[static_cast<std::size_t>(l)].link_mark = epoch_;
    links.push_back(l);
    for (FlowId f : links_[static_cast<std::size_t>(l)].flows) {
      if (flow_mark_[static_cast<std::size_t>(f)] == epoch_) continue;
      flow_mark_[static_cast<std::size_t>(f)] = epoch_;
      flows.push_back(f);
      for (auto l2 : flows_[static_cast<std::size_t>(f)].links)
        if (links_[static_cast<std::size_t>(l2)].link_mark != epoch_) stack.push_back(l2);
    }
  }
  std::sort(links.begin(), links.end());
  std::sort(flows.begin(), flows.end());
  for (FlowId f : flows) advance(flows_[static_cast<std::size_t>(f)], now);
  if (flows.size() == 1 && sole_flow(flows_[static_cast<std::size_t>(flows[0])].links[0]) == flows[0]) {
    // A flow alone on its links (no link twice on its path, a class the filling below rates; the group may
    // also hold a removed flow's links): progressive filling gives it the tightest link's capacity or its
    // cap, whichever is lower; the same value the loop below computes, without it.
    Flow& f = flows_[static_cast<std::size_t>(flows[0])];
    f.rate = f.alone;
    return;
  }

  // Progressive filling, one priority class after the other: repeatedly saturate the tightest link (or flow
  // cap) and freeze its flows; a lower class sees only the capacity the higher ones left.
  auto& left = scratch_left_;
  left.assign(links.size(), 0.0);
  auto local = [&](std::int32_t l) {
    return static_cast<std::size_t>(std::lower_bound(links.begin(), links.end(), l) - links.begin());
  };
  for (std::size_t i = 0; i < links.size(); ++i)
    left[i] = links_[static_cast<std::size_t>(links[i])].capacity;
  auto& frozen = scratch_frozen_;
  frozen.assign(flows.size(), 1);
  auto& count = scratch_count_;
  count.assign(links.size(), 0);
  for (std::int32_t cls = 0; cls <= 1; ++cls) {
    std::size_t unfrozen = 0;
    std::fill(count.begin(), count.end(), 0);
    for (std::size_t k = 0; k < flows.size(); ++k) {
      const Flow& f = flows_[static_cast<std::size_t>(flows[k])];
      if (std::min<std::int32_t>(f.priority, 1) != cls) continue;
      frozen[k] = 0;
      ++unfrozen;
      for (auto l : f.links) ++count[local(l)];
    }
    while (unfrozen > 0) {
      double best = std::numeric_limits<double>::infinity();
      std::int64_t best_link = -1, best_flow = -1;
      for (std::size_t i = 0; i < links.size(); ++i) {
        if (count[i] == 0) continue;
        double share = std::max(0.0, left[i]) / count[i];
        if (share < best) best = share, best_link = static_cast<std::int64_t>(i), best_flow = -1;
      }
      for (std::size_t k = 0; k < flows.size(); ++k) {
        const Flow& f = flows_[static_cast<std::size_t>(flows[k])];
        if (!frozen[k] && f.cap > 0 && f.cap < best)
          best = f.cap, best_flow = static_cast<std::int64_t>(k), best_link = -1;
      }
      for (std::size_t k = 0; k < flows.size(); ++k) {
        if (frozen[k]) continue;
        Flow& f = flows_[static_cast<std::size_t>(flows[k])];
        bool hit = best_flow == static_cast<std::int64_t>(k);
        if (best_link >= 0)
          hit = std::find(f.links.begin(), f.links.end(), links[static_cast<std::size_t>(best_link)]) !=
                f.links.end();
        if (best_link < 0 && best_flow < 0) hit = true;  // flows over no link at all: unconstrained
        if (!hit) continue;
        f.rate = std::isfinite(best) ? best : 0.0;
        frozen[k] = 1;
        --unfrozen;
        for (auto l : f.links) {
          std::size_t i = local(l);
          left[i] -= f.rate;
          // What rounding leaves of a saturated link is nothing: a background flow given that residue
          // (bytes per second for a gigabyte) would end centuries later instead of waiting its turn.
          if (left[i] < links_[static_cast<std::size_t>(l)].capacity * 1e-12) left[i] = 0;
          --count[i];
        }
      }
    }
  }
}

}  // namespace pipesim::sim
