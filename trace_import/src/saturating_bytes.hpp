// Byte counts summed from an untrusted trace: its sizes may be anything a 64-bit integer holds.
#pragma once

#include <cstdint>

namespace pipesim::trace_import {

/// `total` + `bytes`, held at int64's ends rather than overflowing (a workload of such sizes is refused
/// where it is read).
inline void add_bytes(std::int64_t& total, std::int64_t bytes) {
  if (__builtin_add_overflow(total, bytes, &total)) total = bytes > 0 ? INT64_MAX : INT64_MIN;
}

}  // namespace pipesim::trace_import
