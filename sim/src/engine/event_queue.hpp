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
  /// (priority, insertion sequence) in one unsigned key: the priority biased into the top 16 bits, the
  /// sequence below, so one comparison orders events that share a time.
  std::uint64_t key = 0;
  std::int32_t target = 0;
  std::uint32_t version = 0;  ///< lets the owner ignore events it has superseded
  std::int32_t type = 0;

  static constexpr int kSequenceBits = 48;
  /// Lower pops first among events at the same time.
  std::int32_t priority() const { return static_cast<std::int32_t>(key >> kSequenceBits) - (1 << 15); }
};

class EventQueue {
 public:
  /// `priority` must lie in [-32768, 32767]; at most 2^48 events are pushed in one run.
  void push(TimePoint time, std::int32_t priority, std::int32_t type, std::int32_t target,
            std::uint32_t version = 0) {
    const auto biased = static_cast<std::uint64_t>(static_cast<std::uint16_t>(priority + (1 << 15)));
    heap_.push(Event{time, biased << Event::kSequenceBits | next_sequence_++, target, version, type});
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
      return a.time != b.time ? a.time > b.time : a.key > b.key;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace pipesim::sim
