// Results a command is done with, left for the process's exit to free: the kernel takes back a plan of a
// million ops at once, while destroying it op by op took 2-3 % of a large simulation's process.
#pragma once

#include <optional>
#include <type_traits>
#include <utility>

namespace pipesim::cli {

/// Keeps `value` until the process exits (reachable, so leak checkers do not count it). A later call for the
/// same type, as when commands run in one process one after another, frees the value kept before.
template <class T>
void keep_until_exit(T&& value) {
  using Kept = std::optional<std::decay_t<T>>;
  static Kept* const kept = new Kept;  // never destroyed: that is the point
  kept->reset();
  kept->emplace(std::forward<T>(value));
}

}  // namespace pipesim::cli
