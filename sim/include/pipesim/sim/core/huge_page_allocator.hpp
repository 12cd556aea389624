// Allocator for the arrays that grow with a plan's ops (millions of entries): blocks of 1 MiB and more are
// rounded up to and aligned on 2 MiB and offered to the kernel as transparent huge pages, so filling them
// takes one page fault per 2 MiB instead of one per 4 KiB (page faults were a fifth of an 8,192-GPU
// simulation's time). Freed large blocks are kept for the next run of the same size
// (src/core/huge_blocks.cpp): a search or a notebook simulates plan after plan, and fresh memory costs its
// first touch again (a sixth of a compute-bound run). Smaller blocks come from the standard allocator.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace pipesim::sim {

/// A block of at least `bytes` (>= kHugeBlockMin), aligned to 2 MiB; nullptr when none can be had.
void* acquire_huge_block(std::size_t bytes);
/// Gives back a block from acquire_huge_block with the same `bytes`.
void release_huge_block(void* block, std::size_t bytes) noexcept;
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
/// Arrays from a megabyte up take a block of huge pages (rounded up to one): below a huge page the standard
/// allocator may give such an array back to the kernel when it is freed, and the next run of the same plan
/// then faults it in again page by page (the engine's 2 MB reverse-dependency array, every run of the
/// compute-bound benchmark).
inline constexpr std::size_t kHugeBlockMin = std::size_t{1} << 20;

template <class T>
struct HugePageAllocator {
  using value_type = T;

  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)

  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugeBlockMin) return std::allocator<T>{}.allocate(n);
    void* p = acquire_huge_block(bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kHugeBlockMin)
      std::allocator<T>{}.deallocate(p, n);
    else
      release_huge_block(p, n * sizeof(T));
  }
  /// Elements made without arguments are default-initialized: resize() leaves numbers unwritten (a plan-sized
  /// array the caller fills anyway is not zeroed first); classes still run their member initializers.
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
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
