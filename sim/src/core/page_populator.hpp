// Backing plan-sized arrays with pages on the second CPU. The kernel zeroes every fresh page on its first
// touch, and for the arrays that grow with a plan's ops (the plan's ops, the engine's records, the timeline)
// that zeroing was a fifth of a large simulation's time, paid by the thread that fills them. A background
// thread now asks the kernel to back the part of such an array about to be written (MADV_POPULATE_WRITE,
// Linux 5.14 and later) while the filling thread works; where the kernel lacks it, nothing changes.
#pragma once

#include <cstddef>

#include "pipesim/sim/core/huge_page_allocator.hpp"

namespace pipesim::sim {

/// Queues [p, p + bytes), inside a block from acquire_huge_block, to be backed with pages by the background
/// thread (started on the first request). Contents do not change; a request the kernel cannot serve is
/// dropped.
void populate_async(const void* p, std::size_t bytes) noexcept;

/// Drops the queued requests inside [block, block + bytes) and waits for the one in progress there: called
/// before a block is freed or kept for reuse.
void forget_populate(const void* block, std::size_t bytes) noexcept;

/// Waits until every queued request is served; returns false when the background thread cannot populate
/// (no thread, or a kernel before 5.14). For tests and benchmarks.
bool wait_for_populate() noexcept;

/// Queues elements [first, first + count) of `v`'s storage, clamped to its capacity, when that storage is a
/// huge block (smaller arrays come from the standard allocator and are left alone).
template <class T>
void populate_elements(const HugeVector<T>& v, std::size_t first, std::size_t count) noexcept {
  if (v.capacity() * sizeof(T) < kHugeBlockMin || first >= v.capacity()) return;
  if (count > v.capacity() - first) count = v.capacity() - first;
  populate_async(v.data() + first, count * sizeof(T));
}

}  // namespace pipesim::sim
