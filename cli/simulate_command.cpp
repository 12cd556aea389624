#include "simulate_command.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/core/output_file.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/fill/fill.hpp"
#include "pipesim/sim/plan/plan_check.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/report/chakra_trace.hpp"
#include "pipesim/sim/report/invariants.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "pipesim/sim/report/trace.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"

#include "keep_until_exit.hpp"

namespace pipesim::cli {

namespace {

struct Result {
  sim::Plan plan;
  sim::Timeline timeline;
  sim::Metrics metrics;
  double wall_s = 0;
  std::optional<sim::FillRun>
      fill;  ///< with --fill-jobs: the run with fill chunks (plan and timeline moved in)
};

/// Puts the fill jobs into every result's bubbles; the result then shows the filled run.
void fill_bubbles(const SimulateOptions& o, std::vector<Result>& results) {
  if (o.fill_jobs.empty() || results.empty()) return;
  if (!(o.fill_max_slowdown >= 0 && o.fill_max_slowdown <= 10))
    throw sim::InputError("--fill-max-slowdown", "", "valid: 0 .. 10 (a share of the step time)");
  if (!(o.fill_switch_us >= 0 && o.fill_switch_us <= 1e6))
    throw sim::InputError("--fill-switch-us", "", "valid: 0 .. 1e6");
  sim::FillOptions fo;
  fo.policy = sim::parse_fill_policy(o.fill_policy);
  fo.switch_overhead_ns = sim::duration_from_us(o.fill_switch_us);
  for (Result& r : results) {
    const auto jobs = sim::load_fill_jobs(o.fill_jobs, r.plan.hw, r.plan.meta.dtype);
    sim::FillRun run = sim::simulate_with_fill(r.plan, r.timeline, jobs, fo, o.fill_max_slowdown);
    r.plan = run.plan;
    r.timeline = run.timeline;
    r.metrics = sim::compute_metrics(r.plan, r.timeline);
    r.fill = std::move(run);
  }
}

nlohmann::ordered_json fill_json(const SimulateOptions& o, const sim::FillRun& f) {
  nlohmann::ordered_json jobs = nlohmann::ordered_json::array();
  for (std::size_t j = 0; j < f.outcome.jobs.size(); ++j) {
    const auto& job = f.outcome.jobs[j];
    jobs.push_back({{"name", job.name},
                    {"units_done", job.units_done},
                    {"units", job.units},
                    {"chunks", job.chunks},
                    {"smaller_batch_chunks", job.smaller_batch_chunks},
                    {"fits", job.fits},
                    {"completed_s", f.completed_s[j]}});
  }
  return {{"policy", o.fill_policy},
          {"bubble_share", f.bubble_share},
          {"main_slowdown", f.main_slowdown},
          {"main_slowdown_limit", o.fill_max_slowdown},
          {"fill_gpu_equivalents", f.fill_gpu_equivalents},
          {"fill_tflops_per_gpu", f.fill_tflops_per_gpu},
          {"utilization_without_fill", f.utilization_before},
          {"utilization_with_fill", f.utilization_after},
          {"jobs", jobs}};
}

/// The metrics JSON of a result, with its fill run when there is one.
std::string result_json(const SimulateOptions& o, const Result& r) {
  const std::string metrics = sim::metrics_to_json(r.plan, r.metrics, r.wall_s);
  if (!r.fill) return metrics;
  auto j = nlohmann::ordered_json::parse(metrics);
  j["fill"] = fill_json(o, *r.fill);
  return pipesim::sim::json_text(j, 2);
}

void print_fill(const SimulateOptions& o, const std::string& label, const sim::FillRun& f) {
  std::cout << fmt::format(
      "  {}: fill ({}): {:.2f} GPU-equivalents, {:.1f} TFLOP/s per GPU of fill work, main slowdown {:.2f}% "
      "(limit {:.1f}%{}), compute busy {:.1f}% -> {:.1f}%\n",
      label, o.fill_policy, f.fill_gpu_equivalents, f.fill_tflops_per_gpu, 100 * f.main_slowdown,
      100 * o.fill_max_slowdown,
      f.bubble_share < 1 ? fmt::format(", {:.0f}% of each bubble", 100 * f.bubble_share) : "",
      100 * f.utilization_before, 100 * f.utilization_after);
  for (std::size_t j = 0; j < f.outcome.jobs.size(); ++j) {
    const auto& job = f.outcome.jobs[j];
    std::cout << fmt::format(
        "    {}: {} of {} units in {} chunks{}, {}\n", job.name, job.units_done, job.units, job.chunks,
        job.smaller_batch_chunks > 0 ? fmt::format(" ({} at smaller batches)", job.smaller_batch_chunks) : "",
        !job.fits               ? "fits no bubble (time or memory)"
        : f.completed_s[j] >= 0 ? fmt::format("done at {:.4f} s", f.completed_s[j])
        : job.units_done > 0    ? std::string("unfinished")
                                : std::string("waiting: the bubbles went to the jobs before it"));
  }
}

/// FILE for one schedule, FILE with ".<schedule>" before the extension when several are written.
std::string per_schedule(const std::string& file, const std::string& schedule, bool several) {
  if (!several) return file;
  std::filesystem::path p(file);
  return (p.parent_path() / (p.stem().string() + "." + schedule + p.extension().string())).string();
}

Result run_plan(sim::Plan plan, bool record_memory) {
  auto t0 = std::chrono::steady_clock::now();
  sim::Engine engine(sim::EngineOptions{record_memory});
  sim::Timeline tl = engine.run(plan);
  sim::Metrics m = sim::compute_metrics(plan, tl);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {std::move(plan), std::move(tl), std::move(m), wall, std::nullopt};
}

std::string gib(std::int64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

void print_table(const std::vector<Result>& results, const std::vector<std::string>& skipped) {
  const auto& p = results.front().plan;
  std::cout << fmt::format("{} on {} ({} GPUs), seq {}, framework {}\n", p.meta.model, p.hw.name,
                           p.num_gpus(), p.meta.seq, p.meta.framework);
  std::cout << fmt::format("{:<24} {:>9} {:>5} {:>9} {:>10} {:>9} {:>6} {:>8} {:>9} {:>9} {:>4}\n",
                           "schedule", "pp/tp/dp", "batch", "recompute", "step (s)", "tokens/s", "MFU %",
                           "bubble %", "GPU GiB", "host GiB", "OOM");
  for (const auto& r : results) {
    const auto& m = r.metrics;
    const auto& meta = r.plan.meta;
    std::cout << fmt::format(
        "{:<24} {:>9} {:>5} {:>9} {:>10.4f} {:>9.0f} {:>6.1f} {:>8.1f} {:>9} {:>9} {:>4}\n",
        sim::schedule_label(meta), fmt::format("{}/{}/{}", meta.pp, meta.tp, meta.dp), meta.global_batch,
        meta.recompute, m.step_time_s, m.tokens_per_s, 100 * m.mfu, 100 * m.bubble_fraction,
        gib(m.peak_gpu_mem_bytes), gib(m.peak_host_mem_bytes), m.oom ? "yes" : "no");
  }
  // Every schedule of one job opens the same communicators.
  const std::int64_t communicators = results.empty() ? 0 : results.front().plan.meta.communicator_bytes;
  std::vector<std::string> held;
  if (p.hw.gpu.runtime_reserved_bytes > 0)
    held.push_back(fmt::format("{} the CUDA runtime", gib(p.hw.gpu.runtime_reserved_bytes)));
  if (communicators > 0) held.push_back(fmt::format("{} NCCL's communicators", gib(communicators)));
  const std::string runtime =
      held.empty() ? ""
                   : fmt::format(" for tensors ({} less {} {})", gib(p.hw.gpu.hbm_bytes),
                                 fmt::join(held, " and "), held.size() == 1 ? "holds" : "hold");
  std::cout << fmt::format(
      "capacity: GPU {} GiB{}, host {} GiB; asynchronous schedules report the steady state of "
      "several iterations\n",
      gib(p.hw.gpu_tensor_capacity() - communicators), runtime, gib(p.hw.host.dram_bytes));
  for (const auto& r : results) {
    if (r.metrics.oom)
      std::cout << fmt::format("  {}: OOM first on {} at {:.4f} s, worst excess {} GiB\n",
                               sim::schedule_label(r.plan.meta), r.metrics.oom_device, r.metrics.oom_time_s,
                               gib(r.metrics.oom_bytes_over));
    if (!r.plan.meta.note.empty())
      std::cout << fmt::format("  {}: {}\n", sim::schedule_label(r.plan.meta), r.plan.meta.note);
  }
  for (const auto& s : skipped) std::cout << "  skipped " << s << "\n";
}

}  // namespace

int run_simulate(const SimulateOptions& o) {
  if (o.format != "table" && o.format != "json")
    throw sim::InputError("--format", "", fmt::format("unknown format '{}'; valid: table, json", o.format));
  // Fill jobs' context switches share each node's PCIe links with the other replicas' switches: with fill
  // jobs every GPU is simulated.
  SimulateOptions run = o;
  if (!o.fill_jobs.empty()) run.job.explicit_replicas = true;
  // Traces plot memory; fill jobs need the free memory of each bubble.
  const bool record_memory = !o.trace_file.empty() || !o.trace_dir.empty() || !o.fill_jobs.empty();
  std::vector<Result> results;
  std::vector<std::string> skipped;
  if (!o.plan_file.empty()) {
    sim::Plan plan = sim::load_plan(o.plan_file);
    sim::check_plan_order(plan, o.plan_file);  // a cycle is reported with its ops before anything runs
    results.push_back(run_plan(std::move(plan), record_memory));
  } else {
    if (o.schedule == "all") {
      // One that cannot run this configuration is reported and skipped.
      sim::AllSchedulePlans all = sim::plans_of_all_schedules(run.job);
      for (auto& plan : all.plans) results.push_back(run_plan(std::move(plan), record_memory));
      skipped = std::move(all.skipped);
    } else {
      const auto& s = sim::find_schedule(o.schedule);
      results.push_back(run_plan(sim::build_plan(s, sim::make_schedule_input(run.job, s)), record_memory));
    }
  }
  fill_bubbles(o, results);
  // Nothing is written or printed before every result holds its invariants.
  for (const auto& r : results) {
    sim::check_run(r.plan, r.timeline, r.metrics);
    if (r.fill) sim::check_fill(sim::claims_of(*r.fill, o.fill_max_slowdown));
  }
  const bool several = results.size() > 1;
  for (const auto& r : results) {
    std::string name = sim::schedule_label(r.plan.meta);
    std::replace(name.begin(), name.end(), ' ', '.');
    if (!o.trace_file.empty() || !o.trace_dir.empty()) {
      std::string path = o.trace_file.empty()
                             ? (std::filesystem::path(o.trace_dir) / (name + ".trace.json")).string()
                             : per_schedule(o.trace_file, name, several);
      sim::OutputFile out(path);
      sim::write_chrome_trace(out.stream(), r.plan, r.timeline);
      out.commit();
    }
    if (!o.timeline_file.empty()) {
      sim::OutputFile out(per_schedule(o.timeline_file, name, several));
      sim::write_timeline(out.stream(), r.plan, r.timeline, r.metrics);
      out.commit();
    }
    if (!o.chakra_dir.empty()) {
      const sim::ChakraExport e = sim::write_chakra_traces(r.plan, r.timeline, o.chakra_dir, name);
      std::cerr << fmt::format("wrote {} Chakra traces ({} nodes) to {}/{}.<rank>.et{}\n", e.files, e.nodes,
                               o.chakra_dir, name,
                               e.dropped_deps > 0 ? fmt::format("; {} dependencies across GPUs other than "
                                                                "pipeline sends left out",
                                                                e.dropped_deps)
                                                  : "");
    }
    if (!o.plan_out.empty()) {
      sim::write_output_file(per_schedule(o.plan_out, name, several), sim::plan_to_json(r.plan));
    }
  }
  if (o.format == "json") {
    if (o.schedule == "all" && o.plan_file.empty()) {
      std::cout << "[";
      for (std::size_t i = 0; i < results.size(); ++i)
        std::cout << (i ? ",\n" : "\n") << result_json(o, results[i]);
      std::cout << "\n]\n";
    } else {
      std::cout << result_json(o, results[0]) << "\n";
    }
  } else {
    print_table(results, skipped);
    for (const auto& r : results)
      if (r.fill) print_fill(o, sim::schedule_label(r.plan.meta), *r.fill);
    if (!o.trace_dir.empty())
      std::cout << fmt::format("Chrome traces written under {}/ (open in ui.perfetto.dev)\n", o.trace_dir);
  }
  keep_until_exit(std::move(results));
  return 0;
}

}  // namespace pipesim::cli
