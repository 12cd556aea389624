#include "partition_command.hpp"

#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "pipesim/planner/partition.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/core/units.hpp"

namespace pipesim::cli {

namespace {

nlohmann::ordered_json describe(const planner::PartitionResult& r) {
  nlohmann::ordered_json j;
  j["partition"] = r.blocks;
  std::vector<double> t;
  for (auto ns : r.stage_ns) t.push_back(static_cast<double>(ns) / 1e9);
  j["stage_time_s"] = t;
  j["stage_mem_bytes"] = r.stage_mem_bytes;
  j["bottleneck_s"] = static_cast<double>(r.bottleneck_ns) / 1e9;
  j["fits_memory"] = r.feasible;
  return j;
}

/// A schedule with separate forward and backward partitions of its own (RoundPipe's algorithm).
int print_own_partition(const std::string& name, const sim::OwnPartition& p, const std::string& format) {
  auto ranges = [](const auto& v) {
    auto a = nlohmann::ordered_json::array();
    for (auto [b, e] : v) a.push_back({b, e});
    return a;
  };
  if (format == "json") {
    nlohmann::ordered_json j;
    j["schedule"] = name;
    j["forward_layer_ranges"] = ranges(p.forward);
    j["backward_layer_ranges"] = ranges(p.backward);
    j["stage_time_target_s"] = static_cast<double>(p.stage_time_target_ns) / 1e9;
    std::cout << pipesim::sim::json_text(j, 2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{}: {} forward stages {}\n", name, p.forward.size(), fmt::join(p.forward, " "));
  std::cout << fmt::format("{}{} backward stages {}{}\n", std::string(name.size() + 2, ' '),
                           p.backward.size(), p.backward_note.empty() ? "" : p.backward_note + " ",
                           fmt::join(p.backward, " "));
  std::cout << fmt::format("stage time target {:.3f} ms per microbatch\n",
                           static_cast<double>(p.stage_time_target_ns) / 1e6);
  return 0;
}

}  // namespace

int run_partition(const PartitionOptions& o) {
  if (!(o.max_mem_fraction > 0 && o.max_mem_fraction <= 1))
    throw sim::InputError("--max-mem-fraction", "", "valid: 0 < F <= 1");
  const auto& schedule = sim::find_schedule(o.schedule);
  sim::ScheduleInput in = sim::make_schedule_input(o.job, schedule);
  if (schedule.partitioner.rule == sim::PartitionRule::kSeparateForwardBackward)
    return print_own_partition(schedule.name, schedule.partitioner.own_partition(in), o.format);
  planner::PartitionProblem prob = planner::make_partition_problem(in, schedule, o.max_mem_fraction);
  planner::PartitionResult best = planner::optimal_partition(prob);
  if (best.blocks.empty())
    throw sim::InputError(
        "--max-mem-fraction", "",
        fmt::format("no partition into {} stages fits {:.0f}% of GPU memory; add stages, recompute or "
                    "memory",
                    prob.stages, 100 * o.max_mem_fraction));
  std::int32_t blocks = 0;
  for (bool b : prob.is_block) blocks += b ? 1 : 0;
  planner::PartitionResult uniform =
      planner::evaluate_partition(prob, sim::balanced_partition(blocks, prob.stages));
  planner::PartitionResult params = planner::evaluate_partition(prob, planner::parameters_partition(prob));
  const double gain_uniform =
      static_cast<double>(uniform.bottleneck_ns) / static_cast<double>(best.bottleneck_ns);
  const double gain_params =
      static_cast<double>(params.bottleneck_ns) / static_cast<double>(best.bottleneck_ns);
  // A framework that places blocks by its own rule (nanotron) runs that split, whatever is optimal.
  std::optional<planner::PartitionResult> own;
  if (in.partition_by_framework) own = planner::evaluate_partition(prob, in.partition);
  const double gain_own =
      own ? static_cast<double>(own->bottleneck_ns) / static_cast<double>(best.bottleneck_ns) : 1.0;
  if (o.format == "json") {
    nlohmann::ordered_json j = describe(best);
    j["schedule"] = schedule.name;
    j["model"] = in.model_name;
    j["framework"] = in.framework;
    j["stages"] = prob.stages;
    j["uniform"] = describe(uniform);
    j["deepspeed_parameters"] = describe(params);
    j["gain_over_uniform"] = gain_uniform;
    j["gain_over_parameters"] = gain_params;
    if (own) {
      j["framework_split"] = describe(*own);
      j["gain_over_framework_split"] = gain_own;
    }
    std::cout << pipesim::sim::json_text(j, 2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{} on {}: {} stages ({}), tp {}, microbatch {} x seq {}, framework {}\n",
                           in.model_name, in.hw.name, prob.stages, schedule.name, in.tp,
                           o.job.microbatch_size > 0 ? o.job.microbatch_size : 1.0, in.seq, in.framework);
  std::cout << fmt::format("optimal partition --partition {}\n", fmt::join(best.blocks, ","));
  std::cout << fmt::format("{:>5} {:>7} {:>9} {:>14} {:>10}\n", "stage", "blocks", "layers", "time/mb (ms)",
                           "mem GiB");
  for (std::size_t k = 0; k < best.blocks.size(); ++k)
    std::cout << fmt::format("{:>5} {:>7} {:>9} {:>14.3f} {:>10.2f}\n", k, best.blocks[k],
                             fmt::format("{}-{}", best.ranges[k].first, best.ranges[k].second - 1),
                             static_cast<double>(best.stage_ns[k]) / 1e6,
                             static_cast<double>(best.stage_mem_bytes[k]) / pipesim::sim::kBytesPerGiB);
  std::cout << fmt::format(
      "bottleneck {:.3f} ms; uniform split {:.3f} ms ({:.2f}x slower{}); DeepSpeed parameters "
      "{:.3f} ms ({:.2f}x slower{})\n",
      static_cast<double>(best.bottleneck_ns) / 1e6, static_cast<double>(uniform.bottleneck_ns) / 1e6,
      gain_uniform, uniform.feasible ? "" : ", exceeds memory",
      static_cast<double>(params.bottleneck_ns) / 1e6, gain_params,
      params.feasible ? "" : ", exceeds memory");
  if (own)
    std::cout << fmt::format("{} runs its own split --partition {}: {:.3f} ms ({:.2f}x slower{})\n",
                             in.framework, fmt::join(own->blocks, ","),
                             static_cast<double>(own->bottleneck_ns) / 1e6, gain_own,
                             own->feasible ? "" : ", exceeds memory");
  return 0;
}

}  // namespace pipesim::cli
