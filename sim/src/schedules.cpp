#include <algorithm>
#include <deque>

#include <fmt/format.h>

#include "offload_schedules.hpp"
#include "pipesim/sim/error.hpp"
#include "pipesim/sim/schedule.hpp"

namespace pipesim::sim {

namespace {

std::string needs_plain(const ScheduleShape& s) {
  if (s.virtual_stages != 1) return "uses one model chunk per rank; --virtual-stages must be 1";
  return "";
}

// GPipe: all forwards, then all backwards in microbatch order 0..m-1.
std::vector<Task> gpipe_order(const ScheduleShape& s, std::int32_t) {
  std::vector<Task> out;
  for (std::int32_t i = 0; i < s.microbatches; ++i) out.push_back({TaskKind::kForward, i, 0});
  for (std::int32_t i = 0; i < s.microbatches; ++i) out.push_back({TaskKind::kBackward, i, 0});
  return out;
}

// 1F1B (PyTorch Schedule1F1B order): min(m, p-rank) warm-up forwards, then B,F pairs, then the remaining B.
std::vector<Task> one_f_one_b_order(const ScheduleShape& s, std::int32_t rank) {
  std::vector<Task> out;
  const std::int32_t m = s.microbatches, warm = std::min(m, s.pp - rank);
  for (std::int32_t i = 0; i < warm; ++i) out.push_back({TaskKind::kForward, i, 0});
  for (std::int32_t i = 0, next = warm; i < m; ++i) {
    out.push_back({TaskKind::kBackward, i, 0});
    if (next < m) out.push_back({TaskKind::kForward, next++, 0});
  }
  return out;
}

// Interleaved 1F1B (Megatron-LM): v chunks per rank; forward k runs chunk (k mod pv)/p of microbatch
// (k / pv) p + k mod p; warm-up (p-rank-1)*2 + (v-1)*p forwards, then F,B pairs, then the remaining B.
std::vector<Task> interleaved_order(const ScheduleShape& s, std::int32_t rank) {
  const std::int32_t p = s.pp, v = s.virtual_stages, total = s.microbatches * v;
  auto fwd = [&](std::int32_t k) {
    return Task{TaskKind::kForward, (k / (p * v)) * p + k % p, (k % (p * v)) / p};
  };
  auto bwd = [&](std::int32_t k) {
    return Task{TaskKind::kBackward, (k / (p * v)) * p + k % p, v - 1 - (k % (p * v)) / p};
  };
  const std::int32_t warm = std::min((p - rank - 1) * 2 + (v - 1) * p, total);
  std::vector<Task> out;
  for (std::int32_t k = 0; k < warm; ++k) out.push_back(fwd(k));
  const std::int32_t steady = total - warm;
  for (std::int32_t j = 0; j < steady; ++j) {
    out.push_back(fwd(warm + j));
    out.push_back(bwd(j));
  }
  for (std::int32_t j = steady; j < total; ++j) out.push_back(bwd(j));
  return out;
}

// ZB-H1 (Zero Bubble PP): 1F1B with the backward split into B (input grad) and W (weight grad); rank r keeps
// up to r weight-gradient passes pending and runs them in its cool-down, which fills the 1F1B drain bubble:
// step = m(F+B+W) + (p-1)(F+B-W) for uniform stages, at the in-flight activation count of 1F1B.
std::vector<Task> zb_h1_order(const ScheduleShape& s, std::int32_t rank) {
  std::vector<Task> out;
  const std::int32_t m = s.microbatches, warm = std::min(m, s.pp - rank);
  for (std::int32_t i = 0; i < warm; ++i) out.push_back({TaskKind::kForward, i, 0});
  std::deque<std::int32_t> pending;
  for (std::int32_t i = 0, next = warm; i < m; ++i) {
    out.push_back({TaskKind::kBackwardInput, i, 0});
    pending.push_back(i);
    if (next < m) out.push_back({TaskKind::kForward, next++, 0});
    while (static_cast<std::int32_t>(pending.size()) > rank) {
      out.push_back({TaskKind::kBackwardWeight, pending.front(), 0});
      pending.pop_front();
    }
  }
  for (std::int32_t i : pending) out.push_back({TaskKind::kBackwardWeight, i, 0});
  return out;
}

std::vector<ScheduleInfo> make_registry() {
  std::vector<ScheduleInfo> r;
  ScheduleInfo gpipe;
  gpipe.name = "gpipe";
  gpipe.source = "GPipe (Huang et al. 2019)";
  gpipe.description =
      "all forwards, then all backwards (microbatch order 0..m-1); holds m microbatches of activations";
  gpipe.parameters = {{"microbatches", "m >= 1"}};
  gpipe.check = needs_plain;
  gpipe.order = gpipe_order;
  r.push_back(gpipe);

  ScheduleInfo one;
  one.name = "1f1b";
  one.source = "PipeDream-flush / Megatron-LM; PyTorch Schedule1F1B order";
  one.description =
      "warm-up min(m, p-rank) forwards, then one backward one forward, then cool-down; holds p-rank "
      "microbatches";
  one.parameters = {{"microbatches", "m >= 1"},
                    {"optimizer_offload", "--optimizer-offload: ZeRO-Offload style CPU Adam"}};
  one.check = needs_plain;
  one.order = one_f_one_b_order;
  r.push_back(one);

  ScheduleInfo inter;
  inter.name = "interleaved-1f1b";
  inter.source = "Megatron-LM (Narayanan et al. 2021)";
  inter.description =
      "v model chunks per rank assigned round-robin; bubble (p-1)/(v*m+p-1) for uniform chunks";
  inter.parameters = {{"virtual_stages", "v >= 2 chunks per rank (default 2)"},
                      {"microbatches", "m divisible by p"}};
  inter.interleaved = true;
  inter.check = [](const ScheduleShape& s) -> std::string {
    if (s.virtual_stages < 2) return "needs --virtual-stages >= 2";
    if (s.microbatches % s.pp != 0)
      return fmt::format("needs microbatches divisible by pp ({} % {} != 0)", s.microbatches, s.pp);
    return "";
  };
  inter.order = interleaved_order;
  r.push_back(inter);

  ScheduleInfo zb;
  zb.name = "zb-h1";
  zb.source = "Zero Bubble PP, ZB-H1 (Qi et al. 2024)";
  zb.description =
      "backward split into B (input grad) and W (weight grad); W deferred into the cool-down bubbles";
  zb.parameters = {{"microbatches", "m >= 1 (closed-form bubble for m >= p)"}};
  zb.splits_backward = true;
  zb.check = needs_plain;
  zb.order = zb_h1_order;
  r.push_back(zb);

  ScheduleInfo mobius;
  mobius.name = "mobius";
  mobius.source = "Mobius (Feng et al., ASPLOS 2023); layout of SPipe's reimplementation";
  mobius.description =
      "more stages than GPUs, stage weights prefetched from host memory, same GPU runs F and B of a stage, "
      "CPU optimizer at the end of the iteration";
  mobius.parameters = {
      {"virtual_stages", "stages per GPU (default 2)"},
      {"cross_mapping", "--cross-mapping: consecutive stages on GPUs under different PCIe switches"}};
  mobius.interleaved = true;
  mobius.check = [](const ScheduleShape&) { return std::string(); };
  mobius.build = detail::build_mobius;
  mobius.default_iterations = 2;
  mobius.default_microbatches_per_gpu = 2;
  r.push_back(mobius);
  ScheduleInfo spipe;
  spipe.name = "spipe";
  spipe.source = "SPipe (PACT 2025)";
  spipe.description =
      "decoupled pass assignment: forward and backward of a layer on different GPUs around a ring, F forward "
      "and "
      "B backward stages per GPU, checkpoints GPU to GPU, asynchronous per-stage CPU optimizer";
  spipe.parameters = {{"spipe_stages", "--spipe-stages F,B (default 2,6; blocks divisible by P F and P B)"},
                      {"microbatches", "M >= P (default 2P)"},
                      {"sync_checkpoints", "--spipe-sync-checkpoints: send checkpoints only when needed"},
                      {"overflow_prob", "--overflow-prob p: share of steps that overflow and roll back"}};
  spipe.check = [](const ScheduleShape& s) {
    return s.microbatches < s.pp ? fmt::format("needs microbatches >= pp ({} < {})", s.microbatches, s.pp)
                                 : std::string();
  };
  spipe.build = detail::build_spipe;
  spipe.default_iterations = 3;
  spipe.default_microbatches_per_gpu = 2;
  r.push_back(spipe);
  ScheduleInfo roundpipe;
  roundpipe.name = "roundpipe";
  roundpipe.source = "RoundPipe (arXiv 2604.27085)";
  roundpipe.description =
      "stateless GPU pool: forward / fused / backward stage jobs dispatched round-robin across iterations, "
      "weights streamed per job behind activation uploads, all inter-GPU data through host memory, CPU Adam "
      "one "
      "step stale";
  roundpipe.parameters = {{"microbatches", "default G + 1"},
                          {"roundpipe_sync", "--roundpipe-sync: wait for the optimizer (no stale weights)"},
                          {"partition", "automatic (RoundPipe's algorithm)"}};
  roundpipe.check = [](const ScheduleShape&) { return std::string(); };
  roundpipe.build = detail::build_roundpipe;
  roundpipe.default_iterations = 4;
  roundpipe.default_microbatches_per_gpu = 1;
  roundpipe.default_microbatches_extra = 1;
  r.push_back(roundpipe);
  return r;
}

}  // namespace

const std::vector<ScheduleInfo>& schedule_registry() {
  static const std::vector<ScheduleInfo> registry = make_registry();  // immutable after first use
  return registry;
}

const ScheduleInfo& find_schedule(const std::string& name) {
  std::string valid;
  for (const auto& s : schedule_registry()) {
    if (s.name == name) return s;
    valid += (valid.empty() ? "" : ", ") + s.name;
  }
  throw InputError("--schedule", "", fmt::format("unknown schedule '{}'; valid: {}, all", name, valid));
}

}  // namespace pipesim::sim
