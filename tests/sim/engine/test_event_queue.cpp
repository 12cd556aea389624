#include <gtest/gtest.h>

#include "engine/event_queue.hpp"

namespace pipesim::sim {
namespace {

TEST(EventQueue, OrdersByTimeThenPriorityThenInsertion) {
  EventQueue q;
  q.push(20, 0, 0, 1);
  q.push(10, 1, 0, 2);
  q.push(10, 0, 0, 3);
  q.push(10, 1, 0, 4);
  q.push(5, 9, 0, 5);
  std::vector<std::int32_t> order;
  while (!q.empty()) order.push_back(q.pop().target);
  EXPECT_EQ(order, (std::vector<std::int32_t>{5, 3, 2, 4, 1}));
}

}  // namespace
}  // namespace pipesim::sim
