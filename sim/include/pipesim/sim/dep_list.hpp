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

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  value_type* data() { return on_heap() ? heap_ : inline_; }
  const value_type* data() const { return on_heap() ? heap_ : inline_; }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  value_type& operator[](std::size_t i) { return data()[i]; }
  value_type operator[](std::size_t i) const { return data()[i]; }
  value_type at(std::size_t i) const {
    if (i >= size_) throw std::out_of_range("DepList::at");
    return data()[i];
  }
  value_type front() const { return data()[0]; }
  value_type back() const { return data()[size_ - 1]; }

  void push_back(value_type id) {
    if (size_ == capacity_) grow(capacity_ * 2);
    data()[size_++] = id;
  }
  void reserve(std::size_t n) {
    if (n > capacity_) grow(static_cast<std::uint32_t>(n));
  }
  void clear() { size_ = 0; }
  /// Removes [first, last) (the erase-remove idiom's second half).
  iterator erase(iterator first, iterator last) {
    iterator e = end();
    std::copy(last, e, first);
    size_ -= static_cast<std::uint32_t>(last - first);
    return first;
  }

  friend bool operator==(const DepList& a, const DepList& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const DepList& a, const std::vector<value_type>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool on_heap() const { return capacity_ > kInline; }
  // Out of line, as grow(): GCC's bounds warnings misread the union when it is inlined.
  [[gnu::noinline]] void assign(const value_type* first, const value_type* last) {
    const auto n = static_cast<std::size_t>(last - first);
    size_ = 0;
    reserve(n);
    if (n > 0) std::memmove(data(), first, n * sizeof(value_type));
    size_ = static_cast<std::uint32_t>(n);
  }
  // Out of line: the rare path, and GCC's bounds warnings misread the union when it is inlined.
  [[gnu::noinline]] void grow(std::uint32_t capacity) {
    auto* bigger = new value_type[capacity];
    std::memcpy(bigger, data(), std::size_t{size_} * sizeof(value_type));
    release();
    heap_ = bigger;
    capacity_ = capacity;
  }
  void release() {
    if (on_heap()) delete[] heap_;
    capacity_ = kInline;
  }
  void steal(DepList& o) {
    size_ = o.size_;
    capacity_ = o.capacity_;
    if (o.on_heap())
      heap_ = o.heap_;
    else
      std::memcpy(inline_, o.inline_, sizeof inline_);
    o.size_ = 0;
    o.capacity_ = kInline;
  }

  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = kInline;
  union {
    value_type inline_[kInline] = {};
    value_type* heap_;
  };
};

}  // namespace pipesim::sim
