#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/page_populator.hpp"
#include "pipesim/sim/core/huge_page_allocator.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace pipesim::sim {
namespace {

#if defined(__linux__)
/// Pages of [p, p + bytes) the process has backed.
std::size_t resident_pages(void* p, std::size_t bytes) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((bytes + page - 1) / page);
  if (mincore(p, bytes, in.data()) != 0) return 0;
  std::size_t n = 0;
  for (unsigned char c : in) n += c & 1U;
  return n;
}

TEST(PagePopulator, BacksARequestedRangeWithPagesWithoutTouchingIt) {
  const std::size_t bytes = std::size_t{6} << 20;
  auto* block = static_cast<unsigned char*>(acquire_huge_block(bytes));
  ASSERT_NE(block, nullptr);
  // Fresh or kept from an earlier test: its pages are dropped first, so that only the request backs them.
  ASSERT_EQ(madvise(block, bytes, MADV_DONTNEED), 0);
  ASSERT_EQ(resident_pages(block, bytes), 0u);
  populate_async(block + (std::size_t{2} << 20), std::size_t{2} << 20);
  if (!wait_for_populate()) {
    release_huge_block(block, bytes);
    GTEST_SKIP() << "this kernel cannot populate pages ahead (MADV_POPULATE_WRITE needs Linux 5.14)";
  }
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), two_mib = std::size_t{2} << 20;
  EXPECT_EQ(resident_pages(block + two_mib, two_mib), two_mib / page);  // the requested huge page
  // Neither neighbour (a huge page backing the range may only cover the range itself).
  EXPECT_EQ(resident_pages(block, two_mib), 0u);
  EXPECT_EQ(resident_pages(block + 2 * two_mib, two_mib), 0u);
  release_huge_block(block, bytes);
}

TEST(PagePopulator, LeavesWhatTheBlockHoldsAsItWas) {
  // Half of it written, half zeroed explicitly: a block may be one kept from an earlier array (the
  // allocator leaves new elements unwritten), so nothing is assumed of memory the test did not write.
  HugeVector<std::uint32_t> v(std::size_t{3} << 20);  // 12 MiB
  const auto value = [&v](std::size_t i) {
    return i < v.size() / 2 ? static_cast<std::uint32_t>(i * 2654435761U) : 0u;
  };
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = value(i);
  populate_elements(v, 0, v.size());
  wait_for_populate();
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], value(i)) << i;
}

TEST(PagePopulator, ForgettingABlockDropsItsRequests) {
  // Given back, a block's pending requests are dropped and the step in progress waited for: its next owner
  // (which may drop its pages, or be another mapping at the same address) is not populated behind its back.
  const std::size_t bytes = std::size_t{64} << 20;
  void* block = acquire_huge_block(bytes);
  ASSERT_NE(block, nullptr);
  populate_async(block, bytes);
  forget_populate(block, bytes);
  ASSERT_EQ(madvise(block, bytes, MADV_DONTNEED), 0);
  wait_for_populate();  // a request left queued would back pages here
  EXPECT_EQ(resident_pages(block, bytes), 0u);
  release_huge_block(block, bytes);
}
#endif

TEST(PagePopulator, SmallVectorsAreNotQueued) {
  // Below a huge block the storage comes from the standard allocator, which may hand it back to the kernel
  // at any time: such vectors are left alone.
  HugeVector<int> small(1000, 7);
  populate_elements(small, 0, small.size());
  wait_for_populate();
  for (int x : small) ASSERT_EQ(x, 7);
}

}  // namespace
}  // namespace pipesim::sim
