#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <tuple>

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

TEST(EventQueue, PopsRandomPushesInTotalOrder) {
  // Interleaved pushes and pops against a sorted reference: (time, priority, insertion). As in the engine,
  // no event is pushed before the last one popped; times spread over several bits of the radix buckets.
  std::mt19937 rng(7);
  TimePoint last = 0;
  EventQueue q;
  std::vector<std::tuple<TimePoint, std::int32_t, std::int32_t>> pending;  // time, priority, target
  std::int32_t next = 0;
  for (int round = 0; round < 2000; ++round) {
    for (int k = static_cast<int>(rng() % 4); k >= 0; --k) {
      const TimePoint t =
          last + (rng() % 2 == 0 ? static_cast<TimePoint>(rng() % 3)
                                 : static_cast<TimePoint>(rng() % (std::int64_t{1} << (rng() % 40))));
      const auto p = static_cast<std::int32_t>(rng() % 3) - 1;
      q.push(t, p, 0, next);
      pending.emplace_back(t, p, next++);
    }
    const auto smallest = std::min_element(pending.begin(), pending.end());  // target = insertion order
    const Event e = q.pop();
    ASSERT_EQ(e.time, std::get<0>(*smallest));
    ASSERT_EQ(e.priority(), std::get<1>(*smallest));
    ASSERT_EQ(e.target, std::get<2>(*smallest));
    last = e.time;
    pending.erase(smallest);
    const bool more_now =
        std::any_of(pending.begin(), pending.end(), [&](const auto& p) { return std::get<0>(p) == last; });
    ASSERT_EQ(q.more_at_last_popped_time(), more_now);
    if (!pending.empty()) {
      ASSERT_EQ(q.next_time(), std::get<0>(*std::min_element(pending.begin(), pending.end())));
    }
  }
  EXPECT_EQ(q.size(), pending.size());
  EXPECT_EQ(q.pushed(), static_cast<std::uint64_t>(next));
}

TEST(EventQueue, KeepsEachEventsTypePriorityTargetAndVersion) {
  EventQueue q;
  q.push(7, -3, 3, 11, 0xffffffffu);
  q.push(7, 32767, 0, -5, 1);
  q.push(7, -32768, 2, 0, 2);
  const Event a = q.pop(), b = q.pop(), c = q.pop();
  EXPECT_EQ(std::make_tuple(a.priority(), a.type(), a.target, a.version), std::make_tuple(-32768, 2, 0, 2u));
  EXPECT_EQ(std::make_tuple(b.priority(), b.type(), b.target, b.version),
            std::make_tuple(-3, 3, 11, 0xffffffffu));
  EXPECT_EQ(std::make_tuple(c.priority(), c.type(), c.target, c.version), std::make_tuple(32767, 0, -5, 1u));
}

TEST(EventQueue, PeeksOnlyAtTheEventsOfThePoppedInstant) {
  EventQueue q;
  for (std::int32_t k = 0; k < 4; ++k) q.push(50, 0, 0, k);
  q.push(60, 0, 0, 9);
  EXPECT_EQ(q.pop().target, 0);
  ASSERT_NE(q.peek_now(0), nullptr);
  EXPECT_EQ(q.peek_now(0)->target, 1);
  ASSERT_NE(q.peek_now(2), nullptr);
  EXPECT_EQ(q.peek_now(2)->target, 3);
  EXPECT_EQ(q.peek_now(3), nullptr);  // the event at 60 is not at this instant
  EXPECT_EQ(q.pop().target, 1);
  EXPECT_EQ(q.peek_now(2), nullptr);
}

TEST(EventQueue, RefusesAnEventBeforeTheLastOnePopped) {
  EventQueue q;
  q.push(100, 0, 0, 1);
  q.push(300, 0, 0, 2);
  EXPECT_EQ(q.pop().target, 1);
  EXPECT_THROW(q.push(99, 0, 0, 3), std::logic_error);
  EXPECT_THROW(q.push(100, 1 << 15, 0, 3), std::logic_error);  // priorities fit 16 bits of the key
  EXPECT_THROW(q.push(100, -(1 << 15) - 1, 0, 3), std::logic_error);
  EXPECT_THROW(q.push(100, 0, 4, 3), std::logic_error);  // types fit the key's lowest 2 bits
  EXPECT_THROW(q.push(100, 0, -1, 3), std::logic_error);
  q.push(100, 0, 0, 4);  // the same instant is fine
  EXPECT_EQ(q.next_time(), 100);
  EXPECT_EQ(q.pop().target, 4);
  EXPECT_EQ(q.pop().target, 2);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace pipesim::sim
