#include "buy_command.hpp"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/core/units.hpp"
#include "plan_command.hpp"

namespace pipesim::cli {

namespace {

std::vector<std::int32_t> parse_gpu_counts(const std::string& text) {
  std::vector<std::int32_t> out;
  for (const std::string& item : split_commas(text)) {
    std::size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || n < 1 || n > (1 << 20))
      throw sim::InputError("--gpus", "", fmt::format("'{}' is not a GPU count; valid: 1 .. 1048576", item));
    out.push_back(static_cast<std::int32_t>(n));
  }
  return out;
}

std::map<std::string, double> parse_prices(const std::string& text) {
  std::map<std::string, double> out;
  for (const std::string& item : split_commas(text)) {
    const auto eq = item.find('=');
    double usd = 0;
    std::size_t used = 0;
    if (eq != std::string::npos) {
      try {
        usd = std::stod(item.substr(eq + 1), &used);
      } catch (const std::exception&) {
        used = 0;
      }
    }
    if (eq == std::string::npos || eq == 0 || used == 0 || used != item.size() - eq - 1)
      throw sim::InputError(
          "--gpu-hour-usd", "",
          fmt::format("'{}'; expected NAME=PRICE[,NAME=PRICE...], e.g. h100-sxm-8x=2.5", item));
    out[item.substr(0, eq)] = usd;
  }
  return out;
}

std::string configuration(const planner::Candidate& c) {
  std::string text = fmt::format("{} pp{} tp{} dp{} b{} m{}", c.schedule, c.job.pp, c.job.tp, c.job.dp,
                                 static_cast<std::int64_t>(c.job.microbatch_size), c.job.microbatches);
  if (c.job.virtual_stages > 1) text += fmt::format(" v{}", c.job.virtual_stages);
  if (c.job.cp > 1) text += fmt::format(" cp{}", c.job.cp);
  if (c.job.recompute != "none") text += fmt::format(" {}", c.job.recompute);
  if (c.job.dp * c.job.cp > 1 && planner::data_parallel_mode(c.job) != "ddp")
    text +=
        fmt::format(" {}{}", planner::data_parallel_mode(c.job), c.job.optimizer_offload ? "+offload" : "");
  return text;
}

nlohmann::ordered_json quote_json(const planner::ClusterQuote& q) {
  nlohmann::ordered_json j{{"hw", q.hw}, {"gpus", q.gpus}};
  if (!q.skipped.empty()) {
    j["skipped"] = q.skipped;
    return j;
  }
  if (!q.no_fit.empty()) {
    j["no_fit"] = q.no_fit;
    return j;
  }
  j["steps"] = q.steps;
  j["time_to_train_s"] = q.time_to_train_s;
  j["time_to_train_days"] = q.time_to_train_s / 86400.0;
  j["gpu_hours"] = q.gpu_hours;
  j["usd_per_gpu_hour"] = q.usd_per_gpu_hour;
  j["usd"] = q.usd;
  if (q.energy_kwh > 0)
    j["energy_kwh"] = q.energy_kwh;
  else
    j["energy_kwh"] = nullptr;  // the profile has no board power figure
  j["headroom_bytes"] = q.headroom_bytes;
  nlohmann::ordered_json losses = nlohmann::ordered_json::object();
  for (const auto& l : q.losses) losses[l.key] = l.share;
  j["losses"] = std::move(losses);
  j["limiter"] = q.limiter;
  j["microbatch_held_by_memory"] = q.microbatch_held_by_memory;
  j["meets_constraints"] = q.meets_constraints;
  j["pareto"] = q.pareto;
  j["plan"] = candidate_json(q.best);
  return j;
}

/// The two largest losses, e.g. "kernels below peak 26%, exposed TP communication 17%".
std::string largest_losses(const planner::ClusterQuote& q) {
  std::string out;
  for (std::size_t i = 0; i < std::min<std::size_t>(2, q.losses.size()); ++i)
    out += fmt::format("{}{} {:.0f}%", i ? ", " : "", q.losses[i].what, 100 * q.losses[i].share);
  return out;
}

}  // namespace

int run_buy(BuyCommandOptions o) {
  o.buy.hardware = split_commas(o.hardware);
  o.buy.gpu_counts = parse_gpu_counts(o.gpu_counts);
  o.buy.gpu_hour_usd = parse_prices(o.gpu_hour_usd);
  o.buy.search.schedules = o.schedules.empty() ? std::vector<std::string>{} : split_commas(o.schedules);
  const bool tty = isatty(STDERR_FILENO) != 0;
  const planner::BuyResult r = planner::buy(o.buy, tty ? &std::cerr : nullptr);
  const planner::BuyOptions& b = o.buy;
  if (o.format == "json") {
    nlohmann::ordered_json j{
        {"model", b.search.base.model},
        {"framework", pipesim::sim::framework_name(pipesim::sim::with_framework(b.search.base))},
        {"tokens_per_step", r.tokens_per_step},
        {"steps", r.steps},
        {"max_usd", b.max_usd},
        {"deadline_days", b.deadline_days},
        {"clusters", nlohmann::ordered_json::array()}};
    for (const auto& q : r.clusters) j["clusters"].push_back(quote_json(q));
    std::cout << sim::json_text(j, 1) << "\n";
    return 0;
  }
  std::cout << fmt::format("{}: {} steps of {} tokens (global batch {} x seq {}){}; framework {}\n",
                           b.search.base.model, r.steps, r.tokens_per_step, b.search.global_batch,
                           r.tokens_per_step / b.search.global_batch,
                           b.tokens > 0 ? fmt::format(" = {:.4g} tokens", b.tokens) : "",
                           pipesim::sim::framework_name(pipesim::sim::with_framework(b.search.base)));
  std::cout << fmt::format("  {:<18} {:>5}  {:<46} {:>8} {:>10} {:>5} {:>8} {:>11} {:>11} {:>7} {:>8}  {}\n",
                           "cluster", "GPUs", "best configuration", "step (s)", "tokens/s", "MFU%", "days",
                           "GPU-hours", "$", "MWh", "free GiB", "loses most to (share of GPU time)");
  int meeting = 0;
  for (const auto& q : r.clusters) {
    if (!q.answered()) {
      std::cout << fmt::format("  {:<18} {:>5}  {}{}\n", q.hw, q.gpus, q.skipped.empty() ? "" : "skipped: ",
                               q.skipped.empty() ? q.no_fit : q.skipped);
      continue;
    }
    meeting += q.meets_constraints ? 1 : 0;
    const auto& m = q.best.metrics;
    std::cout << fmt::format(
        "{} {:<18} {:>5}  {:<46} {:>8.3f} {:>10.0f} {:>5.1f} {:>8.2f} {:>11.0f} {:>11} {:>7} {:>8.1f}  "
        "{}{}\n",
        q.pareto ? '*' : ' ', q.hw, q.gpus, configuration(q.best), m.step_time_s, m.tokens_per_s, 100 * m.mfu,
        q.time_to_train_s / 86400.0, q.gpu_hours,
        q.usd_per_gpu_hour > 0 ? fmt::format("{:.0f}", q.usd) : "no price",
        q.energy_kwh > 0 ? fmt::format("{:.1f}", q.energy_kwh / 1000.0) : "-",
        static_cast<double>(q.headroom_bytes) / pipesim::sim::kBytesPerGiB, largest_losses(q),
        (q.microbatch_held_by_memory ? fmt::format(", memory holds b at {:g}", q.best.job.microbatch_size)
                                     : std::string()) +
            (q.meets_constraints ? "" : "  (misses the constraints)"));
  }
  std::vector<std::string> limits;
  if (b.max_usd > 0) limits.push_back(fmt::format("at most ${:.0f}", b.max_usd));
  if (b.deadline_days > 0) limits.push_back(fmt::format("within {:g} days", b.deadline_days));
  if (b.max_gpus > 0) limits.push_back(fmt::format("at most {} GPUs", b.max_gpus));
  if (meeting == 0)
    std::cout << fmt::format("no cluster meets the constraints{}\n",
                             limits.empty() ? "" : fmt::format(" ({})", fmt::join(limits, ", ")));
  else
    std::cout << fmt::format(
        "* on the time/cost Pareto front of the {} clusters that {}\n", meeting,
        limits.empty() ? std::string("fit") : fmt::format("meet {}", fmt::join(limits, ", ")));
  std::cout << "losses are shares of GPU time: MFU + bubbles + exposed TP/PP/DP communication + offload + "
               "optimizer "
               "+ recompute + kernels below peak + other idle = 100% (--format json lists each)\n";
  return 0;
}

}  // namespace pipesim::cli
