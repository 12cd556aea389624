// Dense numbers for a plan's collective group ids: a plan may number its collectives sparsely (any id up to
// 2^31 - 1), while the engine keeps per-group state in arrays of exactly as many groups as are in use.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pipesim::sim {

class GroupNumbering {
 public:
  /// `ids`: the group id of every member op (repeats allowed); `ops`: the plan's op count. Groups are
  /// numbered in ascending order of their ids.
  GroupNumbering(std::span<const std::int32_t> ids, std::size_t ops) {
    const std::int32_t max_id = ids.empty() ? -1 : *std::max_element(ids.begin(), ids.end());
    if (max_id >= 0 && static_cast<std::size_t>(max_id) <= 2 * ops) {
      // Generated plans number their groups 0, 1, ...: a table indexed by id, filled in one pass.
      table_.assign(static_cast<std::size_t>(max_id) + 1, -1);
      for (std::int32_t id : ids) table_[static_cast<std::size_t>(id)] = 0;
      for (std::size_t id = 0; id < table_.size(); ++id)
        if (table_[id] == 0) {
          table_[id] = static_cast<std::int32_t>(ids_.size());
          ids_.push_back(static_cast<std::int32_t>(id));
        }
    } else {
      ids_.assign(ids.begin(), ids.end());
      std::sort(ids_.begin(), ids_.end());
      ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
    }
  }
  /// Groups in use.
  std::size_t size() const { return ids_.size(); }
  /// The dense number of group `id`, which is in use.
  std::size_t operator[](std::int32_t id) const {
    if (!table_.empty()) return static_cast<std::size_t>(table_[static_cast<std::size_t>(id)]);
    return static_cast<std::size_t>(std::lower_bound(ids_.begin(), ids_.end(), id) - ids_.begin());
  }

 private:
  std::vector<std::int32_t> ids_;    // the ids in use, ascending
  std::vector<std::int32_t> table_;  // id -> number, when the ids are dense enough
};

}  // namespace pipesim::sim
