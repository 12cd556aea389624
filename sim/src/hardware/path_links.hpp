// The links a transfer crosses, kept inline: the engine looks a path up for every transfer it starts and the
// flow network keeps one per flow in flight, and a path crosses at most six links (PCIe lane, switch uplink
// and root complex, each way).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <stdexcept>

namespace pipesim::sim {

using LinkId = std::int32_t;

class PathLinks {
 public:
  static constexpr std::size_t kCapacity = 8;
  PathLinks() = default;
  PathLinks(std::initializer_list<LinkId> ids) {
    for (LinkId l : ids) push_back(l);
  }
  explicit PathLinks(std::span<const LinkId> ids) {
    for (LinkId l : ids) push_back(l);
  }
  void push_back(LinkId l) {
    if (size_ == kCapacity) throw std::logic_error("a path of more than 8 links");
    ids_[size_++] = l;
  }
  LinkId operator[](std::size_t i) const { return ids_[i]; }
  const LinkId* data() const { return ids_.data(); }
  const LinkId* begin() const { return ids_.data(); }
  const LinkId* end() const { return ids_.data() + size_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  std::array<LinkId, kCapacity> ids_{};
  std::uint8_t size_ = 0;
};

}  // namespace pipesim::sim
