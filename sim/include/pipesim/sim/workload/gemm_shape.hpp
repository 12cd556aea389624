// The dense GEMMs of an op, as hints for a replay engine that runs them for real (C[m x n] = A[m x k] B[k x
// n], `count` times). The simulated time uses the op's FLOPs and GEMM size; these only say how they are
// shaped.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

namespace pipesim::sim {

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t count = 0;
  bool operator==(const GemmShape&) const = default;
};

/// An op's GEMM shapes, immutable and shared by every op that runs the same GEMMs (each microbatch and
/// replica of a chunk): copying one is a reference count, not an allocation.
class GemmList {
 public:
  GemmList() = default;
  GemmList(std::vector<GemmShape> shapes)  // NOLINT(google-explicit-constructor): a list is its shapes
      : shapes_(shapes.empty() ? nullptr
                               : std::make_shared<const std::vector<GemmShape>>(std::move(shapes))) {}
  GemmList(std::initializer_list<GemmShape> shapes) : GemmList(std::vector<GemmShape>(shapes)) {}
  const std::vector<GemmShape>& shapes() const { return shapes_ ? *shapes_ : none(); }
  std::size_t size() const { return shapes().size(); }
  bool empty() const { return shapes().empty(); }
  std::vector<GemmShape>::const_iterator begin() const { return shapes().begin(); }
  std::vector<GemmShape>::const_iterator end() const { return shapes().end(); }
  const GemmShape& operator[](std::size_t i) const { return shapes()[i]; }
  friend bool operator==(const GemmList& a, const GemmList& b) {
    return a.shapes_ == b.shapes_ || a.shapes() == b.shapes();  // shared lists compare by address first
  }

 private:
  static const std::vector<GemmShape>& none() {
    static const std::vector<GemmShape> empty;
    return empty;
  }
  std::shared_ptr<const std::vector<GemmShape>> shapes_;
};

/// Adds `count` GEMMs of `shape` to `into`, merging with an equal shape.
inline void add_gemms(std::vector<GemmShape>& into, GemmShape shape) {
  for (auto& g : into)
    if (g.m == shape.m && g.n == shape.n && g.k == shape.k) {
      g.count += shape.count;
      return;
    }
  if (shape.count > 0) into.push_back(shape);
}

/// The backward of forward GEMMs: the input gradient dX = dY B^T (m x k from m x n by n x k) and, when
/// `weights`, the weight gradient dW = A^T dY (k x n from k x m by m x n).
inline std::vector<GemmShape> backward_gemms(const std::vector<GemmShape>& forward, bool inputs,
                                             bool weights) {
  std::vector<GemmShape> out;
  for (const auto& g : forward) {
    if (inputs) add_gemms(out, {g.m, g.k, g.n, g.count});
    if (weights) add_gemms(out, {g.k, g.n, g.m, g.count});
  }
  return out;
}

/// FLOPs of the GEMMs: 2 m n k each.
inline double gemm_flops(const std::vector<GemmShape>& gemms) {
  double f = 0;
  for (const auto& g : gemms)
    f += 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) *
         static_cast<double>(g.count);
  return f;
}

}  // namespace pipesim::sim
