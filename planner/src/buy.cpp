#include "pipesim/planner/buy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/report/invariants.hpp"

namespace pipesim::planner {

namespace {

// Far beyond any training run, and every product below stays exact in a double.
constexpr double kMaxTokens = 1e18;
constexpr std::int64_t kMaxSteps = std::int64_t{1} << 40;

void check_options(const BuyOptions& o) {
  if (o.hardware.empty()) throw sim::InputError(sim::Option{"hw"}, "", "give at least one hardware profile");
  if (o.gpu_counts.empty()) throw sim::InputError(sim::Option{"gpus"}, "", "give at least one GPU count");
  for (std::int32_t g : o.gpu_counts)
    if (g < 1) throw sim::InputError(sim::Option{"gpus"}, "", fmt::format("{} GPUs; valid: 1 .. 1048576", g));
  if ((o.tokens > 0) == (o.steps > 0))
    throw sim::InputError(sim::Option{"tokens"}, "",
                          ("give either " + sim::spelled(sim::Option{"tokens"}) + " (tokens to train) or " +
                           sim::spelled(sim::Option{"steps"}) + ", not both"));
  if (o.steps < 0 || o.steps > kMaxSteps)
    throw sim::InputError(sim::Option{"steps"}, "",
                          fmt::format("{} steps; valid: 1 .. {}", o.steps, kMaxSteps));
  if (!(o.max_usd >= 0 && o.max_usd <= 1e15))
    throw sim::InputError(sim::Option{"max_usd"}, "", "valid: 0 (no budget) .. 1e15");
  if (!(o.deadline_days >= 0 && o.deadline_days <= 1e6))
    throw sim::InputError(sim::Option{"deadline_days"}, "", "valid: 0 (no deadline) .. 1e6");
  if (o.max_gpus < 0) throw sim::InputError(sim::Option{"max_gpus"}, "", "valid: 0 (no limit) or more");
  for (const auto& [name, usd] : o.gpu_hour_usd) {
    if (!(usd > 0 && usd <= 1e6))
      throw sim::InputError(sim::Option{"gpu_hour_usd"}, "",
                            fmt::format("{}: price {}; valid: > 0 .. 1e6", name, usd));
    if (std::find(o.hardware.begin(), o.hardware.end(), name) == o.hardware.end())
      throw sim::InputError(
          sim::Option{"gpu_hour_usd"}, "",
          fmt::format("{} is not one of the clusters in {}", name, sim::spelled(sim::Option{"hw"})));
  }
}

/// Where a GPU's time goes besides model FLOPs at peak (see ClusterQuote): the simulated time breakdown, its
/// kernel time split into model FLOPs at peak, recompute and the rest (kernels below peak).
void split_losses(ClusterQuote& q) {
  const sim::Metrics& m = q.best.metrics;
  const sim::TimeBreakdown& t = m.time;
  const double recompute = std::max(0.0, m.hfu - m.mfu);
  std::vector<Loss> losses{{"bubbles", "pipeline bubbles", t.pipeline_bubble},
                           {"tp_comm", "exposed TP communication", t.tp_comm},
                           {"pp_comm", "exposed pipeline transfers", t.pp_comm},
                           {"dp_comm", "exposed data-parallel communication", t.dp_comm},
                           {"cp_comm", "exposed context-parallel communication", t.cp_comm},
                           {"offload", "offload transfers and host work", t.offload},
                           {"optimizer", "optimizer step", t.optimizer},
                           {"recompute", "recompute", recompute},
                           {"other", "other idle time", t.other}};
  double lost = 0;
  for (const Loss& l : losses) lost += l.share;
  // What remains of GPU time: kernels running below the dtype's peak (GEMM efficiency, memory-bound work).
  losses.push_back({"below_peak", "kernels below peak", std::max(0.0, 1.0 - m.mfu - lost)});
  std::stable_sort(losses.begin(), losses.end(),
                   [](const Loss& a, const Loss& b) { return a.share > b.share; });
  q.limiter = losses.front().what;
  q.losses = std::move(losses);
}

/// Would the same layout with twice the microbatch (half the microbatches) fit? When not, memory held the
/// microbatch size down. Configurations the schedule refuses at the larger size tell nothing.
bool microbatch_held_by_memory(const Candidate& best, double max_mem_fraction) {
  Candidate c = best;
  constexpr double kLargestSearched = 8;  // the search's microbatch sizes are 1, 2, 4 and 8
  if (c.job.microbatches % 2 != 0 || c.job.microbatches < 2 || c.job.microbatch_size * 2 > kLargestSearched)
    return false;
  c.job.microbatch_size *= 2;
  c.job.microbatches /= 2;
  try {
    const sim::Plan plan = candidate_plan(c);
    const sim::Metrics m = sim::compute_metrics(plan, sim::Engine{}.run(plan));
    sim::check_metrics(m, plan.meta.global_batch, plan.meta.seq);
    return m.oom || static_cast<double>(m.peak_gpu_mem_bytes) >
                        max_mem_fraction * static_cast<double>(m.gpu_mem_capacity_bytes);
  } catch (const sim::InputError&) {
    return false;
  }
}

void mark_pareto(std::vector<ClusterQuote>& quotes) {
  for (ClusterQuote& q : quotes) {
    if (!q.meets_constraints) continue;
    q.pareto = std::none_of(quotes.begin(), quotes.end(), [&](const ClusterQuote& r) {
      return &r != &q && r.meets_constraints && r.time_to_train_s <= q.time_to_train_s && r.usd <= q.usd &&
             (r.time_to_train_s < q.time_to_train_s || r.usd < q.usd);
    });
  }
}

}  // namespace

std::int64_t steps_to_train(double tokens, std::int64_t tokens_per_step) {
  if (!(tokens >= 1 && tokens <= kMaxTokens))
    throw sim::InputError(sim::Option{"tokens"}, "", fmt::format("{} tokens; valid: 1 .. 1e18", tokens));
  if (tokens_per_step < 1)
    throw sim::InputError(sim::Option{"global_batch"}, "", "a step must train at least one token");
  const double steps = std::ceil(tokens / static_cast<double>(tokens_per_step));
  if (steps > static_cast<double>(kMaxSteps))
    throw sim::InputError(
        sim::Option{"tokens"}, "",
        fmt::format("{} steps of {} tokens; valid: at most {} steps", steps, tokens_per_step, kMaxSteps));
  return static_cast<std::int64_t>(steps);
}

BuyResult buy(const BuyOptions& o, std::ostream* progress) {
  check_options(o);
  if (o.search.global_batch < 1) throw sim::InputError(sim::Option{"global_batch"}, "", "required, >= 1");
  BuyResult result;
  const std::int64_t seq = o.search.base.seq > 0 ? o.search.base.seq : sim::kDefaultSequenceLength;
  if (__builtin_mul_overflow(o.search.global_batch, seq, &result.tokens_per_step))
    throw sim::InputError(sim::Option{"global_batch"}, "", "global batch x seq overflows");
  result.steps = o.steps > 0 ? o.steps : steps_to_train(o.tokens, result.tokens_per_step);

  // Every profile is loaded (and so checked) before the first search; a budget needs every price.
  std::vector<sim::HardwareProfile> profiles;
  for (const std::string& name : o.hardware) {
    profiles.push_back(sim::load_hardware_profile(name));
    if (const std::string why = sim::attention_kernel_error(o.search.base, profiles.back()); !why.empty())
      throw sim::InputError(sim::Option{"attention_kernel"}, "", why);
    const auto price = o.gpu_hour_usd.find(name);
    if (o.max_usd > 0 && price == o.gpu_hour_usd.end() && profiles.back().gpu_hour_usd <= 0)
      throw sim::InputError(
          sim::Option{"gpu_hour_usd"}, "",
          fmt::format("{} has no $/GPU-hour figure and {} needs one; give {} {}=PRICE", name,
                      sim::spelled(sim::Option{"max_usd"}), sim::spelled(sim::Option{"gpu_hour_usd"}), name));
  }
  const std::size_t total = o.hardware.size() * o.gpu_counts.size();
  for (std::size_t h = 0; h < o.hardware.size(); ++h) {
    const sim::HardwareProfile& hw = profiles[h];
    const auto price = o.gpu_hour_usd.find(o.hardware[h]);
    for (std::int32_t gpus : o.gpu_counts) {
      ClusterQuote q;
      q.hw = o.hardware[h];
      q.gpus = gpus;
      q.usd_per_gpu_hour = price != o.gpu_hour_usd.end() ? price->second : hw.gpu_hour_usd;
      if (gpus % hw.node.gpus != 0) {
        q.skipped = fmt::format("not whole nodes of {} GPUs", hw.node.gpus);
      } else if (o.max_gpus > 0 && gpus > o.max_gpus) {
        q.skipped = fmt::format("over {} {}", sim::spelled(sim::Option{"max_gpus"}), o.max_gpus);
      } else {
        SearchOptions s = o.search;
        s.base.hw = o.hardware[h];
        s.gpus = gpus;
        s.top = 1;
        s.objective = "throughput";
        s.gpu_hour_usd = q.usd_per_gpu_hour;
        SearchResult r = search(s, nullptr);
        if (r.ranked.empty()) {
          q.no_fit = fmt::format("no configuration fits ({} enumerated, {} over memory)", r.enumerated,
                                 r.pruned_memory + r.oom);
        } else {
          q.best = std::move(r.ranked.front());
          const double step_s = q.best.metrics.step_time_s;
          q.steps = result.steps;
          q.time_to_train_s = static_cast<double>(q.steps) * step_s;
          q.gpu_hours = static_cast<double>(gpus) * q.time_to_train_s / 3600.0;
          q.usd = q.gpu_hours * q.usd_per_gpu_hour;
          const double watts =
              s.base.power_limit.value_or(hw.gpu.power_limit_W > 0 ? hw.gpu.power_limit_W : hw.gpu.board_W);
          q.energy_kwh = q.gpu_hours * watts / 1000.0;
          q.headroom_bytes =
              static_cast<std::int64_t>(s.max_mem_fraction *
                                        static_cast<double>(q.best.metrics.gpu_mem_capacity_bytes)) -
              q.best.metrics.peak_gpu_mem_bytes;
          split_losses(q);
          q.microbatch_held_by_memory = microbatch_held_by_memory(q.best, o.search.max_mem_fraction);
          q.meets_constraints = (o.max_usd <= 0 || q.usd <= o.max_usd) &&
                                (o.deadline_days <= 0 || q.time_to_train_s <= o.deadline_days * 86400.0);
        }
      }
      if (progress)
        *progress << fmt::format("buy: [{}/{}] {} x {}: {}\n", result.clusters.size() + 1, total, q.hw, gpus,
                                 !q.skipped.empty() ? "skipped, " + q.skipped
                                 : !q.no_fit.empty()
                                     ? q.no_fit
                                     : fmt::format("{:.3f} s per step", q.best.metrics.step_time_s));
      result.clusters.push_back(std::move(q));
    }
  }
  mark_pareto(result.clusters);
  return result;
}

}  // namespace pipesim::planner
