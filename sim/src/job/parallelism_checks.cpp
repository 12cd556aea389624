#include "job/parallelism_checks.hpp"

#include <string>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/option.hpp"
#include "pipesim/sim/job/option_parsing.hpp"

namespace pipesim::sim {

namespace {

[[noreturn]] void bad(Option option, const std::string& msg) {
  throw InputError(option, "", msg);
}

}  // namespace

void check_expert_parallelism(const JobOptions& j, const ModelSpec& m, const ScheduleDescriptor& schedule) {
  if (j.ep < 1 || j.ep > (1 << 20)) bad(Option{"ep"}, fmt::format("{}; valid: 1 .. 1048576", j.ep));
  if (!(j.moe_imbalance >= 1) || j.moe_imbalance > j.ep)
    bad(Option{"moe_imbalance"},
        fmt::format("{}; valid: 1 (balanced) .. ep = {} (all tokens on one rank)", j.moe_imbalance, j.ep));
  if (j.ep == 1) return;
  if (!m.is_moe())
    bad(Option{"ep"}, fmt::format("{} is a dense model; expert parallelism needs experts", m.name));
  if (m.num_experts % j.ep != 0)
    bad(Option{"ep"}, fmt::format("{} experts are not divisible by ep = {}", m.num_experts, j.ep));
  if (j.dp % j.ep != 0)
    bad(Option{"ep"},
        fmt::format("experts are split over data-parallel ranks: ep = {} must divide dp = {}", j.ep, j.dp));
  if (schedule.kind != ScheduleKind::kOrderBased)
    bad(Option{"ep"},
        fmt::format("{} runs one pipeline without data parallelism; expert parallelism runs with the "
                    "order-based schedules",
                    schedule.name));
}

// Context parallelism splits each sequence of a model's attention layers: it needs the model's costs, a
// sequence of 2 cp balanced chunks, flash-attention kernels (what ring and all-gather attention are built
// on) and an order-based schedule; expert parallelism, HSDP and offload are not modelled beside it.
void check_context_parallelism(const JobOptions& j, std::int64_t seq, const ScheduleDescriptor& schedule) {
  if (j.cp < 1 || j.cp > 1024) bad(Option{"cp"}, fmt::format("{}; valid: 1 .. 1024", j.cp));
  parse_cp_attention(j.cp_attention);
  if (j.cp == 1) return;
  auto refuse = [&](const std::string& why) { bad(Option{"cp"}, why); };
  if (!j.workload.empty())
    refuse(("applies to " + spelled(Option{"model"}) + "; a profiled workload holds measured per-GPU times"));
  if (seq % (2 * j.cp) != 0)
    refuse(
        fmt::format("the sequence ({}) is split into 2 x cp = {} chunks for causal balance and must be a "
                    "multiple of it",
                    seq, 2 * j.cp));
  if (*j.attention != "flash")
    refuse(("context-parallel attention runs on flash attention; valid: " + spelled(Option{"attention"}) +
            " flash"));
  if (schedule.kind != ScheduleKind::kOrderBased)
    refuse(
        fmt::format("{} places one pipeline its own way; context parallelism runs with the order-based "
                    "schedules (see pipesim schedules)",
                    schedule.name));
  if (j.ep != 1)
    refuse(("expert parallelism beside context parallelism is not modelled; valid: " + spelled(Option{"ep"}) +
            " 1"));
  if (j.fsdp == "hybrid")
    refuse(("HSDP beside context parallelism is not modelled; valid: " + spelled(Option{"fsdp"}) + " full"));
  if (j.offload != "none" || j.optimizer_offload)
    refuse(("offload beside context parallelism is not modelled; valid: " + spelled(Option{"offload"}) +
            " none"));
}

}  // namespace pipesim::sim
