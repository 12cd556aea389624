#include "pipesim/sim/workload/profiled_workload.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "core/json_reader.hpp"
#include "pipesim/sim/core/error.hpp"

namespace pipesim::sim {

using detail::json;
using detail::JsonObject;

namespace {
// A measured layer of a terabyte, thirty thousand layers: sums over a whole model stay far inside int64.
constexpr std::int64_t kMaxLayerBytes = std::int64_t{1} << 40;
constexpr std::int64_t kMaxWorkloadLayers = kMaxModelLayers;
constexpr std::int64_t kMaxLayerKernels = 1 << 20;  ///< launches of one layer's pass: more is a typo
}  // namespace

Workload parse_workload(const std::string& text, const std::string& file, Recompute recompute) {
  json root = detail::parse_json_text(text, file);
  JsonObject r(root, file, "");
  Workload w;
  std::string fmt_name = r.string_or("format", "pipesim-workload");
  if (fmt_name != "pipesim-workload") r.fail("format", "expected \"pipesim-workload\"");
  if (r.integer_or("version", 1, 0, 1000) != 1) r.fail("version", "unsupported version; valid: 1");
  w.name = r.string_or("name", std::filesystem::path(file).stem().string());
  w.microbatch_size = r.integer_or("microbatch_size", 0, 0, 1 << 30);
  w.seq = r.integer_or("seq", 0, 0, 1 << 30);
  if (r.has("source")) r.string("source");  // where the times were measured (a trace, a benchmark)
  if (r.has("optimizer_ms")) w.optimizer_ns = duration_from_ms(r.number("optimizer_ms", 0, 1e7));
  // The GPU's idle time waiting for the CPU to launch a pass's kernels (an imported trace's): the pass lasts
  // that much longer than its kernels.
  w.optimizer_ns += duration_from_ms(r.number_or("optimizer_host_wait_ms", 0, 0, 1e7));
  const json& layers = r.raw("layers");
  if (!layers.is_array() || layers.empty()) r.fail("layers", "expected a non-empty array of layer entries");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    JsonObject e(layers[i], file, fmt::format("/layers/{}", i));
    LayerCost c;
    std::string role = e.string_or("role", "block");
    if (role == "embedding")
      c.role = LayerRole::kEmbedding;
    else if (role == "block")
      c.role = LayerRole::kBlock;
    else if (role == "head")
      c.role = LayerRole::kHead;
    else
      e.fail("role", fmt::format("unknown role '{}'; valid: embedding, block, head", role));
    double fwd = e.number("fwd_ms", 0, 1e7);
    bool has_bi = e.has("bwd_input_ms"), has_bw = e.has("bwd_weight_ms");
    double bwd = e.number_or("bwd_ms", -1, 0, 1e7);
    double bi = e.number_or("bwd_input_ms", -1, 0, 1e7);
    double bwt = e.number_or("bwd_weight_ms", -1, 0, 1e7);
    if (bwd < 0 && !(has_bi && has_bw))
      e.fail("bwd_ms", "missing; give bwd_ms or both bwd_input_ms and bwd_weight_ms");
    if (bwd < 0) bwd = bi + bwt;
    if (has_bi && !has_bw) bwt = bwd - bi;
    if (has_bw && !has_bi) bi = bwd - bwt;
    if (!has_bi && !has_bw) bi = bwd / 2, bwt = bwd - bi;
    if (bi < 0 || bwt < 0 || std::fabs(bi + bwt - bwd) > 1e-9 * std::max(1.0, bwd))
      e.fail("bwd_ms",
             fmt::format("bwd_input_ms + bwd_weight_ms ({}) must equal bwd_ms ({})", bi + bwt, bwd));
    // Where the profile measured the GPU's waits for the CPU (an imported trace), its times hold the CPU's
    // cost: no launch count bounds them below again (bound_by_dispatch).
    const bool measured_waits = e.has("fwd_host_wait_ms") || e.has("bwd_host_wait_ms");
    fwd += e.number_or("fwd_host_wait_ms", 0, 0, 1e7);
    if (const double wait = e.number_or("bwd_host_wait_ms", 0, 0, 1e7); wait > 0) {
      // The waits stretch both parts of the backward alike.
      bi = bwd > 0 ? bi * (bwd + wait) / bwd : wait / 2;
      bwd += wait;
    }
    c.fwd_ns = duration_from_ms(fwd);
    c.bwd_input_ns = duration_from_ms(bi);
    c.bwd_weight_ns = duration_from_ms(bwd) - c.bwd_input_ns;
    // Megatron recomputes transformer blocks only; embedding and head keep their activations.
    c.recompute_ns = (recompute == Recompute::kFull && c.role == LayerRole::kBlock) ? c.fwd_ns : 0;
    c.stored_activation_bytes = e.integer_or("activation_bytes", 0, 0, kMaxLayerBytes);
    c.param_bytes = e.integer_or("param_bytes", 0, 0, kMaxLayerBytes);
    c.params = c.param_bytes / 16;  // mixed-precision Adam holds 16 B per parameter
    c.trainable_params = c.params;
    c.output_bytes = e.integer_or("output_bytes", 0, 0, kMaxLayerBytes);
    // Launches, where the profile counted them: the CPU issuing them may take longer than the GPU's time.
    c.kernels = static_cast<std::int32_t>(e.integer_or("fwd_kernels", 0, 0, kMaxLayerKernels));
    if (e.has("bwd_kernels"))
      c.input_grad_extra_kernels =
          static_cast<std::int32_t>(e.integer("bwd_kernels", 0, kMaxLayerKernels)) - 2 * c.kernels;
    if (measured_waits) c.kernels = c.input_grad_extra_kernels = 0;
    double gflop = e.number_or("fwd_gflop", 0, 0, 1e12);
    c.fwd_flops = gflop * 1e9;
    c.bwd_input_flops = c.fwd_flops;
    c.bwd_weight_flops = c.fwd_flops;
    if (c.recompute_ns > 0 && c.output_bytes > 0 && c.output_bytes < c.stored_activation_bytes) {
      c.recompute_extra_bytes =
          c.stored_activation_bytes - c.output_bytes;  // re-materialized in the backward
      c.stored_activation_bytes = c.output_bytes;      // only the block input is kept
    }
    // Bytes its backward allocates beyond what it kept and frees by its end (a loss's logit gradients).
    c.recompute_extra_bytes += e.integer_or("backward_extra_bytes", 0, 0, kMaxLayerBytes);
    // Of param_bytes, the gradients its backward makes and the step frees (zero_grad(set_to_none=True)).
    c.step_grad_bytes = e.integer_or("step_grad_bytes", 0, 0, c.param_bytes);
    std::int64_t repeat = e.integer_or("repeat", 1, 1, kMaxWorkloadLayers);
    e.finish();
    if (static_cast<std::int64_t>(w.layers.size()) + repeat > kMaxWorkloadLayers)
      e.fail("repeat", fmt::format("the workload would have more than {} layers", kMaxWorkloadLayers));
    for (std::int64_t k = 0; k < repeat; ++k) w.layers.push_back(c);
  }
  r.finish();
  return w;
}

void bound_by_dispatch(Duration dispatch_ns, std::vector<LayerCost>& layers) {
  for (LayerCost& l : layers) {
    if (l.fwd_ns < 0 || l.kernels == 0) continue;
    const Duration issue = l.kernels * dispatch_ns;
    if (l.recompute_ns == l.fwd_ns) l.recompute_ns = std::max(l.recompute_ns, issue);
    l.fwd_ns = std::max(l.fwd_ns, issue);
    // The backward's launches: the forward's twice and the input gradient's own; a longer issue stretches
    // both parts of the measured backward alike.
    const Duration bwd = l.bwd_input_ns + l.bwd_weight_ns;
    const Duration bwd_issue = std::max(0, 2 * l.kernels + l.input_grad_extra_kernels) * dispatch_ns;
    if (bwd_issue > bwd && bwd > 0) {
      l.bwd_input_ns = static_cast<Duration>(std::llround(
          static_cast<double>(l.bwd_input_ns) * static_cast<double>(bwd_issue) / static_cast<double>(bwd)));
      l.bwd_weight_ns = bwd_issue - l.bwd_input_ns;
    }
  }
}

Workload load_workload(const std::string& path, Recompute recompute) {
  return parse_workload(detail::read_text_file(path), path, recompute);
}

}  // namespace pipesim::sim
