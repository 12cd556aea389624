#include "simulate_command.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "pipesim/sim/engine.hpp"
#include "pipesim/sim/error.hpp"
#include "pipesim/sim/metrics.hpp"
#include "pipesim/sim/output_file.hpp"
#include "pipesim/sim/plan_builder.hpp"
#include "pipesim/sim/plan_check.hpp"
#include "pipesim/sim/plan_json.hpp"
#include "pipesim/sim/trace.hpp"

namespace pipesim::cli {

namespace {

struct Result {
  sim::Plan plan;
  sim::Timeline timeline;
  sim::Metrics metrics;
  double wall_s = 0;
};

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
  return {std::move(plan), std::move(tl), std::move(m), wall};
}

std::string gib(std::int64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

void print_table(const std::vector<Result>& results, const std::vector<std::string>& skipped) {
  const auto& p = results.front().plan;
  std::cout << fmt::format("{} on {} ({} GPUs), seq {}\n", p.meta.model, p.hw.name, p.num_gpus(), p.meta.seq);
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
  std::cout << fmt::format(
      "capacity: GPU {} GiB, host {} GiB; asynchronous schedules report the steady state of "
      "several iterations\n",
      gib(p.hw.gpu.hbm_bytes), gib(p.hw.host.dram_bytes));
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
  const bool record_memory = !o.trace_file.empty() || !o.trace_dir.empty();
  std::vector<Result> results;
  std::vector<std::string> skipped;
  if (!o.plan_file.empty()) {
    sim::Plan plan = sim::load_plan(o.plan_file);
    sim::check_plan_order(plan);  // a cycle is reported with its ops before anything runs
    results.push_back(run_plan(std::move(plan), record_memory));
  } else {
    if (o.schedule == "all") {
      // One that cannot run this configuration is reported and skipped.
      sim::AllSchedulePlans all = sim::plans_of_all_schedules(o.job);
      for (auto& plan : all.plans) results.push_back(run_plan(std::move(plan), record_memory));
      skipped = std::move(all.skipped);
    } else {
      const auto& s = sim::find_schedule(o.schedule);
      results.push_back(run_plan(sim::build_plan(s, sim::make_schedule_input(o.job, s)), record_memory));
    }
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
    if (!o.plan_out.empty()) {
      sim::write_output_file(per_schedule(o.plan_out, name, several), sim::plan_to_json(r.plan));
    }
  }
  if (o.format == "json") {
    if (o.schedule == "all" && o.plan_file.empty()) {
      std::cout << "[";
      for (std::size_t i = 0; i < results.size(); ++i)
        std::cout << (i ? ",\n" : "\n")
                  << sim::metrics_to_json(results[i].plan, results[i].metrics, results[i].wall_s);
      std::cout << "\n]\n";
    } else {
      std::cout << sim::metrics_to_json(results[0].plan, results[0].metrics, results[0].wall_s) << "\n";
    }
  } else {
    print_table(results, skipped);
    if (!o.trace_dir.empty())
      std::cout << fmt::format("Chrome traces written under {}/ (open in ui.perfetto.dev)\n", o.trace_dir);
  }
  return 0;
}

}  // namespace pipesim::cli
