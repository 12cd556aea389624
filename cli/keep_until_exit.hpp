// Results a command is done with, left for the process's exit to free: the kernel takes back a plan of a
// million ops at once, where destroying it op by op would visit every op once more.
#pragma once

#include <optional>
#include <type_traits>
#include <utility>

namespace pipesim::cli {

/// Set by main(): this process ends after its one command. Where commands run in a process that goes on (the
/// Python module in an interpreter, the argument fuzz target), results are freed as usual.
inline bool process_ends_after_command = false;

#if defined(__SANITIZE_ADDRESS__)
#define PIPESIM_LEAK_CHECKED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define PIPESIM_LEAK_CHECKED 1
#endif
#endif

/// Keeps `value` until the process exits when it ends after this command; otherwise leaves it to the caller
/// to free. A later call for the same type frees the value kept before.
template <class T>
void keep_until_exit(T&& value) {
#if defined(PIPESIM_LEAK_CHECKED)
  // Freed as usual under LeakSanitizer: an op keeps a longer dependency list's address in unaligned bytes,
  // which its scan does not take for a pointer, so kept ops would be reported as leaks.
  (void)value;
#else
  if (!process_ends_after_command) return;
  using Kept = std::optional<std::decay_t<T> >;
  static Kept* const kept = new Kept;  // never destroyed: that is the point
  kept->reset();
  kept->emplace(std::forward<T>(value));
#endif
}

}  // namespace pipesim::cli
