// Splits [0, n) into `threads` contiguous blocks aligned to `align` elements and runs fn(begin, end) on each,
// the calling thread taking the first block. Used by the CPU kernels so each thread streams its own memory.
#pragma once

#include <cstddef>
#include <thread>
#include <vector>

namespace pipesim::calibrate::detail {

template <typename Fn>
void parallel_for(std::size_t n, int threads, std::size_t align, Fn&& fn) {
  if (threads <= 1 || n < align * 2) {
    fn(std::size_t{0}, n);
    return;
  }
  const auto t = static_cast<std::size_t>(threads);
  std::size_t block = (n + t - 1) / t;
  block = (block + align - 1) / align * align;
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  for (std::size_t i = 1; i < t; ++i) {
    std::size_t b = i * block, e = std::min(n, b + block);
    if (b >= e) break;
    pool.emplace_back([&fn, b, e] { fn(b, e); });
  }
  fn(std::size_t{0}, std::min(n, block));
  for (auto& th : pool) th.join();
}

}  // namespace pipesim::calibrate::detail
