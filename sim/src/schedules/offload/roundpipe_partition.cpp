#include "schedules/offload/roundpipe_partition.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/units.hpp"

namespace pipesim::sim {

namespace {

struct LayerTimes {
  std::vector<std::int64_t> fwd, bwd, fused, mem;
};

LayerTimes layer_times(const std::vector<LayerCost>& layers, const HardwareProfile& hw,
                       const std::string& dtype) {
  LayerTimes t;
  for (const LayerCost& l : layers) {
    const bool profiled = l.fwd_ns >= 0;
    const std::int64_t f = profiled
                               ? l.fwd_ns
                               : hw.op_ns(l.fwd_flops, l.gemm_gflop, l.kernels, dtype, l.fwd_mem_bytes,
                                          l.expert_fwd_flops, l.expert_gemm_gflop, l.expert_weight_bytes);
    const std::int64_t b =
        profiled ? l.bwd_input_ns + l.bwd_weight_ns
                 : hw.op_ns(l.bwd_input_flops + l.bwd_weight_flops, l.gemm_gflop, 2 * l.kernels + l.input_grad_extra_kernels, dtype,
                            l.bwd_mem_bytes, l.expert_bwd_input_flops + l.expert_bwd_weight_flops,
                            l.expert_gemm_gflop, 2 * l.expert_weight_bytes);
    const std::int64_t rc = l.role == LayerRole::kBlock ? f : 0;  // backward stages recompute blocks
    t.fwd.push_back(f);
    t.bwd.push_back(rc + b);
    t.fused.push_back(f + b);
    // The cap is on what prefetch doubles: a stage's weights and their gradients (activations of the running
    // microbatch are checked by the simulation itself).
    t.mem.push_back(2 * l.params + 2 * l.trainable_params);
  }
  return t;
}

}  // namespace

RoundPipePartition roundpipe_partition(const std::vector<LayerCost>& layers, const HardwareProfile& hw,
                                       const std::string& dtype, std::int32_t microbatches) {
  (void)microbatches;  // stage times scale by M alike; the choice does not depend on it
  const LayerTimes lt = layer_times(layers, hw, dtype);
  const auto n = static_cast<std::int32_t>(layers.size());
  if (n < 2) throw InputError(Option{"model"}, "", "roundpipe needs at least two layers to partition");
  const std::int64_t cap = static_cast<std::int64_t>(0.6 * static_cast<double>(hw.gpu.hbm_bytes)) / 2;
  for (std::int32_t l = 0; l < n; ++l)
    if (lt.mem[static_cast<std::size_t>(l)] > cap)
      throw InputError(Option{"model"}, "",
                       fmt::format("layer {} needs {:.2f} GiB of weights and gradients, above RoundPipe's "
                                   "per-stage cap of {:.2f} GiB "
                                   "(0.3 x GPU memory)",
                                   l, static_cast<double>(lt.mem[static_cast<std::size_t>(l)]) / (1 << 30),
                                   static_cast<double>(cap) / kBytesPerGiB));
  // The largest job any partition must hold: a layer's forward or backward, or the fused stage's last layer
  // (the LM head's forward, loss and backward), which no stage time can go below.
  std::int64_t max_layer = lt.fused.back();
  for (std::int32_t l = 0; l < n; ++l)
    max_layer =
        std::max({max_layer, lt.fwd[static_cast<std::size_t>(l)], lt.bwd[static_cast<std::size_t>(l)]});
  std::vector<std::int64_t> candidates = {max_layer};
  const auto limit = static_cast<std::int64_t>(1.1 * static_cast<double>(max_layer));
  for (std::int32_t a = 0; a < n; ++a) {
    std::int64_t sum = 0;
    for (std::int32_t b = a; b < n; ++b) {
      sum += lt.bwd[static_cast<std::size_t>(b)];
      if (sum > limit) break;
      if (sum >= max_layer) candidates.push_back(sum);
    }
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());

  RoundPipePartition best;
  best.cost_ns = std::numeric_limits<double>::infinity();
  std::size_t best_stages = 0;
  for (std::int64_t T : candidates) {
    RoundPipePartition p;
    std::int64_t longest = 0;
    // Fused stage from the end (at least one layer).
    std::int32_t fb = n;
    std::int64_t time = 0, mem = 0;
    while (fb > 0) {
      const auto l = static_cast<std::size_t>(fb - 1);
      if (fb < n && (time + lt.fused[l] > T || mem + lt.mem[l] > cap)) break;
      time += lt.fused[l];
      mem += lt.mem[l];
      --fb;
    }
    if (fb == 0) continue;  // nothing left for the forward and backward partitions
    longest = std::max(longest, time);
    p.backward.push_back({fb, n});
    // Forward stages over [0, fb), packed from the back.
    std::vector<std::pair<std::int32_t, std::int32_t>> fwd;
    for (std::int32_t e = fb; e > 0;) {
      std::int32_t b = e;
      time = mem = 0;
      while (b > 0) {
        const auto l = static_cast<std::size_t>(b - 1);
        if (b < e && (time + lt.fwd[l] > T || mem + lt.mem[l] > cap)) break;
        time += lt.fwd[l];
        mem += lt.mem[l];
        --b;
      }
      longest = std::max(longest, time);
      fwd.push_back({b, e});
      e = b;
    }
    std::reverse(fwd.begin(), fwd.end());
    p.forward = fwd;
    // Backward stages over [0, fb), packed from the front; they run from the highest layers down.
    std::vector<std::pair<std::int32_t, std::int32_t>> bwd;
    for (std::int32_t b = 0; b < fb;) {
      std::int32_t e = b;
      time = mem = 0;
      while (e < fb) {
        const auto l = static_cast<std::size_t>(e);
        if (e > b && (time + lt.bwd[l] > T || mem + lt.mem[l] > cap)) break;
        time += lt.bwd[l];
        mem += lt.mem[l];
        ++e;
      }
      longest = std::max(longest, time);
      bwd.push_back({b, e});
      b = e;
    }
    p.backward.insert(p.backward.end(), bwd.rbegin(), bwd.rend());
    const std::size_t stages = p.forward.size() + p.backward.size();
    p.stage_time_ns = longest;
    p.cost_ns = static_cast<double>(std::max<std::size_t>(stages, static_cast<std::size_t>(hw.node.gpus))) *
                static_cast<double>(longest);
    if (p.cost_ns < best.cost_ns || (p.cost_ns == best.cost_ns && stages < best_stages)) {
      best = p;
      best_stages = stages;
    }
  }
  if (best.forward.empty())
    throw InputError(Option{"model"}, "", "roundpipe needs at least two layers to partition");
  return best;
}

RoundPipePartition given_roundpipe_partition(const std::vector<LayerCost>& layers, const HardwareProfile& hw,
                                             const std::string& dtype,
                                             const std::vector<std::int32_t>& forward,
                                             const std::vector<std::int32_t>& backward) {
  const auto n = static_cast<std::int32_t>(layers.size());
  auto bad = [&](const std::string& why) {
    throw InputError(
        Option{"partition"}, "",
        fmt::format("{}; roundpipe takes layer counts F1,F2,.../B1,B2,... (the fused stage first) "
                    "covering the model's {} layers (embedding and head included)",
                    why, n));
  };
  auto sum = [](const std::vector<std::int32_t>& v, std::size_t from) {
    std::int64_t t = 0;
    for (std::size_t i = from; i < v.size(); ++i) t += v[i];
    return t;
  };
  if (forward.empty() || backward.empty()) bad("needs a forward and a backward list");
  for (auto c : forward)
    if (c < 1) bad("every stage needs at least one layer");
  for (auto c : backward)
    if (c < 1) bad("every stage needs at least one layer");
  const std::int64_t below_fused = n - std::int64_t{backward.front()};
  if (below_fused < 1)
    bad(fmt::format("the fused stage's {} layers leave none for the others", backward.front()));
  if (sum(forward, 0) != below_fused)
    bad(fmt::format("the forward stages hold {} layers; the fused stage leaves {}", sum(forward, 0),
                    below_fused));
  if (sum(backward, 1) != below_fused)
    bad(fmt::format("the backward stages after the fused one hold {} layers; {} are left", sum(backward, 1),
                    below_fused));
  const LayerTimes lt = layer_times(layers, hw, dtype);
  RoundPipePartition p;
  auto longest = [&](const std::vector<std::int64_t>& t, std::int32_t b, std::int32_t e) {
    std::int64_t total = 0;
    for (std::int32_t l = b; l < e; ++l) total += t[static_cast<std::size_t>(l)];
    p.stage_time_ns = std::max(p.stage_time_ns, total);
  };
  for (std::int32_t at = 0; auto c : forward) {
    p.forward.push_back({at, at + c});
    longest(lt.fwd, at, at + c);
    at += c;
  }
  const auto fb = static_cast<std::int32_t>(below_fused);
  p.backward.push_back({fb, n});
  longest(lt.fused, fb, n);
  for (std::int32_t top = fb, k = 1; k < static_cast<std::int32_t>(backward.size()); ++k) {
    const std::int32_t c = backward[static_cast<std::size_t>(k)];
    p.backward.push_back({top - c, top});
    longest(lt.bwd, top - c, top);
    top -= c;
  }
  p.cost_ns = static_cast<double>(std::max<std::size_t>(p.forward.size() + p.backward.size(),
                                                        static_cast<std::size_t>(hw.node.gpus))) *
              static_cast<double>(p.stage_time_ns);
  return p;
}

}  // namespace pipesim::sim
