// An op's dependency list. Almost every op waits for at most a few others, so up to kInline ids live inside
// the op itself and only longer lists (an optimizer step waiting for every gradient bucket) take heap memory:
// plans of millions of ops are built without a heap allocation per op.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <vector>

namespace pipesim::sim {

class DepList {
 public:
  using value_type = std::int32_t;
  using iterator = value_type*;
  using const_iterator = const value_type*;
  static constexpr std::uint32_t kInline = 3;

  DepList() = default;
  DepList(std::initializer_list<value_type> ids) { assign(ids.begin(), ids.end()); }
  DepList(const std::vector<value_type>& ids) { assign(ids.data(), ids.data() + ids.size()); }  // NOLINT
  DepList(const DepList& o) { assign(o.begin(), o.end()); }
  DepList(DepList&& o) noexcept { steal(o); }
  DepList& operator=(const DepList& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  DepList& operator=(DepList&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  DepList& operator=(const std::vector<value_type>& ids) {
    assign(ids.data(), ids.data() + ids.size());
    return *this;
  }
  ~DepList() { release(); }

  std::size_t size() const { return size_ & ~kHeapBit; }
  bool empty() const { return size() == 0; }
  value_type* data() { return on_heap() ? heap_data() : inline_; }
  const value_type* data() const { return on_heap() ? heap_data() : inline_; }
  iterator begin() { return data(); }
  iterator end() { return data() + size(); }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size(); }
  value_type& operator[](std::size_t i) { return data()[i]; }
  value_type operator[](std::size_t i) const { return data()[i]; }
  value_type at(std::size_t i) const {
    if (i >= size()) throw std::out_of_range("DepList::at");
    return data()[i];
  }
  value_type front() const { return data()[0]; }
  value_type back() const { return data()[size() - 1]; }

  void push_back(value_type id) {
    const std::size_t n = size();
    if (n == capacity()) grow(static_cast<std::uint32_t>(std::min<std::size_t>(2 * n, kHeapBit)));
    data()[n] = id;
    set_size(n + 1);
  }
  void reserve(std::size_t n) {
    if (n >= kHeapBit) throw std::length_error("DepList: more than 2^31 - 1 dependencies");
    if (n > capacity()) grow(static_cast<std::uint32_t>(n));
  }
  void clear() { set_size(0); }
  /// Removes [first, last) (the erase-remove idiom's second half).
  iterator erase(iterator first, iterator last) {
    iterator e = end();
    std::copy(last, e, first);
    set_size(size() - static_cast<std::size_t>(last - first));
    return first;
  }

  friend bool operator==(const DepList& a, const DepList& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const DepList& a, const std::vector<value_type>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  // The top bit of size_ says the ids live on the heap: in a block [capacity, ids...] whose address is kept
  // in the inline words (copied bytewise: they are not aligned for a pointer). DepList stays 16 bytes, so
  // an op is 96.
  static constexpr std::uint32_t kHeapBit = 0x80000000u;
  bool on_heap() const { return (size_ & kHeapBit) != 0; }
  value_type* block() const {
    value_type* b;
    std::memcpy(&b, inline_, sizeof b);
    return b;
  }
  value_type* heap_data() const { return block() + 1; }
  std::uint32_t capacity() const { return on_heap() ? static_cast<std::uint32_t>(block()[0]) : kInline; }
  void set_size(std::size_t n) {
    if (n >= kHeapBit) throw std::length_error("DepList: more than 2^31 - 1 dependencies");
    size_ = static_cast<std::uint32_t>(n) | (size_ & kHeapBit);
  }
  // Out of line, as grow(): GCC's bounds warnings misread the inline words when it is inlined.
  [[gnu::noinline]] void assign(const value_type* first, const value_type* last) {
    const auto n = static_cast<std::size_t>(last - first);
    set_size(0);
    reserve(n);
    if (n > 0) std::memmove(data(), first, n * sizeof(value_type));
    set_size(n);
  }
  // Out of line: the rare path.
  [[gnu::noinline]] void grow(std::uint32_t capacity) {
    if (capacity >= kHeapBit) throw std::length_error("DepList: more than 2^31 - 1 dependencies");
    auto* bigger = new value_type[std::size_t{capacity} + 1];
    bigger[0] = static_cast<value_type>(capacity);
    const std::size_t n = size();
    std::memcpy(bigger + 1, data(), n * sizeof(value_type));
    release();
    std::memcpy(inline_, &bigger, sizeof bigger);
    size_ = static_cast<std::uint32_t>(n) | kHeapBit;
  }
  void release() {
    if (on_heap()) delete[] block();
    size_ &= ~kHeapBit;
  }
  void steal(DepList& o) {
    size_ = o.size_;
    std::memcpy(inline_, o.inline_, sizeof inline_);
    o.size_ = 0;
  }

  std::uint32_t size_ = 0;
  value_type inline_[kInline] = {};
};

}  // namespace pipesim::sim
