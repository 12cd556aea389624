#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "engine/group_numbering.hpp"

namespace pipesim::sim {
namespace {

TEST(GroupNumbering, DenseIdsAreNumberedInAscendingOrderThroughATable) {
  // Ids 0..6 with gaps and repeats, over 10 ops: the table path.
  const std::vector<std::int32_t> ids{5, 2, 5, 0, 6, 2};
  const GroupNumbering g(ids, 10);
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0], 0u);
  EXPECT_EQ(g[2], 1u);
  EXPECT_EQ(g[5], 2u);
  EXPECT_EQ(g[6], 3u);
}

TEST(GroupNumbering, SparseIdsGetTheSameNumbersWithoutATableOfTheirSize) {
  // The largest id is far above twice the op count: the sorted-search path, same ascending numbers.
  const std::vector<std::int32_t> ids{2147483647, 7, 2147483647, 1000000};
  const GroupNumbering g(ids, 4);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[7], 0u);
  EXPECT_EQ(g[1000000], 1u);
  EXPECT_EQ(g[2147483647], 2u);
}

TEST(GroupNumbering, NoGroups) {
  const GroupNumbering g(std::span<const std::int32_t>{}, 0);
  EXPECT_EQ(g.size(), 0u);
}

}  // namespace
}  // namespace pipesim::sim
