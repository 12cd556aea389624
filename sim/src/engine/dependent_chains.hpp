// Reverse dependencies of a plan's ops, for the engine to release when an op ends. Each op keeps one OpId:
// -1 when nothing depends on it, the dependent itself when there is one (the usual case), else a reference to
// a chain of links, newest dependent first. Built in one pass over the ops, possibly on two threads over two
// halves of the plan, then joined.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "pipesim/sim/error.hpp"
#include "pipesim/sim/plan.hpp"

namespace pipesim::sim {

class DependentChains {
 public:
  struct Link {
    OpId op;
    std::int32_t next;  // the link of the dependent before it, or -1
  };

  /// `op` depends on the op whose entry is `head`, and comes after every dependent already there.
  void add(OpId& head, OpId op, const std::string& origin) {
    if (head == -1) {
      head = op;
      return;
    }
    // A second dependent: both move to links (the chain is walked backwards, so the first is linked first).
    reserve_links(2, origin);
    std::int32_t prev = -1;
    if (head >= 0) {
      prev = static_cast<std::int32_t>(links_.size());
      links_.push_back({head, -1});
    } else {
      prev = link_of(head);
    }
    head = ref_of(static_cast<std::int32_t>(links_.size()));
    links_.push_back({op, prev});
  }

  /// Takes over `later`'s links, whose dependents all come after this one's in the plan; returns what to add
  /// to the link numbers in `later`'s entries (see join).
  std::int32_t absorb(const DependentChains& later, const std::string& origin) {
    reserve_links(later.links_.size(), origin);
    const auto offset = static_cast<std::int32_t>(links_.size());
    for (const Link& l : later.links_) links_.push_back({l.op, l.next < 0 ? -1 : l.next + offset});
    return offset;
  }
  /// One entry from this chain set's own ops (`earlier`) and one absorbed with `offset` (`later`): the entry
  /// with `earlier`'s dependents first, then `later`'s.
  OpId join(OpId earlier, OpId later, std::int32_t offset, const std::string& origin) {
    if (later < -1) later = ref_of(link_of(later) + offset);
    if (later == -1) return earlier;
    if (earlier == -1) return later;
    reserve_links(2, origin);
    std::int32_t top = -1;  // earlier's newest link
    if (earlier >= 0) {
      top = static_cast<std::int32_t>(links_.size());
      links_.push_back({earlier, -1});
    } else {
      top = link_of(earlier);
    }
    if (later >= 0) {
      links_.push_back({later, top});
      return ref_of(static_cast<std::int32_t>(links_.size()) - 1);
    }
    std::int32_t oldest = link_of(later);
    while (links_[static_cast<std::size_t>(oldest)].next >= 0)
      oldest = links_[static_cast<std::size_t>(oldest)].next;
    links_[static_cast<std::size_t>(oldest)].next = top;
    return later;
  }

  /// Calls f(dependent) for each dependent in `head`, in plan order; `scratch` is reused between calls.
  template <class F>
  void for_each(OpId head, std::vector<OpId>& scratch, F&& f) const {
    if (head >= 0) {
      f(head);
      return;
    }
    if (head == -1) return;
    // The chain runs from the last dependent to the first.
    scratch.clear();
    for (std::int32_t k = link_of(head); k >= 0; k = links_[static_cast<std::size_t>(k)].next)
      scratch.push_back(links_[static_cast<std::size_t>(k)].op);
    for (std::size_t k = scratch.size(); k-- > 0;) f(scratch[k]);
  }

 private:
  static constexpr OpId ref_of(std::int32_t link) { return -2 - link; }
  static constexpr std::int32_t link_of(OpId ref) { return -2 - ref; }  // ref_of's inverse
  void reserve_links(std::size_t more, const std::string& origin) const {
    if (links_.size() + more > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) - 2)
      throw InputError(origin, "/ops",
                       "over 2^31 - 4 dependencies on ops that have more than one dependent; valid: fewer");
  }

  std::vector<Link> links_;
};

}  // namespace pipesim::sim
