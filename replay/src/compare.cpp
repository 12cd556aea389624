#include "pipesim/replay/compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/json_text.hpp"

namespace pipesim::replay {

using sim::detail::JsonObject;

namespace {

constexpr std::int64_t kMaxNs = std::int64_t{1} << 60;

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - (q > 0 ? 1 : 0);
  return v[std::min(k, v.size() - 1)];
}

bool is_compute(const std::string& kind) {
  return kind == "forward" || kind == "backward" || kind == "backward_input" || kind == "backward_weight" ||
         kind == "recompute" || kind == "fill";
}

/// The profile figure that governs an op kind's duration.
std::string figure_for(const std::string& kind, double median_predicted_s) {
  if (median_predicted_s > 0 && median_predicted_s < 50e-6)
    return "gpu.launch_overhead_us (the mismatched ops are short: launch and latency dominate)";
  if (is_compute(kind))
    return "gpu.gemm_efficiency at these ops' GEMM sizes (or gpu.peak_tflops; memory-bound parts: "
           "gpu.hbm_GBps x hbm_efficiency)";
  if (kind == "optimizer") return "host.adam_params_per_s_by_threads (CPU steps) or gpu.hbm_GBps (GPU steps)";
  if (kind == "h2d" || kind == "d2h" || kind == "context_switch")
    return "node.pcie (lane_GBps, uplink_GBps) or the calibrated copy curve";
  if (kind == "nvme_read" || kind == "nvme_write") return "host.nvme bandwidth";
  return "the bandwidth of the links these transfers cross (node.nvlink allreduce_busbw_by_size inside a "
         "node, the NIC figures across nodes)";
}

}  // namespace

TimelineFile load_timeline(const std::string& path) {
  return parse_timeline(sim::detail::read_text_file(path), path);
}

TimelineFile parse_timeline(const std::string& json_text, const std::string& path) {
  const auto root = sim::detail::parse_json_text(json_text, path);
  JsonObject o(root, path, "");
  if (o.string("format") != "pipesim-timeline") o.fail("format", "expected \"pipesim-timeline\"");
  if (o.integer("version", 0, 1000) != 1) o.fail("version", "unsupported version; valid: 1");
  TimelineFile f;
  f.path = path;
  f.source = o.string_or("source", "simulated");
  {
    JsonObject m = o.object("metrics");  // the simulator's metrics: only these two are compared
    f.step_time_s = m.number("step_time_s", 0, 1e12);
    f.bubble_fraction = m.number("bubble_fraction", 0, 1);
  }
  o.accept("environment");
  const auto& ops = o.raw("ops");
  if (!ops.is_array()) o.fail("ops", "expected an array of ops");
  if (ops.size() > (std::size_t{1} << 28)) o.fail("ops", "too many ops; valid: at most 2^28");
  for (std::size_t i = 0; i < ops.size(); ++i) {
    JsonObject op(ops[i], path, fmt::format("/ops/{}", i));
    if (op.integer("op", 0, kMaxNs) != static_cast<std::int64_t>(i))
      op.fail("op", fmt::format("expected {}", i));
    TimedOp t;
    t.kind = op.string("kind");
    t.stream = static_cast<std::int32_t>(op.integer("stream", 0, 1 << 30));
    t.start_ns = op.integer("start_ns", -1, kMaxNs);
    t.end_ns = op.integer("end_ns", -1, kMaxNs);
    if (t.end_ns < t.start_ns) op.fail("end_ns", "ends before it starts");
    op.finish();
    f.ops.push_back(t);
  }
  o.finish();
  return f;
}

Comparison compare_timelines(const TimelineFile& p, const TimelineFile& m, int top) {
  if (p.ops.size() != m.ops.size())
    throw sim::InputError(m.path, "/ops",
                          fmt::format("{} ops, but {} has {}: not timelines of the same plan", m.ops.size(),
                                      p.path, p.ops.size()));
  Comparison c;
  c.predicted_step_s = p.step_time_s;
  c.measured_step_s = m.step_time_s;
  c.step_error = p.step_time_s > 0 ? m.step_time_s / p.step_time_s - 1 : 0;
  c.predicted_bubble = p.bubble_fraction;
  c.measured_bubble = m.bubble_fraction;
  std::map<std::string, std::vector<double>> errors;
  std::map<std::string, std::vector<double>> predicted_durations;
  std::map<std::string, KindError> kinds;
  std::map<std::int32_t, StreamBusy> streams;
  std::vector<OpMismatch> mismatches;
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const TimedOp &a = p.ops[i], &b = m.ops[i];
    if (a.kind != b.kind || a.stream != b.stream)
      throw sim::InputError(m.path, fmt::format("/ops/{}", i),
                            fmt::format("{} on stream {}, but {} has {} on stream {}: not the same plan",
                                        b.kind, b.stream, p.path, a.kind, a.stream));
    const double dp = static_cast<double>(a.end_ns - a.start_ns) / 1e9;
    const double dm = static_cast<double>(b.end_ns - b.start_ns) / 1e9;
    KindError& k = kinds[a.kind];
    k.kind = a.kind;
    ++k.ops;
    k.predicted_s += dp;
    k.measured_s += dm;
    if (dp > 0) {
      errors[a.kind].push_back(dm / dp - 1);
      predicted_durations[a.kind].push_back(dp);
    }
    StreamBusy& s = streams[a.stream];
    s.stream = a.stream;
    s.predicted_s += dp;
    s.measured_s += dm;
    mismatches.push_back({static_cast<std::int64_t>(i), a.kind, dp, dm});
  }
  for (auto& [name, k] : kinds) {
    k.median = quantile(errors[name], 0.5);
    k.p90 = quantile(errors[name], 0.9);
    c.kinds.push_back(k);
  }
  auto diff = [](double a, double b) { return std::abs(a - b); };
  std::stable_sort(c.kinds.begin(), c.kinds.end(), [&](const KindError& a, const KindError& b) {
    return diff(a.predicted_s, a.measured_s) > diff(b.predicted_s, b.measured_s);
  });
  for (const auto& [id, s] : streams) c.streams.push_back(s);
  std::stable_sort(mismatches.begin(), mismatches.end(), [&](const OpMismatch& a, const OpMismatch& b) {
    return diff(a.predicted_s, a.measured_s) > diff(b.predicted_s, b.measured_s);
  });
  mismatches.resize(std::min(mismatches.size(), static_cast<std::size_t>(std::max(0, top))));
  c.top = std::move(mismatches);
  if (!c.kinds.empty() && diff(c.kinds.front().predicted_s, c.kinds.front().measured_s) > 0) {
    const KindError& worst = c.kinds.front();
    c.advice = fmt::format(
        "{} ops account for most of the difference ({:+.1f}% in their summed time); "
        "recalibrate {}",
        worst.kind, worst.predicted_s > 0 ? 100 * (worst.measured_s / worst.predicted_s - 1) : 0.0,
        figure_for(worst.kind, quantile(predicted_durations[worst.kind], 0.5)));
  } else {
    c.advice = "the timelines agree op by op";
  }
  return c;
}

std::string comparison_table(const Comparison& c) {
  std::string out = fmt::format(
      "step time: predicted {:.6f} s, measured {:.6f} s, error {:+.2f}%\n"
      "bubble fraction: predicted {:.1f}%, measured {:.1f}%\n\n",
      c.predicted_step_s, c.measured_step_s, 100 * c.step_error, 100 * c.predicted_bubble,
      100 * c.measured_bubble);
  out += fmt::format("{:<18} {:>7} {:>13} {:>13} {:>11} {:>11}\n", "op kind", "ops", "predicted s",
                     "measured s", "median err", "p90 err");
  for (const auto& k : c.kinds)
    out += fmt::format("{:<18} {:>7} {:>13.6f} {:>13.6f} {:>10.1f}% {:>10.1f}%\n", k.kind, k.ops,
                       k.predicted_s, k.measured_s, 100 * k.median, 100 * k.p90);
  out += fmt::format("\n{:<8} {:>13} {:>13}\n", "stream", "busy pred s", "busy meas s");
  for (const auto& s : c.streams)
    out += fmt::format("{:<8} {:>13.6f} {:>13.6f}\n", s.stream, s.predicted_s, s.measured_s);
  out += "\nmost mismatched ops:\n";
  for (const auto& o : c.top)
    out += fmt::format("  op {} {}: predicted {:.6f} s, measured {:.6f} s\n", o.op, o.kind, o.predicted_s,
                       o.measured_s);
  out += "advice: " + c.advice + "\n";
  return out;
}

std::string comparison_json(const Comparison& c) {
  nlohmann::ordered_json kinds = nlohmann::ordered_json::array(), streams = nlohmann::ordered_json::array(),
                         top = nlohmann::ordered_json::array();
  for (const auto& k : c.kinds)
    kinds.push_back({{"kind", k.kind},
                     {"ops", k.ops},
                     {"predicted_s", k.predicted_s},
                     {"measured_s", k.measured_s},
                     {"median_error", k.median},
                     {"p90_error", k.p90}});
  for (const auto& s : c.streams)
    streams.push_back(
        {{"stream", s.stream}, {"predicted_busy_s", s.predicted_s}, {"measured_busy_s", s.measured_s}});
  for (const auto& o : c.top)
    top.push_back(
        {{"op", o.op}, {"kind", o.kind}, {"predicted_s", o.predicted_s}, {"measured_s", o.measured_s}});
  nlohmann::ordered_json j{{"predicted_step_time_s", c.predicted_step_s},
                           {"measured_step_time_s", c.measured_step_s},
                           {"step_time_error", c.step_error},
                           {"predicted_bubble_fraction", c.predicted_bubble},
                           {"measured_bubble_fraction", c.measured_bubble},
                           {"op_kinds", kinds},
                           {"streams", streams},
                           {"most_mismatched_ops", top},
                           {"advice", c.advice}};
  return pipesim::sim::json_text(j, 2) + "\n";
}

}  // namespace pipesim::replay
