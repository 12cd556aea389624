#include "replay_command.hpp"

#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipesim/replay/compare.hpp"
#include "pipesim/replay/refit.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/json_text.hpp"
#include "pipesim/sim/core/output_file.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/report/invariants.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "pipesim/sim/report/trace.hpp"

namespace pipesim::cli {

namespace {

/// The measured timeline in the simulator's format, with where it ran beside the metrics.
std::string measured_timeline_json(const sim::Plan& plan, const replay::ReplayResult& r,
                                   const sim::Metrics& m) {
  std::ostringstream text;
  sim::write_timeline(text, plan, r.timeline, m);
  std::string s = text.str();
  const std::string anchor = ",\n\"metrics\":";
  const auto at = s.find(anchor);
  if (at != std::string::npos) s.insert(at, ",\n\"environment\":" + replay::environment_json(r.environment));
  return s;
}

}  // namespace

int run_replay(const ReplayCommandOptions& o) {
  const sim::Plan plan = sim::load_plan(o.plan_file);
  const replay::ReplayResult r = replay::replay_plan(plan, o.replay);
  if (!r.root) return 0;  // multi-node: rank 0 reports
  const sim::Metrics measured = sim::compute_metrics(plan, r.timeline);
  const sim::Timeline predicted_timeline = sim::Engine{}.run(plan);
  const sim::Metrics predicted = sim::compute_metrics(plan, predicted_timeline);
  sim::check_run(plan, predicted_timeline, predicted);
  // A measured run's op times come from clocks on several streams: its metrics are held to the invariants,
  // its op order is the replay engine's to keep, and its speed is the machine's, which the profile's peak
  // (a datasheet's, or the host backend's own measurement) does not bound.
  sim::check_metrics(measured, plan.meta.global_batch, plan.meta.seq, /*against_peak=*/false);
  if (!o.out.empty()) sim::write_output_file(o.out, measured_timeline_json(plan, r, measured));
  if (!o.trace.empty()) {
    sim::OutputFile out(o.trace);
    sim::write_chrome_trace(out.stream(), plan, r.timeline);
    out.commit();
  }
  const double error = predicted.step_time_s > 0 ? measured.step_time_s / predicted.step_time_s - 1 : 0;
  if (o.format == "json") {
    nlohmann::ordered_json j{
        {"plan", o.plan_file},
        {"environment", nlohmann::ordered_json::parse(replay::environment_json(r.environment))},
        {"predicted_step_time_s", predicted.step_time_s},
        {"measured_step_time_s", measured.step_time_s},
        {"step_time_error", error},
        {"predicted_bubble_fraction", predicted.bubble_fraction},
        {"measured_bubble_fraction", measured.bubble_fraction}};
    std::cout << pipesim::sim::json_text(j, 2) << "\n";
    return 0;
  }
  const auto& e = r.environment;
  std::cout << fmt::format(
      "{}: {} on {}, {} ops replayed on {} ({}; {} stream threads, {:.1f} GFLOP/s per "
      "thread{})\n",
      o.plan_file, plan.meta.schedule, plan.hw.name, plan.ops.size(), e.backend, e.host, e.threads,
      e.compute_gflops_per_thread,
      e.work_scale < 1 ? fmt::format(", work x {:g}, times / {:g}", e.work_scale, e.work_scale) : "");
  std::string runs;
  for (double s : e.iteration_s) runs += fmt::format("{}{:.6f}", runs.empty() ? "" : ", ", s);
  std::cout << fmt::format("measured runs (s): {} (the median is kept)\n", runs);
  std::cout << fmt::format("step time: predicted {:.6f} s, measured {:.6f} s, error {:+.2f}%\n",
                           predicted.step_time_s, measured.step_time_s, 100 * error);
  std::cout << fmt::format("bubble fraction: predicted {:.1f}%, measured {:.1f}%\n",
                           100 * predicted.bubble_fraction, 100 * measured.bubble_fraction);
  return 0;
}

int run_refit(const std::string& measured, const std::string& plan_file, const std::string& base,
              const std::string& out, const std::string& name) {
  if (plan_file.empty())
    throw sim::InputError("--plan", "", "required with --from-replay: the plan that was replayed");
  sim::Plan plan = sim::load_plan(plan_file);
  const replay::TimelineFile timeline = replay::load_timeline(measured);
  const sim::HardwareProfile base_hw = base.empty() ? plan.hw : sim::load_hardware_profile(base);
  const replay::RefitReport r = replay::refit_profile(plan, timeline, base_hw, name);
  sim::write_output_file(out, sim::hardware_profile_to_json(r.profile));
  auto step_with = [&](const sim::HardwareProfile& hw) {
    plan.hw = hw;
    return sim::compute_metrics(plan, sim::Engine{}.run(plan)).step_time_s;
  };
  const double before = step_with(base_hw), after = step_with(r.profile);
  std::cout << fmt::format(
      "wrote {}: GEMM efficiency from {} compute ops, copy bandwidth from {} copies, Adam rate "
      "from {} CPU steps\n",
      out, r.compute_ops, r.copy_ops, r.optimizer_ops);
  for (const auto& note : r.notes) std::cout << "  " << note << "\n";
  std::cout << fmt::format(
      "step time of the plan: measured {:.6f} s; predicted {:.6f} s with {} ({:+.2f}%), "
      "{:.6f} s refit ({:+.2f}%)\n",
      timeline.step_time_s, before, base_hw.name,
      timeline.step_time_s > 0 ? 100 * (before / timeline.step_time_s - 1) : 0.0, after,
      timeline.step_time_s > 0 ? 100 * (after / timeline.step_time_s - 1) : 0.0);
  return 0;
}

int run_compare(const std::string& predicted, const std::string& measured, const std::string& format,
                int top) {
  const replay::Comparison c =
      replay::compare_timelines(replay::load_timeline(predicted), replay::load_timeline(measured), top);
  std::cout << (format == "json" ? replay::comparison_json(c) : replay::comparison_table(c));
  return 0;
}

}  // namespace pipesim::cli
