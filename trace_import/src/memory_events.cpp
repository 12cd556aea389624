#include "pipesim/trace_import/memory_events.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "saturating_bytes.hpp"

namespace pipesim::trace_import {

namespace {

constexpr std::size_t kNever = SIZE_MAX;

/// One allocation: the events (indices in time order) that made and freed it; kNever for one still held
/// when the trace ends.
struct Life {
  std::int64_t bytes = 0;
  std::size_t made = 0, freed = kNever;
};

}  // namespace

void add_memory_events(const std::vector<MemoryEvent>& events, const PlaceOf& place,
                       const BackwardWindow& backward, StepProfile& step) {
  if (events.empty()) return;
  // Kineto writes memory events after the other CPU events, not in time order; ties keep file order.
  std::vector<std::size_t> order(events.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return events[a].ts < events[b].ts; });
  auto event = [&](std::size_t k) -> const MemoryEvent& { return events[order[k]]; };
  const std::size_t n = order.size();
  // Before the first event the device held its total less what that event changed.
  std::int64_t before = 0;
  if (__builtin_sub_overflow(event(0).total_allocated, event(0).bytes, &before)) before = 0;
  step.allocated_at_start_bytes = std::max<std::int64_t>(0, before);
  step.peak_allocated_bytes = step.allocated_at_start_bytes;
  step.memory_events = static_cast<std::int64_t>(n);

  // Each allocation followed to its free at the same address. A free of a block made before the step is not
  // followed; an address allocated again before a free was seen ends the earlier allocation there.
  std::vector<Life> lives;
  std::vector<PassPlace> where(n);
  std::unordered_map<std::int64_t, std::size_t> held;  // address -> index into lives
  for (std::size_t k = 0; k < n; ++k) {
    const MemoryEvent& e = event(k);
    step.peak_allocated_bytes = std::max(step.peak_allocated_bytes, e.total_allocated);
    step.peak_reserved_bytes = std::max(step.peak_reserved_bytes, e.total_reserved);
    where[k] = place(e.tid, e.ts);
    const auto it = held.find(e.addr);
    if (it != held.end()) {
      lives[it->second].freed = k;
      held.erase(it);
    }
    if (e.bytes > 0) {
      held.emplace(e.addr, lives.size());
      lives.push_back({e.bytes, k, kNever});
    }
  }
  if (!(backward.end > backward.begin)) return;  // no backward: nothing was kept for one

  auto in_backward = [&](TraceTime ts) { return ts >= backward.begin && ts <= backward.end; };
  auto held_past = [&](const Life& l, TraceTime ts) { return l.freed == kNever || event(l.freed).ts > ts; };
  for (LayerProfile& l : step.layers) l.saved_bytes = l.backward_working_bytes = l.output_bytes = 0;
  step.step_grad_bytes = 0;
  std::vector<std::int64_t> working_change(n, 0);  // the working memory each event makes or frees
  for (const Life& l : lives) {
    const PassPlace& made_in = where[l.made];
    const TraceTime made_at = event(l.made).ts;
    if (made_in.pass == PassPlace::Pass::kForward && made_at < backward.begin) {
      if (held_past(l, backward.begin))
        add_bytes(step.layers[static_cast<std::size_t>(made_in.layer)].saved_bytes, l.bytes);
    } else if (in_backward(made_at)) {
      if (held_past(l, backward.end)) {
        add_bytes(step.step_grad_bytes, l.bytes);
      } else {
        add_bytes(working_change[l.made], l.bytes);
        add_bytes(working_change[l.freed], -l.bytes);
      }
    }
  }
  // The backward's working memory held at each of a layer's events, before and after it.
  std::int64_t live = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t was = live;
    add_bytes(live, working_change[k]);
    if (where[k].pass != PassPlace::Pass::kBackward) continue;
    auto& peak = step.layers[static_cast<std::size_t>(where[k].layer)].backward_working_bytes;
    peak = std::max({peak, was, live});
  }
  step.has_saved_bytes = true;
  step.memory_source = "memory events";
}

}  // namespace pipesim::trace_import
