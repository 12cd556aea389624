#include <array>
#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pipesim/sim/core/huge_page_allocator.hpp"

namespace pipesim::sim {
namespace {

std::uintptr_t address(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}

TEST(HugeBlocks, AreAlignedToHugePages) {
  for (std::size_t bytes : {kHugeBlockMin, kHugeBlockMin + 1, std::size_t{37} << 20}) {
    void* b = acquire_huge_block(bytes);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(address(b) % (std::size_t{2} << 20), 0u) << bytes;
    release_huge_block(b, bytes);
  }
}

TEST(HugeBlocks, ABlockGivenBackServesTheNextRequestOfItsSizeClass) {
  // Classes come four per doubling (32, 40, 48, 56 MiB, ...): 33 and 40 MiB share one, 41 MiB is the next.
  void* first = acquire_huge_block(std::size_t{33} << 20);
  release_huge_block(first, std::size_t{33} << 20);
  void* again = acquire_huge_block(std::size_t{40} << 20);
  EXPECT_EQ(again, first);
  release_huge_block(again, std::size_t{40} << 20);
  void* other = acquire_huge_block(std::size_t{41} << 20);
  EXPECT_NE(other, first);
  release_huge_block(other, std::size_t{41} << 20);
}

TEST(HugeBlocks, AVectorRefilledAfterFreeingGetsTheSameMemory) {
  const std::size_t n = (std::size_t{5} << 20) / sizeof(std::int64_t);
  const std::int64_t* before = nullptr;
  {
    HugeVector<std::int64_t> v(n, 1);
    before = v.data();
  }
  HugeVector<std::int64_t> w(n, 2);
  EXPECT_EQ(w.data(), before);
  EXPECT_EQ(w[n - 1], 2);
}

TEST(HugeBlocks, ElementsMadeWithoutArgumentsRunTheirMemberInitializers) {
  // resize() default-initializes (numbers are left for the caller to write), so a record's members still
  // get their initializers, and values asked for are still written.
  struct Record {
    std::int32_t id = -1;
    double share = 0.5;
  };
  HugeVector<Record> records;
  records.resize((std::size_t{3} << 20) / sizeof(Record));
  EXPECT_EQ(records.back().id, -1);
  EXPECT_EQ(records.back().share, 0.5);
  HugeVector<std::int32_t> filled((std::size_t{3} << 20) / sizeof(std::int32_t), -7);
  EXPECT_EQ(filled.back(), -7);
  filled.assign(filled.size(), 9);
  EXPECT_EQ(filled.front(), 9);
}

TEST(HugeBlocks, KeepsTheEightNewestBlocksGivenBack) {
  constexpr std::size_t kBytes = std::size_t{4} << 20;
  std::vector<void*> blocks(24);
  for (void*& b : blocks) b = acquire_huge_block(kBytes);
  for (void* b : blocks) release_huge_block(b, kBytes);
  std::set<void*> newest(blocks.end() - 8, blocks.end()), served;
  for (int k = 0; k < 8; ++k) served.insert(acquire_huge_block(kBytes));
  EXPECT_EQ(served, newest);
  for (void* b : served) release_huge_block(b, kBytes);
}

TEST(HugeBlocks, TwoThreadsNeverHoldTheSameBlock) {
  // Each thread stamps the blocks it holds and checks the stamp before giving them back.
  constexpr std::size_t kBytes = std::size_t{2} << 20;
  std::atomic<int> clashes{0};
  auto work = [&](std::int64_t stamp) {
    for (int round = 0; round < 200; ++round) {
      std::array<std::int64_t*, 3> held{};
      for (auto*& b : held) {
        b = static_cast<std::int64_t*>(acquire_huge_block(kBytes));
        b[0] = stamp;
      }
      for (auto* b : held) {
        if (b[0] != stamp) ++clashes;
        release_huge_block(b, kBytes);
      }
    }
  };
  std::thread a(work, 1), b(work, 2);
  a.join();
  b.join();
  EXPECT_EQ(clashes.load(), 0);
}

#if defined(__SANITIZE_ADDRESS__)
TEST(HugeBlocksDeathTest, AKeptBlockIsPoisonedUnderAddressSanitizer) {
  // A block given back stays mapped for the next run: a use of it before then is still reported.
  void* b = acquire_huge_block(std::size_t{4} << 20);
  release_huge_block(b, std::size_t{4} << 20);
  EXPECT_DEATH(static_cast<volatile char*>(b)[100] = 1, "use-after-poison");
}
#endif

TEST(HugeBlocks, AnImpossibleSizeIsRefused) {
  EXPECT_EQ(acquire_huge_block(static_cast<std::size_t>(-1)), nullptr);
  EXPECT_THROW(HugePageAllocator<char>{}.allocate(static_cast<std::size_t>(-1) / 2), std::bad_alloc);
}

}  // namespace
}  // namespace pipesim::sim
