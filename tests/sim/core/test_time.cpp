#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/time.hpp"

namespace pipesim::sim {
namespace {

TEST(Time, ConversionsRoundAndCheckRange) {
  EXPECT_EQ(duration_from_seconds(1.5e-3), 1'500'000);
  EXPECT_EQ(duration_from_seconds(0), 0);
  EXPECT_THROW(duration_from_seconds(-1), InputError);
  EXPECT_THROW(duration_from_seconds(std::nan("")), InputError);
  EXPECT_THROW(duration_from_seconds(1e12), InputError);
  EXPECT_EQ(duration_for_work(1e12, 1e15), 1'000'000);  // 1 TFLOP at 1 PFLOP/s = 1 ms
  EXPECT_EQ(duration_for_work(1, 3e9), 1);              // rounds up: never zero for positive work
  EXPECT_EQ(duration_for_work(0, 1), 0);
  EXPECT_THROW(duration_for_work(1, 0), InputError);
}

}  // namespace
}  // namespace pipesim::sim
