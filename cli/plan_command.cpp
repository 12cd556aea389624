#include "plan_command.hpp"

#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/core/output_file.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/workload/profiled_workload.hpp"

namespace pipesim::cli {

namespace {

std::string gib(std::int64_t b) {
  return fmt::format("{:.1f}", static_cast<double>(b) / (1024.0 * 1024 * 1024));
}

}  // namespace

nlohmann::ordered_json config_json(const planner::Candidate& c) {
  return {{"schedule", c.schedule},
          {"framework", pipesim::sim::framework_name(c.job)},
          {"pp", c.job.pp},
          {"tp", c.job.tp},
          {"dp", c.job.dp},
          {"cp", c.job.cp},
          {"microbatch_size", static_cast<std::int64_t>(c.job.microbatch_size)},
          {"microbatches", c.job.microbatches},
          {"virtual_stages", std::max(1, c.job.virtual_stages)},
          {"recompute", c.job.recompute},
          {"optimizer_offload", c.job.optimizer_offload},
          {"zero", std::max(0, c.job.zero)},
          {"ep", c.job.ep},
          {"fsdp", c.job.fsdp},
          {"partition", c.job.partition},
          {"lower_bound_s", static_cast<double>(c.lower_bound_ns) / 1e9},
          {"usd_per_million_tokens", c.usd_per_million_tokens}};
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

nlohmann::ordered_json candidate_json(const planner::Candidate& c) {
  auto j =
      nlohmann::ordered_json::parse(sim::metrics_to_json(planner::candidate_plan(c), c.metrics, 0.0, -1));
  j["config"] = config_json(c);
  return j;
}

int run_plan(const PlanOptions& o) {
  planner::SearchOptions s = o.search;
  if (!o.schedules.empty()) s.schedules = split_commas(o.schedules);
  const bool tty = isatty(STDERR_FILENO) != 0;
  planner::SearchResult r = planner::search(s, tty ? &std::cerr : nullptr);
  if (r.ranked.empty())
    throw sim::InputError("--gpus", "",
                          fmt::format("no configuration fits ({} enumerated, {} over memory); try more GPUs, "
                                      "--max-mem-fraction, or a smaller global batch",
                                      r.enumerated, r.pruned_memory));
  const planner::Candidate& best = r.ranked.front();
  if (!o.out.empty()) {
    sim::Plan plan = planner::candidate_plan(best);
    plan.meta.note = "pipesim plan winner: " + best.key();
    sim::write_output_file(o.out, sim::plan_to_json(plan));
  }
  if (o.format == "json") {
    std::cout << "[";
    for (std::size_t i = 0; i < r.ranked.size(); ++i) {
      std::cout << (i ? ",\n" : "\n") << pipesim::sim::json_text(candidate_json(r.ranked[i]), 2);
    }
    std::cout << "\n]\n";
    return 0;
  }
  const auto& m0 = best.metrics;
  // A profiled workload goes by its own name (the model option keeps its default beside it).
  const std::string what =
      best.job.workload.empty()
          ? best.job.model
          : pipesim::sim::load_workload(best.job.workload, pipesim::sim::Recompute::kNone).name;
  std::cout << fmt::format("{} on {} x {}: global batch {}, seq {}; objective {}; framework {}\n", what,
                           s.gpus, s.base.hw, s.global_batch,
                           s.base.seq > 0 ? s.base.seq : pipesim::sim::kDefaultSequenceLength, s.objective,
                           pipesim::sim::framework_name(best.job));
  std::cout << fmt::format(
      "searched {} configurations: {} cannot fit memory, {} invalid for their schedule, {} cut by "
      "the lower bound, {} simulated ({} of them out of memory)\n",
      r.enumerated, r.pruned_memory, r.failed, r.pruned_bound, r.simulated, r.oom);
  if (r.failed > 0) std::cerr << fmt::format("plan: the first invalid configuration: {}\n", r.first_invalid);
  std::cout << fmt::format(
      "{:>4} {:<17} {:>10} {:>3} {:>5} {:>2} {:>9} {:<15} {:>9} {:>10} {:>6} {:>8} {:>8}\n", "rank",
      "schedule", "pp/tp/dp", "b", "M", "v", "recompute", "data parallel", "step (s)", "tokens/s", "MFU %",
      "GPU GiB", "$/Mtok");
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const auto& c = r.ranked[i];
    const auto& m = c.metrics;
    std::cout << fmt::format(
        "{:>4} {:<17} {:>10} {:>3} {:>5} {:>2} {:>9} {:<15} {:>9.4f} {:>10.0f} {:>6.1f} {:>8} {:>8.3f}\n",
        i + 1, c.schedule, fmt::format("{}/{}/{}", c.job.pp, c.job.tp, c.job.dp),
        static_cast<std::int64_t>(c.job.microbatch_size), c.job.microbatches,
        std::max(1, c.job.virtual_stages), c.job.recompute,
        (c.job.dp * c.job.cp > 1 ? planner::data_parallel_mode(c.job) : "-") +
            (c.job.optimizer_offload ? "+offload" : "") +
            (c.job.ep > 1 ? fmt::format(" ep{}", c.job.ep) : "") +
            (c.job.cp > 1 ? fmt::format(" cp{}", c.job.cp) : ""),
        m.step_time_s, m.tokens_per_s, 100 * m.mfu, gib(m.peak_gpu_mem_bytes), c.usd_per_million_tokens);
  }
  // Why the winner wins: its slowest stage, its bubble, and its memory headroom.
  std::size_t slowest = 0;
  for (std::size_t g = 1; g < m0.gpus.size(); ++g)
    if (m0.gpus[g].busy_s > m0.gpus[slowest].busy_s) slowest = g;
  const double per_iteration = 1.0 / std::max(1, m0.iterations);
  const std::int64_t best_plan_capacity = m0.gpu_mem_capacity_bytes;
  std::cout << fmt::format(
      "winner: {}; bottleneck stage {} ({} busy {:.3f} s of {:.3f} s), bubble {:.1f}% (warm-up {:.1f}, intra "
      "{:.1f}, "
      "drain {:.1f}), peak GPU memory {} GiB ({} GiB headroom under the {:.0f}% limit)\n",
      best.key(), slowest, m0.gpus.empty() ? "" : m0.gpus[slowest].device,
      m0.gpus.empty() ? 0.0 : m0.gpus[slowest].busy_s * per_iteration, m0.step_time_s,
      100 * m0.bubble_fraction, 100 * m0.bubble_warmup_fraction, 100 * m0.bubble_intra_fraction,
      100 * m0.bubble_drain_fraction, gib(m0.peak_gpu_mem_bytes),
      gib(static_cast<std::int64_t>(s.max_mem_fraction * static_cast<double>(best_plan_capacity)) -
          m0.peak_gpu_mem_bytes),
      100 * s.max_mem_fraction);
  if (!r.why_sharded.empty()) std::cout << "why sharded: " << r.why_sharded << "\n";
  if (!r.why_context_parallel.empty())
    std::cout << "why context parallel: " << r.why_context_parallel << "\n";
  if (r.ranked.size() > 1)
    std::cout << fmt::format("runner-up is {:.1f}% slower: {}\n",
                             100 * (r.ranked[1].metrics.step_time_s / m0.step_time_s - 1), r.ranked[1].key());
  if (!o.out.empty())
    std::cout << fmt::format("wrote the winner's plan to {} (run it with: pipesim simulate --plan {})\n",
                             o.out, o.out);
  return 0;
}

}  // namespace pipesim::cli
