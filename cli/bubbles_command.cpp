#include "bubbles_command.hpp"

#include <algorithm>
#include <array>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan_check.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/report/bubbles.hpp"
#include "pipesim/sim/report/invariants.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"

namespace pipesim::cli {

namespace {

constexpr std::array<sim::BubbleKind, 6> kKinds = {
    sim::BubbleKind::kWarmup,   sim::BubbleKind::kForwardBackward, sim::BubbleKind::kSteady,
    sim::BubbleKind::kCooldown, sim::BubbleKind::kOptimizerWait,   sim::BubbleKind::kTail};
/// Histogram bins of bubble lengths: below 1 ms, 10 ms, 100 ms, and the rest.
constexpr std::array<sim::Duration, 3> kBinEdges = {1'000'000, 10'000'000, 100'000'000};

double seconds(sim::Duration ns) {
  return static_cast<double>(ns) / 1e9;
}

double gib(std::int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024 * 1024);
}

/// One GPU's bubbles, summed.
struct GpuSummary {
  std::string device;
  std::int32_t stage = -1;
  std::int64_t count = 0;
  sim::Duration idle = 0;
  std::map<sim::BubbleKind, sim::Duration> by_kind;
  std::array<std::int64_t, 4> bins{};
  std::int64_t min_free = -1;
};

std::vector<GpuSummary> summarize(const sim::Plan& plan, const std::vector<sim::Bubble>& bubbles) {
  std::map<sim::DeviceId, GpuSummary> by_gpu;
  for (const auto& s : plan.streams)  // every simulated GPU, idle or not
    if (s.kind == sim::StreamKind::kCompute &&
        plan.devices[static_cast<std::size_t>(s.device)].kind == sim::DeviceKind::kGpu)
      by_gpu[s.device].device = plan.devices[static_cast<std::size_t>(s.device)].name;
  for (const sim::Bubble& b : bubbles) {
    GpuSummary& g = by_gpu[b.device];
    g.stage = b.stage;
    ++g.count;
    g.idle += b.length();
    g.by_kind[b.kind] += b.length();
    const auto bin = static_cast<std::size_t>(
        std::upper_bound(kBinEdges.begin(), kBinEdges.end(), b.length()) - kBinEdges.begin());
    ++g.bins[bin];
    g.min_free = g.min_free < 0 ? b.free_bytes : std::min(g.min_free, b.free_bytes);
  }
  std::vector<GpuSummary> out;
  for (auto& [device, g] : by_gpu) out.push_back(std::move(g));
  return out;
}

void print_table(const sim::Plan& plan, const sim::Metrics& m, const std::vector<sim::Bubble>& bubbles) {
  const auto gpus = summarize(plan, bubbles);
  std::cout << fmt::format(
      "{} on {}: {} ({} pp x {} tp x {} dp, {} simulated GPUs), step {:.4f} s, bubble {:.1f}%, framework "
      "{}\n",
      plan.meta.model, plan.hw.name, sim::schedule_label(plan.meta), plan.meta.pp, plan.meta.tp, plan.meta.dp,
      gpus.size(), m.step_time_s, 100 * m.bubble_fraction, plan.meta.framework);
  std::cout << fmt::format(
      "{:<8} {:>5} {:>6} {:>9} {:>6} | {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} | {:>5} {:>5} {:>5} "
      "{:>5} | {:>9}\n",
      "gpu", "stage", "count", "idle (s)", "idle%", "warmup", "fwd-bwd", "steady", "cooldown", "opt-wait",
      "tail", "<1ms", "<10ms", "<.1s", ">=.1s", "free GiB");
  const double span = static_cast<double>(m.step_span_ns) * std::max(1, m.step_span_iterations);
  for (const GpuSummary& g : gpus) {
    std::string kinds;
    for (sim::BubbleKind k : kKinds) {
      auto it = g.by_kind.find(k);
      kinds += fmt::format(" {:>8.4f}", it == g.by_kind.end() ? 0.0 : seconds(it->second));
    }
    std::cout << fmt::format("{:<8} {:>5} {:>6} {:>9.4f} {:>6.1f} |{} | {:>5} {:>5} {:>5} {:>5} | {:>9}\n",
                             g.device, g.stage, g.count, seconds(g.idle),
                             span > 0 ? 100 * static_cast<double>(g.idle) / span : 0.0, kinds, g.bins[0],
                             g.bins[1], g.bins[2], g.bins[3],
                             g.min_free < 0 ? std::string("-") : fmt::format("{:.2f}", gib(g.min_free)));
  }
  std::cout << "kinds in seconds; lengths binned below 1 ms, 10 ms, 0.1 s and above; free GiB: the least GPU "
               "memory "
               "free in any of the GPU's bubbles\n";
  if (plan.meta.iterations > 1) {
    // Asynchronous schedules repeat: the last iteration's bubbles are the steady pattern.
    const std::int32_t last = plan.meta.iterations - 1;
    std::int64_t count = 0;
    sim::Duration idle = 0;
    for (const sim::Bubble& b : bubbles)
      if (b.iteration == last) ++count, idle += b.length();
    std::cout << fmt::format(
        "repeating pattern (iteration {} of {}): {} bubbles, {:.4f} s idle over {} GPUs\n", last + 1,
        plan.meta.iterations, count, seconds(idle), gpus.size());
  }
}

void print_json(const sim::Plan& plan, const sim::Metrics& m, const std::vector<sim::Bubble>& bubbles) {
  nlohmann::ordered_json j;
  j["schedule"] = plan.meta.schedule;
  j["data_parallel"] = plan.meta.data_parallel;
  j["model"] = plan.meta.model;
  j["framework"] = plan.meta.framework;
  j["hw"] = plan.hw.name;
  j["pp"] = plan.meta.pp;
  j["tp"] = plan.meta.tp;
  j["dp"] = plan.meta.dp;
  j["iterations"] = plan.meta.iterations;
  j["step_time_s"] = m.step_time_s;
  j["bubble_fraction"] = m.bubble_fraction;
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const GpuSummary& g : summarize(plan, bubbles)) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const sim::Bubble& b : bubbles)
      if (plan.devices[static_cast<std::size_t>(b.device)].name == g.device)
        list.push_back({{"iteration", b.iteration},
                        {"start_s", seconds(b.start)},
                        {"length_s", seconds(b.length())},
                        {"free_gpu_bytes", b.free_bytes},
                        {"kind", sim::to_string(b.kind)}});
    nlohmann::ordered_json kinds;
    for (sim::BubbleKind k : kKinds) {
      auto it = g.by_kind.find(k);
      kinds[sim::to_string(k)] = it == g.by_kind.end() ? 0.0 : seconds(it->second);
    }
    gpus.push_back({{"device", g.device},
                    {"stage", g.stage},
                    {"count", g.count},
                    {"idle_s", seconds(g.idle)},
                    {"idle_by_kind_s", kinds},
                    {"length_histogram",
                     {{"below_1ms", g.bins[0]},
                      {"below_10ms", g.bins[1]},
                      {"below_100ms", g.bins[2]},
                      {"from_100ms", g.bins[3]}}},
                    {"min_free_gpu_bytes", std::max<std::int64_t>(0, g.min_free)},
                    {"bubbles", list}});
  }
  j["gpus"] = gpus;
  std::cout << pipesim::sim::json_text(j, 2) << "\n";
}

}  // namespace

int run_bubbles(const BubblesOptions& o) {
  if (o.format != "table" && o.format != "json")
    throw sim::InputError("--format", "", fmt::format("unknown format '{}'; valid: table, json", o.format));
  sim::Plan plan;
  if (!o.plan_file.empty()) {
    plan = sim::load_plan(o.plan_file);
    sim::check_plan_order(plan, o.plan_file);
  } else {
    const auto& s = sim::find_schedule(o.schedule);
    plan = sim::build_plan(s, sim::make_schedule_input(o.job, s));
  }
  const sim::Timeline tl = sim::Engine(sim::EngineOptions{true}).run(plan);
  const sim::Metrics m = sim::compute_metrics(plan, tl);
  const std::vector<sim::Bubble> bubbles = sim::find_bubbles(plan, tl);
  sim::check_run(plan, tl, m);
  sim::check_bubbles(plan, bubbles, m);
  if (o.format == "json")
    print_json(plan, m, bubbles);
  else
    print_table(plan, m, bubbles);
  return 0;
}

}  // namespace pipesim::cli
