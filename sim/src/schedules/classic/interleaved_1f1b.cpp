// Interleaved 1F1B (Megatron-LM): v model chunks per rank; forward k runs chunk (k mod pv)/p of microbatch
// (k / pv) p + k mod p; warm-up (p-rank-1)*2 + (v-1)*p forwards, then F,B pairs, then the remaining B.
#include <algorithm>

#include <fmt/format.h>

#include "schedules/builtin.hpp"
#include "schedules/classic/classic.hpp"

#include "pipesim/sim/core/option.hpp"

namespace pipesim::sim::detail {

namespace {

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

std::string check(const ScheduleShape& s) {
  if (s.virtual_stages < 2) return ("needs " + spelled(Option{"virtual_stages"}) + " >= 2");
  if (s.microbatches % s.pp != 0)
    return fmt::format("needs microbatches divisible by pp ({} % {} != 0)", s.microbatches, s.pp);
  return "";
}

}  // namespace

ScheduleDescriptor describe_interleaved_1f1b() {
  ScheduleDescriptor d = classic_descriptor(
      "interleaved-1f1b", "Megatron-LM (Narayanan et al. 2021)",
      "v model chunks per rank assigned round-robin; bubble (p-1)/(v*m+p-1) for uniform chunks");
  d.constraints = {("v >= 2 model chunks per rank (" + spelled(Option{"virtual_stages"}) + ", default 2)"),
                   "microbatches divisible by pp"};
  d.check = check;
  d.order = interleaved_order;
  d.multi_chunk = true;
  d.default_virtual_stages = 2;
  d.planner.virtual_stages = {2, 4};
  // The warm-up forwards of a rank spread over its v chunks, one more in flight while the steady state turns.
  d.partitioner.activations_in_flight = [](const ScheduleShape& s, std::int32_t stage) {
    const std::int32_t rank = stage % s.pp, v = s.virtual_stages;
    return std::int64_t{std::min(s.microbatches, 2 * (s.pp - rank) + (v - 1) * s.pp) / v + 1};
  };
  d.partitioner.deferred_weight_grads = [](const ScheduleShape&, std::int32_t) { return std::int64_t{0}; };
  return d;
}

}  // namespace pipesim::sim::detail
