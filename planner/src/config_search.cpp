#include "pipesim/planner/config_search.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "pipesim/planner/partition.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/hardware/power_limit.hpp"
#include "pipesim/sim/job/option_parsing.hpp"
#include "pipesim/sim/report/invariants.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/workload/model.hpp"
#include "pipesim/sim/workload/profiled_workload.hpp"

namespace pipesim::planner {

std::string Candidate::key() const {
  return fmt::format("{} pp{} tp{}{} dp{} b{} m{} v{} {}{}{}{}{}", schedule, job.pp, job.tp,
                     job.cp > 1 ? fmt::format(" cp{}", job.cp) : "", job.dp, job.microbatch_size,
                     job.microbatches, std::max(1, job.virtual_stages), job.recompute,
                     data_parallel_mode(job) == "ddp" ? "" : " " + data_parallel_mode(job),
                     job.ep > 1 ? fmt::format(" ep{}", job.ep) : "", job.optimizer_offload ? " offload" : "",
                     job.partition.empty() ? "" : " partition " + job.partition);
}

void apply_data_parallel_mode(const std::string& mode, sim::JobOptions& job) {
  job.zero = -1;
  job.fsdp.clear();
  if (mode == "fsdp-hybrid") {
    job.fsdp = "hybrid";
  } else if (mode.size() == 6 && mode.rfind("zero-", 0) == 0 && mode[5] >= '1' && mode[5] <= '3') {
    job.zero = mode[5] - '0';
  } else if (mode != "ddp") {
    throw sim::InputError(
        sim::Option{"data_parallel"}, "",
        fmt::format("unknown mode '{}'; valid: ddp, zero-1, zero-2, zero-3, fsdp-hybrid", mode));
  }
}

double Candidate::objective(const std::string& o) const {
  return o == "cost" ? usd_per_million_tokens : metrics.step_time_s;
}

namespace {
__extension__ using Wide = __int128;  // exact products of nanoseconds and iteration counts

/// Sign of a.step - b.step, exactly: spans over iteration counts, cross-multiplied.
int compare_steps(sim::Duration a_span, std::int64_t a_iterations, sim::Duration b_span,
                  std::int64_t b_iterations) {
  const Wide x = static_cast<Wide>(a_span) * b_iterations, y = static_cast<Wide>(b_span) * a_iterations;
  return x < y ? -1 : x > y ? 1 : 0;
}
}  // namespace

bool Candidate::ranks_before(const Candidate& b, const std::string& o) const {
  if (o == "cost") {
    if (usd_per_million_tokens != b.usd_per_million_tokens)
      return usd_per_million_tokens < b.usd_per_million_tokens;
  } else if (int c = compare_steps(metrics.step_span_ns, metrics.step_span_iterations, b.metrics.step_span_ns,
                                   b.metrics.step_span_iterations);
             c != 0) {
    return c < 0;
  }
  return key() < b.key();
}

sim::Plan candidate_plan(const Candidate& c) {
  const auto& s = sim::find_schedule(c.schedule);
  return sim::build_plan(s, sim::make_schedule_input(c.job, s));
}

namespace {

constexpr std::int64_t kMaxM = std::numeric_limits<std::int32_t>::max();

std::vector<std::int32_t> divisors(std::int32_t n) {
  std::vector<std::int32_t> d;
  for (std::int32_t k = 1; k <= n; ++k)
    if (n % k == 0) d.push_back(k);
  return d;
}

struct Model {
  std::int32_t blocks = 0;
  std::int64_t heads = 1;
  std::int64_t experts = 0;  ///< MoE: experts per layer (0: dense)
};

Model describe_model(const sim::JobOptions& base) {
  Model m;
  if (!base.workload.empty()) {
    sim::Workload w = sim::load_workload(base.workload, sim::Recompute::kNone);
    for (const auto& l : w.layers) m.blocks += l.role == sim::LayerRole::kBlock ? 1 : 0;
    return m;
  }
  sim::ModelSpec spec = sim::load_model(base.model);
  m.blocks = static_cast<std::int32_t>(spec.layers);
  m.heads = spec.heads;
  m.experts = spec.num_experts;
  return m;
}

/// Context-parallel degrees to try on `rest` GPUs (those left by tp x pp): 1, and for long sequences
/// (kContextParallelFromSeq tokens and more) the powers of two that divide `rest` and split the sequence into
/// 2 cp equal chunks; only the given one when fixed (checked up front by check_fixed_cp).
std::vector<std::int32_t> context_degrees(const SearchOptions& o, std::int32_t rest) {
  if (o.cp > 0) return rest % o.cp == 0 ? std::vector<std::int32_t>{o.cp} : std::vector<std::int32_t>{};
  const std::int64_t seq = o.base.seq > 0 ? o.base.seq : sim::kDefaultSequenceLength;
  std::vector<std::int32_t> out;
  for (std::int32_t cp = 1; cp <= rest && cp <= 1024; cp *= 2) {
    if (cp > 1 && (seq < kContextParallelFromSeq || rest % cp != 0 || seq % (2 * cp) != 0 ||
                   !o.base.workload.empty() || *o.base.attention != "flash"))
      continue;
    out.push_back(cp);
  }
  return out;
}

/// The schedules to try: those named, or every one the registry tries by default that fits the cluster and
/// the workload.
std::vector<const sim::ScheduleDescriptor*> schedules_to_try(const SearchOptions& o,
                                                             const sim::HardwareProfile& hw) {
  std::vector<const sim::ScheduleDescriptor*> schedules;
  for (const std::string& name : o.schedules) {
    const sim::ScheduleDescriptor& s = sim::find_schedule(name);
    if (!sim::framework_runs(*o.base.loaded_framework, s))
      throw sim::InputError(
          sim::Option{"schedules"}, "",
          fmt::format("{} does not run {}; its pipeline schedules: {}", sim::framework_name(o.base), name,
                      fmt::join(o.base.loaded_framework->schedules.value, ", ")));
    schedules.push_back(&s);
  }
  if (o.schedules.empty()) {
    for (const sim::ScheduleDescriptor& s : sim::schedule_registry()) {
      const sim::PlannerHints& h = s.planner;
      if (!h.tried_by_default) continue;
      if (h.shape == sim::ClusterShape::kOnePipelineNode && o.gpus > hw.node.gpus) continue;
      if (!h.takes_profiled_workloads && !o.base.workload.empty()) continue;
      schedules.push_back(&s);
    }
  }
  // A framework that implements only some pipeline schedules is searched over those.
  std::erase_if(schedules, [&](const sim::ScheduleDescriptor* s) {
    return !sim::framework_runs(*o.base.loaded_framework, *s);
  });
  return schedules;
}

/// The data-parallel modes to try, each checked before any configuration is built with it.
std::vector<std::string> data_parallel_modes(const SearchOptions& o) {
  std::vector<std::string> modes = o.data_parallel;
  if (modes.empty()) modes = {"ddp", "zero-1", "zero-2", "zero-3"};
  for (const auto& mode : modes) {
    sim::JobOptions probe;
    apply_data_parallel_mode(mode, probe);
  }
  // A framework is searched over the data parallelism it offers.
  std::erase_if(modes, [&](const std::string& mode) {
    return !sim::framework_offers(o.base.loaded_framework->data_parallel, mode);
  });
  if (modes.empty())
    throw sim::InputError(
        sim::Option{"data_parallel"}, "",
        fmt::format("{} offers data parallelism {}; valid: those", sim::framework_name(o.base),
                    fmt::join(o.base.loaded_framework->data_parallel.value, ", ")));
  return modes;
}

/// How `n` GPUs are laid out (tp x pp x cp x dp) and each pipeline's batch split (m microbatches of b).
struct Layout {
  std::int32_t n = 0, tp = 0, pp = 0, cp = 0, dp = 0;
  std::int64_t b = 0, m = 0;
};

/// Walks every configuration in a fixed order (the order of the candidates and so of ties), appending each
/// to `protos`.
struct Enumerator {
  const SearchOptions& o;
  const Model& model;
  const std::vector<std::string>& modes;
  SearchResult& stats;
  std::vector<Candidate>& protos;

  void layouts(const sim::HardwareProfile& hw, const std::vector<std::int32_t>& gpu_counts,
               const std::vector<const sim::ScheduleDescriptor*>& schedules) {
    for (std::int32_t n : gpu_counts) {
      for (std::int32_t tp : divisors(std::min(n, hw.tp_domain_gpus()))) {
        // The search keeps every GPU of an NVLink domain busy: TP groups that leave some idle are not tried.
        if (!hw.tp_placement_error(tp).empty() || hw.tp_domain_used_gpus(tp) != hw.tp_domain_gpus() ||
            model.heads % tp != 0 || n % tp != 0)
          continue;
        if (o.tp > 0 && tp != o.tp) continue;
        for (std::int32_t pp : divisors(n / tp)) {
          if (pp > model.blocks || (o.pp > 0 && pp != o.pp)) continue;
          for (std::int32_t cp : context_degrees(o, n / (tp * pp))) {
            const std::int32_t dp = n / (tp * pp * cp);
            if (o.global_batch % dp != 0) continue;
            const std::int64_t per_pipeline = o.global_batch / dp;
            for (std::int64_t b : {1, 2, 4, 8}) {
              if (o.microbatch_size > 0 && b != o.microbatch_size) continue;
              if (per_pipeline % b != 0) continue;
              const Layout l{n, tp, pp, cp, dp, b, per_pipeline / b};
              for (const sim::ScheduleDescriptor* sp : schedules) schedule(*sp, l);
            }
          }
        }
      }
    }
  }

  void schedule(const sim::ScheduleDescriptor& s, const Layout& l) {
    const sim::PlannerHints& h = s.planner;
    const bool order_based = s.kind == sim::ScheduleKind::kOrderBased;
    if (h.shape == sim::ClusterShape::kOnePipelineNode && (l.tp != 1 || l.dp != 1 || l.pp != l.n)) return;
    if (l.cp > 1 && !order_based) return;  // context parallelism runs with the order-based schedules
    if (order_based && l.pp == 1 && !h.stands_for_single_stage)
      return;  // one stage: every order runs the same passes
    for (std::int32_t v : h.virtual_stages) {
      const sim::ScheduleShape shape{l.pp, static_cast<std::int32_t>(std::min<std::int64_t>(l.m, kMaxM)), v};
      if (order_based && (model.blocks < l.pp * v || !s.check(shape).empty())) continue;
      for (sim::Recompute rc : h.recomputes) {
        if (!o.recomputes.empty() &&
            std::find(o.recomputes.begin(), o.recomputes.end(), sim::to_string(rc)) == o.recomputes.end())
          continue;
        if (!sim::framework_offers(o.base.loaded_framework->recompute, sim::to_string(rc)))
          continue;  // a policy the framework does not offer
        sharding(s, l, v, rc);
      }
    }
  }

  void sharding(const sim::ScheduleDescriptor& s, const Layout& l, std::int32_t v, sim::Recompute rc) {
    const sim::PlannerHints& h = s.planner;
    const bool order_based = s.kind == sim::ScheduleKind::kOrderBased;
    for (const std::string& mode : modes) {
      if (mode != "ddp" && (l.dp * l.cp == 1 || !order_based)) continue;  // nothing to shard
      if (l.cp > 1 && mode == "fsdp-hybrid") continue;
      // MoE: experts split over 1, 2, 4, ... data-parallel ranks (dividing dp and the experts).
      for (std::int32_t ep = 1; ep <= l.dp; ep *= 2) {
        if (ep > 1 && (!order_based || model.experts == 0 || model.experts % ep != 0 || l.dp % ep != 0))
          continue;  // dense models have no experts to split
        // Expert parallelism runs beside plain DP or a sharded optimizer (Megatron-LM's pairing).
        if (ep > 1 && (l.cp > 1 || (mode != "ddp" && mode != "zero-1"))) continue;
        for (bool offload : {false, true}) {
          if (offload &&
              (!h.with_optimizer_offload || l.cp > 1 || !o.base.loaded_framework->host_offload.value))
            continue;
          add(s, l, v, rc, mode, ep, offload);
        }
      }
    }
  }

  void add(const sim::ScheduleDescriptor& s, const Layout& l, std::int32_t v, sim::Recompute rc,
           const std::string& mode, std::int32_t ep, bool offload) {
    Candidate c;
    c.schedule = s.name;
    c.job = o.base;
    c.job.pp = l.pp;
    c.job.tp = l.tp;
    c.job.dp = l.dp;
    c.job.cp = l.cp;
    c.job.microbatch_size = static_cast<double>(l.b);
    c.job.microbatches = l.m;
    c.job.global_batch = 0;
    c.job.virtual_stages = v;
    c.job.recompute = sim::to_string(rc);
    c.job.optimizer_offload = offload;
    apply_data_parallel_mode(mode, c.job);
    c.job.ep = ep;
    c.job.nodes = 0;
    ++stats.enumerated;
    protos.push_back(std::move(c));
  }
};

enum class Outcome : std::uint8_t { kKept, kNoFit, kInvalid };

/// Gives c its optimal partition and lower bound; kNoFit when no partition fits memory, kInvalid (with
/// why in `invalid`) when the schedule cannot run it.
Outcome bound_candidate(Candidate& c, const SearchOptions& o, std::string& invalid) {
  const sim::ScheduleDescriptor& s = sim::find_schedule(c.schedule);
  try {
    sim::ScheduleInput in = sim::make_schedule_input(c.job, s);
    if (s.partitioner.rule != sim::PartitionRule::kContiguousStages) {
      c.lower_bound_ns = 0;  // no stage times before the schedule builds its plan
      return Outcome::kKept;
    }
    PartitionProblem prob = make_partition_problem(in, s, o.max_mem_fraction);
    // Sharded or offloaded state: each layer keeps on the GPU what the simulator places there.
    if (c.job.optimizer_offload || in.sharding.stage != sim::ZeroStage::k0) shard_resident_bytes(prob, in);
    // A framework with its own split (nanotron) runs no other: keep it and check that it fits.
    PartitionResult part =
        in.partition_by_framework ? evaluate_partition(prob, in.partition) : optimal_partition(prob);
    if (!part.feasible) return Outcome::kNoFit;
    c.job.partition = fmt::format("{}", fmt::join(part.blocks, ","));
    // The schedule's own proven bound on what simulating this candidate reports.
    in.partition.assign(part.blocks.begin(), part.blocks.end());
    c.lower_bound_ns = sim::schedule_lower_bound_ns(s, in);
  } catch (const sim::InputError& e) {  // not a valid configuration (e.g. the schedule cannot run it)
    invalid = e.what();
    return Outcome::kInvalid;
  }
  return Outcome::kKept;
}

/// Bounds every configuration, on every thread (each is independent); the results are merged in enumeration
/// order, so they do not depend on the thread count. Returns those kept, by lower bound.
std::vector<Candidate> bound_all(std::vector<Candidate>& protos, const SearchOptions& o,
                                 SearchResult& stats) {
  std::vector<Outcome> outcome(protos.size(), Outcome::kKept);
  std::vector<std::string> invalid(protos.size());
  const unsigned threads = std::max(
      1u, std::min(o.threads > 0 ? static_cast<unsigned>(o.threads) : std::thread::hardware_concurrency(),
                   static_cast<unsigned>(std::max<std::size_t>(1, protos.size()))));
  std::vector<std::exception_ptr> bugs(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        for (std::size_t i = t; i < protos.size(); i += threads)
          outcome[i] = bound_candidate(protos[i], o, invalid[i]);
      } catch (...) {  // anything but bad input is a bug: it propagates
        bugs[t] = std::current_exception();
      }
    });
  for (auto& th : pool) th.join();
  for (const auto& bug : bugs)
    if (bug) std::rethrow_exception(bug);
  std::vector<Candidate> out;
  for (std::size_t i = 0; i < protos.size(); ++i) {
    if (outcome[i] == Outcome::kNoFit) {
      ++stats.pruned_memory;
    } else if (outcome[i] == Outcome::kInvalid) {
      if (stats.failed++ == 0) stats.first_invalid = fmt::format("{}: {}", protos[i].key(), invalid[i]);
    } else {
      out.push_back(std::move(protos[i]));
    }
  }
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    return a.lower_bound_ns != b.lower_bound_ns ? a.lower_bound_ns < b.lower_bound_ns : a.key() < b.key();
  });
  return out;
}

/// Every configuration worth a look, with its optimal partition and lower bound; memory misfits dropped.
std::vector<Candidate> enumerate(const SearchOptions& o, const sim::HardwareProfile& hw,
                                 SearchResult& stats) {
  const Model model = describe_model(o.base);
  const std::vector<const sim::ScheduleDescriptor*> schedules = schedules_to_try(o, hw);
  std::vector<std::int32_t> gpu_counts = {o.gpus};
  if (o.objective == "cost")
    for (std::int32_t n = o.gpus / 2; n >= 1; n /= 2) gpu_counts.push_back(n);
  const std::vector<std::string> modes = data_parallel_modes(o);
  std::vector<Candidate> protos;  // every configuration, in enumeration order
  Enumerator{o, model, modes, stats, protos}.layouts(hw, gpu_counts, schedules);
  return bound_all(protos, o, stats);
}

std::string gib(std::int64_t bytes) {
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

/// Why the winner shards its data-parallel state, against plain data parallelism on the same search.
std::string why_sharded(const std::vector<Candidate>& ranked, const Candidate* leanest_ddp_oom,
                        const sim::HardwareProfile& hw) {
  const Candidate& best = ranked.front();
  if (data_parallel_mode(best.job) == "ddp") return "";
  const std::string mode =
      data_parallel_mode(best.job) + (best.job.optimizer_offload ? " with optimizer offload" : "");
  const auto ddp = std::find_if(ranked.begin(), ranked.end(), [](const Candidate& c) {
    return data_parallel_mode(c.job) == "ddp" && c.job.dp > 1;
  });
  if (ddp != ranked.end())
    return fmt::format(
        "{} is {:.1f}% faster than the best plain data-parallel configuration ({}, {:.4f} s, "
        "{} per GPU); it holds {} per GPU",
        mode, 100 * (ddp->metrics.step_time_s / best.metrics.step_time_s - 1), ddp->key(),
        ddp->metrics.step_time_s, gib(ddp->metrics.peak_gpu_mem_bytes), gib(best.metrics.peak_gpu_mem_bytes));
  if (leanest_ddp_oom)
    return fmt::format(
        "plain data parallelism does not fit: its leanest configuration ({}) needs {} per GPU "
        "of {}; {} holds {}",
        leanest_ddp_oom->key(), gib(leanest_ddp_oom->metrics.peak_gpu_mem_bytes),
        gib(hw.gpu_tensor_capacity()), mode, gib(best.metrics.peak_gpu_mem_bytes));
  return fmt::format(
      "no plain data-parallel configuration fits {} of GPU memory (none got past the partition "
      "memory check); {} holds {}",
      gib(hw.gpu_tensor_capacity()), mode, gib(best.metrics.peak_gpu_mem_bytes));
}

/// When the best configuration splits sequences over context-parallel ranks: against the best one that does
/// not (more TP, PP or DP instead).
std::string why_context_parallel(const std::vector<Candidate>& ranked) {
  const Candidate& best = ranked.front();
  if (best.job.cp <= 1) return "";
  const auto whole =
      std::find_if(ranked.begin(), ranked.end(), [](const Candidate& c) { return c.job.cp == 1; });
  if (whole == ranked.end())
    return fmt::format(
        "cp {}: every configuration keeping whole sequences on a GPU was cut, by memory or by a lower bound "
        "slower than the ranked ones ({} 1 ranks them)",
        best.job.cp, sim::spelled(sim::Option{"cp"}));
  return fmt::format(
      "cp {} is {:.1f}% faster than the best configuration keeping whole sequences on a GPU "
      "({}, {:.4f} s)",
      best.job.cp, 100 * (whole->metrics.step_time_s / best.metrics.step_time_s - 1), whole->key(),
      whole->metrics.step_time_s);
}

/// The cost objective's lower bound of a candidate: the dollars per million tokens of its lower-bound step
/// time on its GPUs.
double usd_bound(const Candidate& c, double usd, const SearchOptions& o) {
  const double gpus = static_cast<double>(c.job.pp) * c.job.tp * c.job.cp * c.job.dp;
  const double tokens = static_cast<double>(c.job.microbatches) * c.job.microbatch_size * c.job.dp *
                        static_cast<double>(o.base.seq > 0 ? o.base.seq : sim::kDefaultSequenceLength);
  return gpus * usd * sim::to_seconds(c.lower_bound_ns) / 3600.0 / tokens * 1e6;
}

/// Simulates queue[next, end) on `threads` threads; per candidate, why the schedule cannot run it (empty
/// when it ran).
std::vector<std::string> simulate_batch(std::vector<Candidate>& queue, std::size_t next, std::size_t end,
                                        unsigned threads) {
  std::vector<std::thread> pool;
  std::vector<std::string> errors(end - next);
  std::vector<std::exception_ptr> bugs(end - next);
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (std::size_t i = next + t; i < end; i += threads) {
        Candidate& c = queue[i];
        try {
          sim::Plan plan = candidate_plan(c);
          sim::Timeline tl = sim::Engine{}.run(plan);
          c.metrics = sim::compute_metrics(plan, tl);
          sim::check_metrics(c.metrics, plan.meta.global_batch, plan.meta.seq);  // throws: a bug
        } catch (const sim::InputError& e) {  // the schedule cannot run this configuration
          errors[i - next] = e.what();
        } catch (const sim::DeadlockError& e) {
          errors[i - next] = e.what();
        } catch (...) {  // anything else is a bug: it propagates
          bugs[i - next] = std::current_exception();
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  for (const auto& bug : bugs)
    if (bug) std::rethrow_exception(bug);
  return errors;
}

/// Simulates the queue in order (lowest bound first) until the rest cannot enter the top K.
struct Simulation {
  const SearchOptions& o;
  const sim::HardwareProfile& hw;
  const double usd;
  SearchResult& result;
  std::vector<Candidate> done;
  std::unique_ptr<Candidate> leanest_ddp_oom;  // the plain data-parallel run closest to fitting

  void run(std::vector<Candidate>& queue, std::ostream* progress) {
    const unsigned threads =
        o.threads > 0 ? static_cast<unsigned>(o.threads) : std::max(1u, std::thread::hardware_concurrency());
    // A fixed batch size: where the search stops (and so its result) must not depend on the thread count.
    constexpr std::size_t batch = 8;
    const auto t0 = std::chrono::steady_clock::now();
    bool bar = false;
    std::size_t next = 0;
    while (next < queue.size()) {
      // Stop once the cheapest remaining lower bound cannot beat the top-K (throughput; the cost objective
      // keeps the GPU count in the bound).
      if (!o.exhaustive && static_cast<std::int32_t>(done.size()) >= o.top && cut_by_bound(queue[next])) {
        result.pruned_bound = static_cast<std::int64_t>(queue.size() - next);
        break;
      }
      const std::size_t end = std::min(queue.size(), next + batch);
      const std::vector<std::string> errors = simulate_batch(queue, next, end, threads);
      for (std::size_t i = next; i < end; ++i) collect(queue[i], errors[i - next]);
      next = end;
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (progress && (bar || elapsed > 1.0)) {
        bar = true;
        draw_progress(*progress, next, queue.size());
      }
    }
    if (bar) *progress << "\n";
  }

  /// Whether `c`, and so every later candidate in the queue, cannot enter the top K of those done.
  bool cut_by_bound(const Candidate& c) const {
    std::vector<const Candidate*> ranked;
    for (const auto& d : done) ranked.push_back(&d);
    std::nth_element(
        ranked.begin(), ranked.begin() + (o.top - 1), ranked.end(),
        [&](const Candidate* a, const Candidate* b) { return a->ranks_before(*b, o.objective); });
    const Candidate& kth = *ranked[static_cast<std::size_t>(o.top - 1)];
    if (o.objective == "cost") return usd_bound(c, usd, o) > kth.usd_per_million_tokens;
    // Strictly slower only: a candidate that could tie the K-th may still rank before it by key.
    return compare_steps(c.lower_bound_ns, 1, kth.metrics.step_span_ns, kth.metrics.step_span_iterations) > 0;
  }

  /// Counts a simulated candidate as failed, out of memory, or done (priced).
  void collect(Candidate& c, const std::string& error) {
    if (!error.empty()) {
      if (result.failed++ == 0) result.first_invalid = fmt::format("{}: {}", c.key(), error);
      return;
    }
    ++result.simulated;
    // A configuration fits when its simulated peak stays within the allowed share of GPU memory.
    if (c.metrics.oom || static_cast<double>(c.metrics.peak_gpu_mem_bytes) >
                             o.max_mem_fraction * static_cast<double>(c.metrics.gpu_mem_capacity_bytes)) {
      ++result.oom;
      if (data_parallel_mode(c.job) == "ddp" && c.job.dp > 1 &&
          (leanest_ddp_oom == nullptr ||
           c.metrics.peak_gpu_mem_bytes < leanest_ddp_oom->metrics.peak_gpu_mem_bytes))
        leanest_ddp_oom = std::make_unique<Candidate>(c);
      return;
    }
    const double gpus = static_cast<double>(c.metrics.num_gpus);
    c.usd_per_million_tokens =
        gpus * usd * c.metrics.step_time_s / 3600.0 / (c.metrics.tokens_per_s * c.metrics.step_time_s) * 1e6;
    done.push_back(std::move(c));
  }

  void draw_progress(std::ostream& out, std::size_t next, std::size_t total) const {
    const int width = 30;
    const int filled = static_cast<int>(width * static_cast<double>(next) / static_cast<double>(total));
    out << fmt::format("\rplan: [{}{}] {}/{} candidates simulated",
                       std::string(static_cast<std::size_t>(filled), '#'),
                       std::string(static_cast<std::size_t>(width - filled), '.'), result.simulated, total)
        << std::flush;
  }
};

}  // namespace

/// A fixed --cp must split the sequence into 2 cp chunks and the GPUs into groups, on flash attention.
void check_fixed_cp(const SearchOptions& o) {
  if (o.cp == 0) return;
  const std::int64_t seq = o.base.seq > 0 ? o.base.seq : sim::kDefaultSequenceLength;
  auto bad = [](const std::string& why) { throw sim::InputError(sim::Option{"cp"}, "", why); };
  if (o.cp < 0 || o.cp > 1024) bad(fmt::format("{}; valid: 1 .. 1024", o.cp));
  if (o.cp == 1) return;
  if (o.gpus % o.cp != 0)
    bad(fmt::format("cp {} must divide {} {}", o.cp, sim::spelled(sim::Option{"gpus"}), o.gpus));
  if (seq % (2 * o.cp) != 0)
    bad(fmt::format("the sequence ({}) is split into 2 x cp = {} chunks and must be a multiple of it", seq,
                    2 * o.cp));
  if (!o.base.workload.empty())
    bad(("applies to " + sim::spelled(sim::Option{"model"}) +
         "; a profiled workload holds measured per-GPU times"));
  if (*o.base.attention != "flash") bad("context-parallel attention runs on flash attention");
}

namespace {

/// The options' own checks, before any file is read.
void check_search_options(const SearchOptions& o) {
  if (o.gpus < 1) throw sim::InputError(sim::Option{"gpus"}, "", "must be >= 1");
  if (!(o.gpu_hour_usd >= 0 && o.gpu_hour_usd <= 1e6))
    throw sim::InputError(sim::Option{"gpu_hour_usd"}, "", "valid: 0 (the profile's price) .. 1e6");
  if (o.global_batch < 1) throw sim::InputError(sim::Option{"global_batch"}, "", "required, >= 1");
  if (o.objective != "throughput" && o.objective != "cost")
    throw sim::InputError(sim::Option{"objective"}, "",
                          fmt::format("unknown objective '{}'; valid: throughput, cost", o.objective));
  if (!(o.max_mem_fraction > 0 && o.max_mem_fraction <= 1))
    throw sim::InputError(sim::Option{"max_mem_fraction"}, "", "valid: 0 < F <= 1");
  if (o.top < 1) throw sim::InputError(sim::Option{"top"}, "", "must be >= 1");
  for (const auto& r : o.recomputes) sim::parse_recompute(r);
  if (o.tp < 0 || o.pp < 0 || (o.tp > 0 && o.gpus % o.tp != 0) || (o.pp > 0 && o.gpus % o.pp != 0) ||
      (o.tp > 0 && o.pp > 0 && o.gpus % (o.tp * o.pp) != 0))
    throw sim::InputError(
        o.tp > 0 && o.gpus % o.tp != 0 ? sim::Option{"tp"} : sim::Option{"pp"}, "",
        fmt::format("must divide {} {} (with the other)", sim::spelled(sim::Option{"gpus"}), o.gpus));
  for (const auto& s : o.schedules) sim::find_schedule(s);
  check_fixed_cp(o);
}

}  // namespace

SearchResult search(const SearchOptions& given, std::ostream* progress) {
  SearchOptions o = given;
  o.base = sim::with_framework(given.base);  // the framework's options, read once for every candidate
  check_search_options(o);
  const sim::HardwareProfile hw = sim::load_hardware_profile(o.base.hw);
  // A limit the profile cannot price fails every candidate alike: said once, not as "nothing fits".
  if (o.base.power_limit)
    if (const std::string why = sim::power_limit_error(hw.gpu, *o.base.power_limit); !why.empty())
      throw sim::InputError(sim::Option{"power_limit"}, "", why);
  if (const std::string why = sim::attention_kernel_error(o.base, hw); !why.empty())
    throw sim::InputError(sim::Option{"attention_kernel"}, "", why);
  const double usd = o.gpu_hour_usd > 0 ? o.gpu_hour_usd : hw.gpu_hour_usd;
  if (o.objective == "cost" && usd <= 0)
    throw sim::InputError(sim::Option{"gpu_hour_usd"}, "",
                          fmt::format("{} has no $/GPU-hour figure; give {}", hw.name,
                                      sim::spelled(sim::Option{"gpu_hour_usd"})));

  SearchResult result;
  // The job's files are read once for all candidates.
  SearchOptions loaded = o;
  loaded.base.loaded_hw = std::make_shared<const sim::HardwareProfile>(hw);
  if (o.base.workload.empty())
    loaded.base.loaded_model = std::make_shared<const sim::ModelSpec>(sim::load_model(o.base.model));
  std::vector<Candidate> queue = enumerate(loaded, hw, result);
  // The objective's lower bound of a candidate: its step time, or (cost) the dollars per million tokens of
  // that time on its GPUs. The queue runs in that order, so once one candidate cannot enter the top K no
  // later one can.
  if (o.objective == "cost")
    std::stable_sort(queue.begin(), queue.end(), [&](const Candidate& a, const Candidate& b) {
      return usd_bound(a, usd, o) < usd_bound(b, usd, o);
    });
  Simulation simulation{o, hw, usd, result, {}, nullptr};
  simulation.run(queue, progress);
  std::vector<Candidate>& done = simulation.done;
  std::sort(done.begin(), done.end(),
            [&](const Candidate& a, const Candidate& b) { return a.ranks_before(b, o.objective); });
  if (!done.empty()) {
    result.why_sharded = why_sharded(done, simulation.leanest_ddp_oom.get(), hw);
    result.why_context_parallel = why_context_parallel(done);
  }
  if (static_cast<std::int32_t>(done.size()) > o.top) done.resize(static_cast<std::size_t>(o.top));
  result.ranked = std::move(done);
  return result;
}

}  // namespace pipesim::planner
