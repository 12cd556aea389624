#include "workload/selective_ops.hpp"

#include <vector>

namespace pipesim::sim {

OpSelectiveRecompute every_other_linear(const ModelSpec& m, const TensorSizes& z, double tokens) {
  const auto h = static_cast<double>(m.hidden), q = static_cast<double>(m.heads * m.head_dim);
  const auto kv = static_cast<double>(m.kv_heads * m.head_dim), f = static_cast<double>(m.ffn_hidden);
  struct Linear {
    double output_elements;  // on this rank
    double flops_per_token;  // whole layer
  };
  std::vector<Linear> linears = {
      {z.query, 2 * h * q}, {z.key_value, 2 * h * kv}, {z.key_value, 2 * h * kv}, {z.residual, 2 * q * h}};
  if (!m.is_moe()) {
    if (m.mlp == MlpKind::kSwiGlu) linears.push_back({z.inner, 2 * h * f});  // gate
    linears.push_back({z.inner, 2 * h * f});                                 // up
    linears.push_back({z.residual, 2 * f * h});                              // down
  }
  OpSelectiveRecompute r;
  r.saved_bytes = 2 * z.query;  // the attention kernel's output
  for (std::size_t i = 0; i < linears.size(); ++i) {
    if (i % 2 == 0)
      r.saved_bytes += 2 * linears[i].output_elements;
    else
      r.recompute_flops += tokens * linears[i].flops_per_token;
  }
  return r;
}

}  // namespace pipesim::sim
