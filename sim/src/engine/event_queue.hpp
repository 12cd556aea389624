// Event queue of the engine, totally ordered by (time, priority, insertion sequence), so that simultaneous
// events always pop in the same order and runs are deterministic.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "pipesim/sim/core/time.hpp"

namespace pipesim::sim {

/// 24 bytes: the queue moves each event a few times, and a large job has millions.
struct Event {
  TimePoint time = 0;
  /// (priority, insertion sequence, type) in one unsigned key: the priority biased into the top 16 bits,
  /// the sequence in the next 46 and the type in the lowest 2, so one comparison orders events that share a
  /// time (the sequence is unique: the type never decides).
  std::uint64_t key = 0;
  std::int32_t target = 0;
  std::uint32_t version = 0;  ///< lets the owner ignore events it has superseded

  static constexpr int kTypeBits = 2;
  static constexpr int kSequenceBits = 46;
  /// Lower pops first among events at the same time.
  std::int32_t priority() const {
    return static_cast<std::int32_t>(key >> (kSequenceBits + kTypeBits)) - (1 << 15);
  }
  /// What the owner pushed it for, 0 .. 3.
  std::int32_t type() const { return static_cast<std::int32_t>(key & ((1u << kTypeBits) - 1)); }
};
static_assert(sizeof(Event) == 24);

/// A radix heap: the engine never schedules into the past, so event times pushed are never earlier than the
/// last one popped. Bucket b > 0 holds the events whose time first differs from that last time in bit b-1
/// (counting from the lowest); the events at exactly that time sit in `now_`, sorted by key and popped from
/// its front. Popping when `now_` is empty empties the lowest non-empty bucket into the lower ones around its
/// earliest time, so each event moves at most 64 times in all; the pending events of thousands of GPUs stay
/// out of one deep heap.
class EventQueue {
 public:
  /// `time` must not precede the time of the last event popped; `priority` must lie in [-32768, 32767] and
  /// `type` in [0, 3]; at most 2^46 events are pushed in one run. Inlined where it is called (each op's start
  /// pushes its end, the hottest call of a simulation).
  [[gnu::always_inline]] void push(TimePoint time, std::int32_t priority, std::int32_t type,
                                   std::int32_t target, std::uint32_t version = 0) {
    if (time < last_) throw std::logic_error("event queue: an event pushed before the last one popped");
    if (priority < -(1 << 15) || priority >= (1 << 15))
      throw std::logic_error("event queue: a priority outside [-32768, 32767]");
    if (type < 0 || type >= (1 << Event::kTypeBits))
      throw std::logic_error("event queue: a type outside [0, 3]");
    const auto biased = static_cast<std::uint64_t>(static_cast<std::uint16_t>(priority + (1 << 15)));
    const Event e{time,
                  (biased << Event::kSequenceBits | next_sequence_++) << Event::kTypeBits |
                      static_cast<std::uint64_t>(type),
                  target, version};
    ++size_;
    const int b = bucket_of(time, last_);
    if (b > 0) {
      to_bucket(b, e);
    } else if (now_.size() == head_ || e.key > now_.back().key) {
      now_.push_back(e);  // the usual case: a later insertion at the same priority
    } else {
      now_.insert(
          std::upper_bound(now_.begin() + static_cast<std::ptrdiff_t>(head_), now_.end(), e, KeyLess{}), e);
    }
  }
  bool empty() const { return size_ == 0; }
  /// The time of the next event; the queue is not empty.
  TimePoint next_time() const {
    if (more_at_last_popped_time()) return last_;
    return earliest_[lowest_occupied()];
  }
  /// The event `ahead` places after the next one to pop at the last popped time, or nullptr: the engine
  /// fetches what it will touch while it handles the ones before (thousands of GPUs end ops at one instant).
  const Event* peek_now(std::size_t ahead) const {
    return head_ + ahead < now_.size() ? &now_[head_ + ahead] : nullptr;
  }
  /// Whether events remain at the time of the last event popped.
  bool more_at_last_popped_time() const { return head_ < now_.size(); }
  Event pop() {
    if (!more_at_last_popped_time()) settle();
    Event e = now_[head_++];
    if (head_ == now_.size()) {
      now_.clear();
      head_ = 0;
    }
    --size_;
    return e;
  }
  std::size_t size() const { return size_; }
  std::uint64_t pushed() const { return next_sequence_; }

 private:
  static constexpr int kBuckets = 65;
  struct KeyLess {
    bool operator()(const Event& a, const Event& b) const { return a.key < b.key; }
  };
  static std::array<TimePoint, kBuckets> filled(TimePoint t) {
    std::array<TimePoint, kBuckets> a;
    a.fill(t);
    return a;
  }
  static int bucket_of(TimePoint time, TimePoint last) {
    const auto diff = static_cast<std::uint64_t>(time) ^ static_cast<std::uint64_t>(last);
    return diff == 0 ? 0 : 64 - __builtin_clzll(diff);
  }
  /// Moves the earliest pending events into `now_` (which is empty); the queue is not empty.
  void settle() {
    const std::size_t b = lowest_occupied();
    auto& from = buckets_[b];
    last_ = earliest_[b];
    earliest_[b] = kNever;
    occupied_ &= ~(std::uint64_t{1} << (b - 1));
    // Every event of bucket b goes to a lower one (all share the bits from b - 1 up with the new last time),
    // so the bucket is read in place and keeps its buffer.
    for (const Event& e : from) {
      const int to = bucket_of(e.time, last_);
      if (to == 0)
        now_.push_back(e);
      else
        to_bucket(to, e);
    }
    from.clear();
    // Usually already in order (a bucket keeps its events in push order unless a settle moved older ones in).
    if (!std::is_sorted(now_.begin(), now_.end(), KeyLess{})) std::sort(now_.begin(), now_.end(), KeyLess{});
  }

  /// Files an event in bucket b > 0, keeping the bucket's earliest time: settling a bucket then reads its
  /// events once, to move them, instead of twice (a large job's GPUs run in step, so a bucket holds the
  /// events of thousands of them).
  void to_bucket(int b, const Event& e) {
    const auto i = static_cast<std::size_t>(b);
    buckets_[i].push_back(e);
    earliest_[i] = std::min(earliest_[i], e.time);
    occupied_ |= std::uint64_t{1} << (b - 1);
  }
  /// The lowest non-empty bucket; the queue holds events outside `now_`.
  std::size_t lowest_occupied() const { return static_cast<std::size_t>(__builtin_ctzll(occupied_)) + 1; }

  // size_ and next_sequence_ apart: side by side, push() added to both with one 16-byte load and store, and
  // that load waited whenever pop() had just stored size_ alone (a fifth of push's time).
  std::size_t size_ = 0;
  std::array<std::vector<Event>, kBuckets> buckets_;  // bucket 0 unused: those events are in now_
  static constexpr TimePoint kNever = std::numeric_limits<TimePoint>::max();
  std::array<TimePoint, kBuckets> earliest_ = filled(kNever);  // each bucket's earliest time; kNever: empty
  std::uint64_t occupied_ = 0;                                 // bit b - 1 set: bucket b holds events
  std::vector<Event> now_;                                     // events at the last popped time, by key
  std::size_t head_ = 0;                                       // the next of now_ to pop
  TimePoint last_ = 0;
  std::uint64_t next_sequence_ = 0;
};

}  // namespace pipesim::sim
