// Bandwidth sharing between concurrent transfers: each flow crosses a path of directed links; rates are the
// max-min fair allocation (progressive filling), recomputed only for the connected group of flows that share
// links with a flow that starts or ends, so private links (NVLink ports, NICs) stay cheap at 8K GPUs.
// Background flows (priority 1, e.g. weight prefetch) share only what the foreground flows leave.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "hardware/path_links.hpp"
#include "pipesim/sim/core/dep_list.hpp"
#include "pipesim/sim/core/huge_page_allocator.hpp"
#include "pipesim/sim/core/time.hpp"

namespace pipesim::sim {

using FlowId = std::int32_t;

class FlowNetwork {
 public:
  explicit FlowNetwork(std::vector<double> capacity_bytes_per_ns);

  /// Adds a flow of `bytes` over `links` (at most PathLinks::kCapacity; optionally capped at
  /// `max_bytes_per_ns`, 0 = no cap).
  /// Returns its id; rates of the affected flows change (see changed()).
  /// Priority 0 flows share links max-min first; priority 1 (background) flows get what they leave.
  FlowId add(const PathLinks& links, double bytes, double max_bytes_per_ns, TimePoint now,
             std::int32_t priority = 0);
  FlowId add(std::span<const std::int32_t> links, double bytes, double max_bytes_per_ns, TimePoint now,
             std::int32_t priority = 0) {
    return add(PathLinks(links), bytes, max_bytes_per_ns, now, priority);
  }
  FlowId add(std::initializer_list<std::int32_t> links, double bytes, double max_bytes_per_ns, TimePoint now,
             std::int32_t priority = 0) {
    return add(PathLinks(links), bytes, max_bytes_per_ns, now, priority);
  }
  /// Removes a flow (finished); rates of the flows that shared links with it change.
  void remove(FlowId f, TimePoint now);

  /// Batching: while on, add/remove only note the links they touch and rates are left as they were; flush()
  /// recomputes once for all of them. Max-min rates depend only on the set of flows, so starting and ending
  /// several flows at one instant gives the same rates either way, with one recomputation instead of many.
  void set_batching(bool on) { batching_ = on; }
  bool has_pending() const { return !pending_links_.empty() || !pending_flows_.empty(); }
  /// Recomputes the rates around every flow started and link left since the last flush; changed() lists
  /// those flows.
  void flush(TimePoint now);

  /// Flows whose rate was recomputed by the last add/remove (or flush), ascending ids.
  const std::vector<FlowId>& changed() const { return changed_; }
  double rate(FlowId f) const { return flows_[static_cast<std::size_t>(f)].rate; }
  double remaining(FlowId f) const { return flows_[static_cast<std::size_t>(f)].remaining; }
  /// Time at which the flow delivers its last byte at its current rate (rounded up).
  TimePoint finish_time(FlowId f) const;
  /// Bytes carried so far per link (for utilization), brought up to date at `now`.
  std::vector<double> carried_bytes(TimePoint now);
  std::size_t active() const { return active_; }
  /// Fetches flow `f`'s record, then (once it has arrived) its links' state: the engine calls these a few
  /// events before the flow ends.
  void prefetch_flow(FlowId f) const {
    if (static_cast<std::size_t>(f) < flows_.size()) __builtin_prefetch(&flows_[static_cast<std::size_t>(f)]);
  }
  void prefetch_links(FlowId f) const {
    if (static_cast<std::size_t>(f) >= flows_.size()) return;
    for (auto l : flows_[static_cast<std::size_t>(f)].links)
      __builtin_prefetch(&links_[static_cast<std::size_t>(l)]);
  }

 private:
  struct Flow {
    PathLinks links;  // inline: starting and ending a flow allocates nothing
    double remaining = 0;
    double rate = 0;
    double cap = 0;
    double alone = 0;  // its rate when alone on its links: the tightest link's capacity or its cap
    std::int32_t priority = 0;
    TimePoint updated = 0;
    bool live = false;
  };
  void advance(Flow& f, TimePoint now);
  /// The flow on `link` when it is the only one there and on each of its other links, in a rated class;
  /// -1 otherwise.
  FlowId sole_flow(std::int32_t link) const;
  /// Whether the flow is the only one on each of its links, in a class the filling rates.
  bool is_sole(const Flow& f) const;
  /// Rates the flows around one seed of a flush (a link, or a flow started at the instant), unless an earlier
  /// seed's recomputation reached them.
  void flush_seed(std::int32_t link, FlowId flow, TimePoint now);
  void recompute(std::span<const std::int32_t> seed_links, TimePoint now);

  /// What a transfer's start and end read per link, in 32 bytes: never split across two cache lines.
  struct alignas(32) LinkState {
    double capacity = 0;
    DepList flows;                 // the flows on the link (a short id list, kept inline up to three)
    std::int32_t flush_mark = -1;  // the flush that last recomputed the link
    std::int32_t link_mark = -1;   // the recomputation that last gathered the link
  };
  static_assert(sizeof(LinkState) == 32);
  HugeVector<LinkState> links_;  // two megabytes at 8,192 GPUs: on huge pages
  std::vector<double> carried_;  // bytes carried per link, apart: written only when a flow moves on
  std::vector<Flow> flows_;
  std::vector<FlowId> free_ids_;
  std::vector<FlowId> changed_;
  std::size_t active_ = 0;
  bool batching_ = false;
  std::vector<std::int32_t> pending_links_;  // left by flows that ended while batching, not yet recomputed
  std::vector<FlowId> pending_flows_;        // started while batching, not yet rated
  std::int32_t flush_epoch_ = 0;
  // Scratch buffers reused across recomputations.
  std::vector<std::int32_t> flow_mark_;
  std::vector<std::int32_t> scratch_links_, scratch_stack_, scratch_count_;
  std::vector<std::int32_t> one_link_;     // the seed of each of flush()'s groups
  std::vector<std::int32_t> flush_seeds_;  // the links a flush works through
  std::vector<FlowId> flush_flows_;        // the started flows a flush works through
  std::vector<FlowId> flush_changed_;      // the flows a flush re-rated
  std::vector<double> scratch_left_;
  std::vector<char> scratch_frozen_;
  std::int32_t epoch_ = 0;
};

}  // namespace pipesim::sim
