// DepList: an op's dependencies, the first three inside the op, longer lists on the heap.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "pipesim/sim/core/dep_list.hpp"

namespace pipesim::sim {
namespace {

TEST(DepList, GrowsFromInlineToHeapKeepingOrder) {
  DepList d;
  EXPECT_TRUE(d.empty());
  for (std::int32_t i = 0; i < 100; ++i) {
    d.push_back(i * 7);
    ASSERT_EQ(d.size(), static_cast<std::size_t>(i + 1));
    ASSERT_EQ(d.back(), i * 7);
  }
  for (std::int32_t i = 0; i < 100; ++i) EXPECT_EQ(d[static_cast<std::size_t>(i)], i * 7);
  EXPECT_EQ(std::accumulate(d.begin(), d.end(), 0), 7 * 99 * 100 / 2);
  EXPECT_EQ(d.front(), 0);
  EXPECT_EQ(d.at(99), 693);
  EXPECT_THROW((void)d.at(100), std::out_of_range);
}

TEST(DepList, CopiesAndMovesInlineAndHeapLists) {
  const DepList small{4, 5};
  const DepList big(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6});
  for (const DepList* original : {&small, &big}) {
    DepList copy = *original;
    EXPECT_EQ(copy, *original);
    DepList moved = std::move(copy);
    EXPECT_EQ(moved, *original);
    EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from list is empty, by design
    DepList assigned{9};
    assigned = moved;
    EXPECT_EQ(assigned, *original);
    assigned = DepList{8, 8, 8, 8};
    EXPECT_EQ(assigned, (std::vector<std::int32_t>{8, 8, 8, 8}));
    assigned = *original;
    EXPECT_EQ(assigned, *original);
  }
  EXPECT_FALSE(small == big);
}

TEST(DepList, EraseRemoveSortUnique) {
  DepList d{5, -1, 3, 5, -1, 1, 3};
  d.erase(std::remove(d.begin(), d.end(), -1), d.end());
  EXPECT_EQ(d, (std::vector<std::int32_t>{5, 3, 5, 1, 3}));
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  EXPECT_EQ(d, (std::vector<std::int32_t>{1, 3, 5}));
  d.clear();
  EXPECT_TRUE(d.empty());
  d.push_back(2);
  EXPECT_EQ(d, (std::vector<std::int32_t>{2}));
}

TEST(DepList, IsSixteenBytes) {
  // Three ids inline beside the size; a longer list's heap address sits in those same bytes.
  EXPECT_EQ(sizeof(DepList), 16u);
  EXPECT_LT(sizeof(DepList), sizeof(std::vector<std::int32_t>));
}

TEST(DepList, ShrinksOnTheHeapAndGrowsAgain) {
  DepList d{1, 2, 3, 4, 5};
  d.erase(d.begin() + 1, d.end());  // one id left, still on the heap
  EXPECT_EQ(d, (std::vector<std::int32_t>{1}));
  for (std::int32_t i = 2; i <= 40; ++i) d.push_back(i);
  ASSERT_EQ(d.size(), 40u);
  for (std::int32_t i = 0; i < 40; ++i) EXPECT_EQ(d[static_cast<std::size_t>(i)], i + 1);
  DepList copy = d;
  d = DepList{7};
  EXPECT_EQ(d, (std::vector<std::int32_t>{7}));
  EXPECT_EQ(copy.size(), 40u);
  EXPECT_EQ(copy.back(), 40);
}

}  // namespace
}  // namespace pipesim::sim
