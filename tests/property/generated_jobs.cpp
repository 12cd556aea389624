// Differential tests over generated jobs: seeded random jobs across every schedule, model size, hardware
// profile, pp up to 64, tp, dp, sharding, recompute and fill jobs on and off. Each job that a schedule
// accepts is simulated and must
//   - hold every invariant (check_run, check_bubbles, and check_fill with fill jobs);
//   - give the same plan back from its JSON, byte for byte, and the same metrics when that plan is run;
//   - give the same step and memory with symmetric replicas as with every GPU simulated (dp > 1);
//   - run exactly as without fill when its fill job's units take no time;
//   - (every 64th job) rank the same planner candidates with one search thread as with four.
// The first disagreement or violation is printed with the seed and job that generate it, exit code 1.
//
//   pipesim_generated_jobs [--jobs N] [--seed S] [--max-pp P]
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "pipesim/planner/config_search.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/fill/fill.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/report/bubbles.hpp"
#include "pipesim/sim/report/invariants.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/schedules/schedule.hpp"

namespace {

using namespace pipesim;

/// A disagreement between two ways of computing the same thing.
struct Disagreement : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Generated {
  sim::JobOptions job;
  std::string schedule;
  bool fill = false;
  std::string text;  ///< the simulate command line that runs it
};

template <typename T>
const T& pick(std::mt19937_64& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
}

Generated generate(std::mt19937_64& rng, int max_pp) {
  static const std::vector<std::string> models = {"qwen3-1.7b", "qwen3-1.7b", "llama3-8b",
                                                  "llama2-7b",  "qwen3-8b",   "bert-large"};
  static const std::vector<std::string> hws = {"h100-sxm-8x", "a100-80g-sxm-8x", "rtx4090-8x",
                                               "l40s-8x",     "mi300x-8x",       "b200-sxm-8x",
                                               "rtx3090-4x",  "v100-sxm2-4x"};
  static const std::vector<int> pps = {1, 2, 2, 4, 4, 8, 8, 16, 32, 64};
  static const std::vector<int> tps = {1, 1, 1, 2, 4};
  static const std::vector<int> dps = {1, 1, 2, 4};
  static const std::vector<std::string> recomputes = {"none", "none", "full", "selective"};
  static const std::vector<int> zeros = {-1, -1, -1, 1, 2, 3};
  static const std::vector<std::int64_t> seqs = {512, 1024, 2048, 4096};
  std::vector<const sim::ScheduleDescriptor*> schedules;
  for (const auto& s : sim::schedule_registry()) schedules.push_back(&s);
  Generated g;
  sim::JobOptions& j = g.job;
  const sim::ScheduleDescriptor& schedule = *pick(rng, schedules);
  g.schedule = schedule.name;
  j.model = pick(rng, models);
  j.hw = pick(rng, hws);
  j.pp = std::min(max_pp, pick(rng, pps));
  j.tp = pick(rng, tps);
  j.dp = pick(rng, dps);
  j.seq = pick(rng, seqs);
  j.recompute = pick(rng, recomputes);
  j.zero = j.dp > 1 ? pick(rng, zeros) : -1;
  j.microbatches = std::uniform_int_distribution<std::int64_t>(1, 3 * j.pp + 1)(rng);
  // Mostly what each schedule accepts, so that most jobs run: the whole-plan (offload) schedules drive one
  // pipeline and place state their own way; interleaved ones take microbatches in multiples of pp.
  if (schedule.kind == sim::ScheduleKind::kWholePlan) {
    j.tp = j.dp = 1;
    j.zero = -1;
    j.microbatches = std::uniform_int_distribution<std::int64_t>(j.pp, 3 * j.pp + 1)(rng);
  } else if (g.schedule.find("interleaved") != std::string::npos) {
    j.microbatches = j.pp * std::uniform_int_distribution<std::int64_t>(1, 3)(rng);
  }
  g.fill = std::uniform_int_distribution<int>(0, 1)(rng) == 1;
  g.text = fmt::format(
      "--schedule {} --model {} --hw {} --pp {} --tp {} --dp {} --seq {} --recompute {} --microbatches "
      "{}{}{}",
      g.schedule, j.model, j.hw, j.pp, j.tp, j.dp, j.seq, j.recompute, j.microbatches,
      j.zero >= 0 ? fmt::format(" --zero {}", j.zero) : "",
      g.fill ? " --fill-jobs bert-large-inference" : "");
  return g;
}

sim::Timeline run(const sim::Plan& plan) {
  return sim::Engine{sim::EngineOptions{true}}.run(plan);
}

void expect(bool ok, const std::string& what) {
  if (!ok) throw Disagreement(what);
}

/// A job's checks; returns false when its schedule refuses it.
bool check_job(const Generated& g, std::int64_t index) {
  const sim::ScheduleDescriptor& s = sim::find_schedule(g.schedule);
  sim::Plan plan;
  try {
    plan = sim::build_plan(s, sim::make_schedule_input(g.job, s));
  } catch (const sim::InputError& e) {
    if (std::getenv("PIPESIM_SHOW_REFUSALS") != nullptr) std::cerr << g.text << ": " << e.what() << "\n";
    return false;  // this schedule, model or profile cannot run the configuration: refused with a reason
  }
  const sim::Timeline tl = run(plan);
  const sim::Metrics m = sim::compute_metrics(plan, tl);
  sim::check_run(plan, tl, m);
  sim::check_bubbles(plan, sim::find_bubbles(plan, tl), m);
  const std::string metrics = sim::metrics_to_json(plan, m, 0.0);

  // The plan's JSON gives the same plan back, which runs to the same metrics.
  const std::string text = sim::plan_to_json(plan);
  const sim::Plan reloaded = sim::plan_from_json(text, "plan");
  expect(sim::plan_to_json(reloaded) == text, "the plan read back from its JSON writes different JSON");
  expect(sim::metrics_to_json(reloaded, sim::compute_metrics(reloaded, run(reloaded)), 0.0) == metrics,
         "the plan read back from its JSON simulates to different metrics");

  // Symmetric replicas stand for the GPUs they do not simulate exactly.
  if (plan.meta.replicas == "symmetric" && plan.meta.simulated_gpus < plan.num_gpus()) {
    sim::JobOptions all = g.job;
    all.explicit_replicas = true;
    const sim::Plan every = sim::build_plan(s, sim::make_schedule_input(all, s));
    const sim::Metrics e = sim::compute_metrics(every, run(every));
    expect(e.step_span_ns * m.step_span_iterations == m.step_span_ns * e.step_span_iterations,
           fmt::format("step {} ns with symmetric replicas, {} ns with every GPU simulated",
                       m.step_time_s * 1e9, e.step_time_s * 1e9));
    expect(e.peak_gpu_mem_bytes == m.peak_gpu_mem_bytes,
           fmt::format("peak GPU memory {} B with symmetric replicas, {} B with every GPU simulated",
                       m.peak_gpu_mem_bytes, e.peak_gpu_mem_bytes));
  }

  if (g.fill) {
    const double limit = 0.05;
    const auto jobs = sim::load_fill_jobs("bert-large-inference", plan.hw, plan.meta.dtype);
    const sim::FillRun filled = sim::simulate_with_fill(plan, tl, jobs, sim::FillOptions{}, limit);
    sim::check_run(filled.plan, filled.timeline, sim::compute_metrics(filled.plan, filled.timeline));
    sim::check_fill(sim::claims_of(filled, limit));
    // Units that take no time, with no state and free switches: the main job runs exactly as without.
    sim::FillJob nothing;
    nothing.name = "nothing";
    nothing.units = 1000;
    sim::FillOptions free;
    free.switch_overhead_ns = 0;
    const sim::FillRun idle = sim::simulate_with_fill(plan, tl, {nothing}, free, 0.0);
    const sim::Metrics f = sim::compute_metrics(idle.plan, idle.timeline);
    sim::check_run(idle.plan, idle.timeline, f);
    expect(f.step_span_ns == m.step_span_ns && f.run_time_s == m.run_time_s,
           fmt::format("step {} ns, run {} s with zero-length fill units; {} ns, {} s without",
                       f.step_time_s * 1e9, f.run_time_s, m.step_time_s * 1e9, m.run_time_s));
  }

  // The planner ranks the same candidates whatever its thread count (a small search: it is the slow part).
  if (index % 64 == 0) {
    planner::SearchOptions o;
    o.base.model = g.job.model;
    o.base.hw = g.job.hw;
    o.base.seq = g.job.seq;
    o.gpus = 8;
    o.global_batch = 64;
    o.top = 5;
    auto ranking = [&](int threads) {
      o.threads = threads;
      std::string out;
      for (const planner::Candidate& c : planner::search(o, nullptr).ranked)
        out += fmt::format("{} {}\n", c.key(), c.metrics.step_span_ns);
      return out;
    };
    const std::string one = ranking(1), four = ranking(4);
    expect(one == four, "the planner ranks differently with 1 and 4 threads:\n" + one + "against\n" + four);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t jobs = 200;
  std::uint64_t seed = 1;
  int max_pp = 64;  // smaller under the sanitizers, where a pp-64 job with fill takes minutes
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--jobs")
      jobs = std::atoll(argv[i + 1]);
    else if (flag == "--seed")
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--max-pp")
      max_pp = std::max(1, std::atoi(argv[i + 1]));
    else {
      std::cerr << "usage: pipesim_generated_jobs [--jobs N] [--seed S] [--max-pp P]\n";
      return 2;
    }
  }
  std::map<std::string, std::int64_t> simulated, refused;
  std::int64_t with_fill = 0, largest_pp = 0;
  for (std::int64_t k = 0; k < jobs; ++k) {
    // Each job has a seed of its own: one failing job is rerun alone with --seed and --jobs 1.
    const std::uint64_t job_seed = seed + static_cast<std::uint64_t>(k);
    std::mt19937_64 rng(job_seed);
    const Generated g = generate(rng, max_pp);
    try {
      if (check_job(g, k)) {
        ++simulated[g.schedule];
        with_fill += g.fill ? 1 : 0;
        largest_pp = std::max<std::int64_t>(largest_pp, g.job.pp);
      } else {
        ++refused[g.schedule];
      }
    } catch (const std::exception& e) {
      std::cerr << fmt::format("FAILED: seed {} (rerun: --seed {} --jobs 1): pipesim simulate {}\n  {}\n",
                               job_seed, job_seed, g.text, e.what());
      return 1;
    }
  }
  std::int64_t total = 0;
  std::string by_schedule;
  for (const auto& [name, n] : simulated) {
    total += n;
    by_schedule += fmt::format("{}{} {}", by_schedule.empty() ? "" : ", ", name, n);
  }
  std::int64_t refusals = 0;
  for (const auto& [name, n] : refused) refusals += n;
  std::cout << fmt::format(
      "{} generated jobs from seed {}: {} simulated ({} with fill jobs, pp up to {}), {} refused by their "
      "schedule; "
      "0 violations, 0 disagreements\n  simulated by schedule: {}\n",
      jobs, seed, total, with_fill, largest_pp, refusals, by_schedule);
  return 0;
}
