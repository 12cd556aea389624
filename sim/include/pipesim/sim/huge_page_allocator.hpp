// Allocator for the arrays that grow with a plan's ops (millions of entries): blocks of 2 MiB and more are
// aligned to 2 MiB and offered to the kernel as transparent huge pages, so filling them takes one page
// fault per 2 MiB instead of one per 4 KiB (page faults were a fifth of an 8,192-GPU simulation's time).
// Smaller blocks come from the standard allocator.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace pipesim::sim {

template <class T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)

  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return std::allocator<T>{}.allocate(n);
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    (void)madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without huge pages the block still works
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kHugePage)
      std::allocator<T>{}.deallocate(p, n);
    else
      std::free(p);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

/// A vector of plan-sized data on huge pages.
template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace pipesim::sim
