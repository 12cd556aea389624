// Event queue of the engine: a binary heap totally ordered by (time, priority, insertion sequence), so that
// simultaneous events always pop in the same order and runs are deterministic.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "pipesim/sim/time.hpp"

namespace pipesim::sim {

struct Event {
  TimePoint time = 0;
  std::int32_t priority = 0;  ///< lower pops first among events at the same time
  std::uint64_t sequence = 0;
  std::int32_t type = 0;
  std::int32_t target = 0;
  std::uint32_t version = 0;  ///< lets the owner ignore events it has superseded
};

class EventQueue {
 public:
  void push(TimePoint time, std::int32_t priority, std::int32_t type, std::int32_t target,
            std::uint32_t version = 0) {
    heap_.push(Event{time, priority, next_sequence_++, type, target, version});
  }
  bool empty() const { return heap_.empty(); }
  TimePoint next_time() const { return heap_.top().time; }  ///< of the next event; the queue is not empty
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  std::size_t size() const { return heap_.size(); }
  std::uint64_t pushed() const { return next_sequence_; }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.time != b.time) return a.time > b.time;
      if (a.priority != b.priority) return a.priority > b.priority;
      return a.sequence > b.sequence;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace pipesim::sim
