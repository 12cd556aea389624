#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "core/page_populator.hpp"
#include "pipesim/sim/core/huge_page_allocator.hpp"
#include "pipesim/sim/core/memory_budget.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define PIPESIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PIPESIM_ASAN 1
#endif
#endif
#if defined(PIPESIM_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace pipesim::sim {
namespace {

constexpr std::size_t kHugePage = kHugePageBytes;
/// Freed blocks kept for reuse, and the bytes they may hold in all: enough for the plan, the engine's
/// records and the timeline of a run of millions of ops, little beside a model's training memory; an
/// eighth of the memory this process may use at most (under `ulimit -v` the kept blocks count against the
/// limit, and a search's other allocations must still fit).
constexpr std::size_t kCachedBlocks = 8;
std::size_t kept_bytes_max() {
  static const std::size_t cap = static_cast<std::size_t>(
      std::clamp(usable_memory_bytes() / 8, 0.0, static_cast<double>(std::size_t{512} << 20)));
  return cap;
}

/// Block sizes come in classes, four per doubling, so a plan a few ops larger than the last one reuses its
/// blocks (the unused tail is address space only: pages are backed when touched).
std::size_t size_class(std::size_t bytes) {
  if (bytes > (std::size_t{1} << 62)) return 0;  // no such block: acquire fails, as malloc would
  std::size_t pages = (bytes + kHugePage - 1) / kHugePage;
  if (pages <= 4) return pages * kHugePage;
  const int top = 63 - __builtin_clzll(pages);  // pages in [2^top, 2^(top+1))
  const std::size_t step = std::size_t{1} << (top - 2);
  pages = (pages + step - 1) / step * step;
  return pages * kHugePage;
}

struct Cache {
  std::mutex mutex;
  std::array<void*, kCachedBlocks> block{};
  std::array<std::size_t, kCachedBlocks> bytes{};
  std::array<std::uint64_t, kCachedBlocks> kept_at{};  // when it was given back: the oldest goes first
  std::uint64_t releases = 0;
  std::size_t held = 0;
};
Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: blocks may be freed by other static destructors
  return *c;
}

/// Under AddressSanitizer a kept block is poisoned, so a use of a freed plan-sized array is still caught.
void set_poisoned(void* block, std::size_t bytes, bool poisoned) {
#if defined(PIPESIM_ASAN)
  if (poisoned)
    ASAN_POISON_MEMORY_REGION(block, bytes);
  else
    ASAN_UNPOISON_MEMORY_REGION(block, bytes);
#else
  (void)block, (void)bytes, (void)poisoned;
#endif
}

void* map_block(std::size_t bytes) {
  void* raw = std::aligned_alloc(kHugePage, bytes);
  if (raw == nullptr) return nullptr;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  (void)madvise(raw, bytes, MADV_HUGEPAGE);  // advice only: without huge pages the block still works
#endif
  return raw;
}

}  // namespace

void* acquire_huge_block(std::size_t bytes) {
  const std::size_t size = size_class(bytes);
  if (size == 0) return nullptr;
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    for (std::size_t k = 0; k < kCachedBlocks; ++k)
      if (c.block[k] != nullptr && c.bytes[k] == size) {
        c.held -= size;
        set_poisoned(c.block[k], size, false);
        return std::exchange(c.block[k], nullptr);
      }
  }
  if (void* fresh = map_block(size)) return fresh;
  // Out of memory or of address space (a ulimit): the kept blocks go back and the request is tried again.
  std::array<void*, kCachedBlocks> kept{};
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    for (std::size_t k = 0; k < kCachedBlocks; ++k)
      if (c.block[k] != nullptr) {
        set_poisoned(c.block[k], c.bytes[k], false);
        kept[k] = std::exchange(c.block[k], nullptr);
      }
    c.held = 0;
  }
  for (void* b : kept) std::free(b);
  return map_block(size);
}

void release_huge_block(void* block, std::size_t bytes) noexcept {
  const std::size_t size = size_class(bytes);
  forget_populate(block, size);  // the background thread keeps off it from here on
  if (size > kept_bytes_max()) {
    std::free(block);
    return;
  }
#if defined(__linux__) && defined(MADV_FREE)
  // A kept block's pages stay until the kernel needs them: under memory pressure it takes them back as if
  // they were freed, and the block's next owner then finds fresh pages.
  (void)madvise(block, size, MADV_FREE);
#endif
  set_poisoned(block, size, true);
  // The newest blocks are kept (the next run most likely has the same sizes): the oldest make room.
  std::array<void*, kCachedBlocks> evicted{};
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    for (std::size_t e = 0;; ++e) {
      std::size_t empty = kCachedBlocks, oldest = kCachedBlocks;
      for (std::size_t k = 0; k < kCachedBlocks; ++k) {
        if (c.block[k] == nullptr)
          empty = k;
        else if (oldest == kCachedBlocks || c.kept_at[k] < c.kept_at[oldest])
          oldest = k;
      }
      if (empty < kCachedBlocks && c.held + size <= kept_bytes_max()) {
        c.block[empty] = block;
        c.bytes[empty] = size;
        c.kept_at[empty] = ++c.releases;
        c.held += size;
        break;
      }
      // Ends: size <= kept_bytes_max(), so once every block is out there is room.
      evicted[e] = std::exchange(c.block[oldest], nullptr);
      set_poisoned(evicted[e], c.bytes[oldest], false);
      c.held -= c.bytes[oldest];
    }
  }
  for (void* b : evicted) std::free(b);  // outside the lock; free(nullptr) does nothing
}

}  // namespace pipesim::sim
