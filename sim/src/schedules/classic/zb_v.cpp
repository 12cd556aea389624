// ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory", 2024): every rank holds two model chunks
// placed in a V — rank r the r-th chunk on the way down and the (2p-1-r)-th on the way up, so the last chunk
// (and the loss) sits on rank 0 beside the first — with the backward split into B (input grad) and W (weight
// grad). The order is a greedy list schedule of unit-time passes (F = B = W, zero-time hops): at each time
// step a rank runs a ready B if it has one, else a ready F while the chunk activations it holds stay within
// 1F1B's (2p: p microbatches of a whole stage), else its oldest pending W; among ready passes the earliest
// microbatch first, then the later chunk. The same with F before B is built too and the shorter kept: one of
// the two reaches the critical-path bound 6m + p - 1 for m = p and every m >= 2p. Executing the order with
// real costs cannot deadlock: the unit-time schedule is a witness that every pass's dependencies come
// earlier.
#include <array>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "schedules/builtin.hpp"
#include "schedules/classic/classic.hpp"

#include "pipesim/sim/core/option.hpp"

namespace pipesim::sim::detail {

namespace {

std::string needs_two_chunks(const ScheduleShape& s) {
  return s.virtual_stages != 2 ? ("places two model chunks per rank in a V; " +
                                  spelled(Option{"virtual_stages"}) + " must be 2")
                               : "";
}

struct Orders {
  std::vector<std::vector<Task>> ranks;
  std::int64_t makespan = 0;  ///< unit-time steps the list schedule took
};

/// Every rank's order, from one unit-time list schedule of all ranks: at each step a rank runs a ready B,
/// else a ready F within the activation budget, else its oldest pending W (`forward_first`: F before B).
Orders zb_v_orders(std::int32_t p, std::int32_t m, bool forward_first) {
  const std::int32_t chunks = 2 * p;
  // Step after which each pass has finished (-1: not yet), [microbatch * chunks + model chunk].
  const auto cells = static_cast<std::size_t>(m) * static_cast<std::size_t>(chunks);
  std::vector<std::int64_t> f_done(cells, -1), b_done(cells, -1);
  auto at = [&](std::int32_t i, std::int32_t c) {
    return static_cast<std::size_t>(i) * static_cast<std::size_t>(chunks) + static_cast<std::size_t>(c);
  };
  auto done_before = [](std::int64_t finished, std::int64_t t) { return finished >= 0 && finished < t; };
  struct Rank {
    std::array<std::int32_t, 2> chunk{};   // model chunk of local chunk 0 (down) and 1 (up)
    std::array<std::int32_t, 2> next_f{};  // each chunk's passes run in microbatch order
    std::array<std::int32_t, 2> next_b{};
    std::int32_t held = 0;  // chunk activations from F until W
    std::deque<Task> pending_w;
  };
  std::vector<Rank> ranks(static_cast<std::size_t>(p));
  for (std::int32_t r = 0; r < p; ++r) ranks[static_cast<std::size_t>(r)].chunk = {r, chunks - 1 - r};
  Orders out;
  std::vector<std::vector<Task>>& orders = out.ranks;
  orders.resize(static_cast<std::size_t>(p));
  std::int64_t left = 3 * std::int64_t{m} * chunks;
  std::vector<Task> picks(static_cast<std::size_t>(p));
  std::int64_t t = 0;
  for (; left > 0; ++t) {
    // Every rank picks from what finished before step t; the picks are committed together.
    for (std::int32_t r = 0; r < p; ++r) {
      Rank& k = ranks[static_cast<std::size_t>(r)];
      Task pick{TaskKind::kForward, -1, -1};
      auto earlier = [&](std::int32_t i, std::int32_t local) {
        return pick.microbatch < 0 || i < pick.microbatch || (i == pick.microbatch && local > pick.chunk);
      };
      auto pick_backward = [&] {
        for (std::int32_t local : {1, 0}) {  // a ready B
          const std::int32_t i = k.next_b[static_cast<std::size_t>(local)],
                             c = k.chunk[static_cast<std::size_t>(local)];
          if (i >= m || !done_before(f_done[at(i, c)], t)) continue;
          const bool ready = c == chunks - 1 || done_before(b_done[at(i, c + 1)], t);
          if (ready && earlier(i, local)) pick = {TaskKind::kBackwardInput, i, local};
        }
      };
      auto pick_forward = [&] {
        if (k.held >= 2 * p) return;
        for (std::int32_t local : {1, 0}) {  // a ready F within the activation budget
          const std::int32_t i = k.next_f[static_cast<std::size_t>(local)],
                             c = k.chunk[static_cast<std::size_t>(local)];
          if (i >= m) continue;
          const bool ready = c == 0 || done_before(f_done[at(i, c - 1)], t);
          if (ready && earlier(i, local)) pick = {TaskKind::kForward, i, local};
        }
      };
      if (forward_first) {
        pick_forward();
        if (pick.microbatch < 0) pick_backward();
      } else {
        pick_backward();
        if (pick.microbatch < 0) pick_forward();
      }
      if (pick.microbatch < 0 && !k.pending_w.empty()) {  // else the oldest pending W
        pick = k.pending_w.front();
        k.pending_w.pop_front();
      }
      picks[static_cast<std::size_t>(r)] = pick;
    }
    for (std::int32_t r = 0; r < p; ++r) {
      const Task& pick = picks[static_cast<std::size_t>(r)];
      if (pick.microbatch < 0) continue;
      Rank& k = ranks[static_cast<std::size_t>(r)];
      const std::int32_t c = k.chunk[static_cast<std::size_t>(pick.chunk)];
      --left;
      orders[static_cast<std::size_t>(r)].push_back(pick);
      if (pick.kind == TaskKind::kForward) {
        f_done[at(pick.microbatch, c)] = t;
        ++k.next_f[static_cast<std::size_t>(pick.chunk)];
        ++k.held;
      } else if (pick.kind == TaskKind::kBackwardInput) {
        b_done[at(pick.microbatch, c)] = t;
        ++k.next_b[static_cast<std::size_t>(pick.chunk)];
        k.pending_w.push_back({TaskKind::kBackwardWeight, pick.microbatch, pick.chunk});
      } else {
        --k.held;
      }
    }
  }
  out.makespan = t;
  return out;
}

/// The shorter of the two list schedules (B first, or F first), B first on a tie.
std::vector<std::vector<Task>> best_zb_v_orders(std::int32_t p, std::int32_t m) {
  Orders backward_first = zb_v_orders(p, m, false), forward_first = zb_v_orders(p, m, true);
  return forward_first.makespan < backward_first.makespan ? std::move(forward_first.ranks)
                                                          : std::move(backward_first.ranks);
}

/// The order of `rank`: the whole list schedule is built once per shape (every rank asks for its part).
std::vector<Task> zb_v_order(const ScheduleShape& s, std::int32_t rank) {
  static std::mutex mutex;
  static std::map<std::pair<std::int32_t, std::int32_t>, std::vector<std::vector<Task>>> cache;
  const std::pair key{s.pp, s.microbatches};
  std::lock_guard lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() > 64) cache.clear();  // a planner search visits a few shapes; keep the cache small
    it = cache.emplace(key, best_zb_v_orders(s.pp, s.microbatches)).first;
  }
  return it->second[static_cast<std::size_t>(rank)];
}

}  // namespace

ScheduleDescriptor describe_zb_v() {
  ScheduleDescriptor d =
      named_descriptor("zb-v", "ZB-V (Qi et al. 2024, Pipeline Parallelism with Controllable Memory)",
                       "two model chunks per rank in a V (down the ranks, then back up to rank 0), backward "
                       "split into B and W, "
                       "at most 1F1B's activation memory",
                       ScheduleKind::kOrderBased);
  d.check = needs_two_chunks;
  d.constraints = {("two model chunks per rank in a V (" + spelled(Option{"virtual_stages"}) + " 2)")};
  place_two_chunks_per_rank(d, ChunkPlacement::kV);
  d.order = zb_v_order;
  return d;
}

}  // namespace pipesim::sim::detail
