#include "collectives_command.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipesim/calibrate/calibrate.hpp"
#include "pipesim/calibrate/nccl_tests_output.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/output_file.hpp"
#include "pipesim/sim/job/collective_probe.hpp"

namespace pipesim::cli {

namespace {

const char* algorithm_name(sim::NcclAlgorithm a) {
  switch (a) {
    case sim::NcclAlgorithm::kTree:
      return "tree";
    case sim::NcclAlgorithm::kPat:
      return "pat";
    case sim::NcclAlgorithm::kNvlsTree:
      return "nvls-tree";
    case sim::NcclAlgorithm::kRing:
      break;
  }
  return "ring";
}

const char* protocol_name(sim::NcclProtocol p) {
  return p == sim::NcclProtocol::kLL ? "LL" : p == sim::NcclProtocol::kLL128 ? "LL128" : "Simple";
}

}  // namespace

int run_collectives(const CollectivesOptions& o) {
  const sim::HardwareProfile hw = sim::load_hardware_profile(o.hw);
  std::int32_t per_node = o.gpus_per_node > 0 ? o.gpus_per_node : hw.node.gpus, nodes = o.nodes;
  std::string op = o.op;
  // The sizes to price, and where a run of nccl-tests is given, what it measured at each.
  std::vector<sim::CurvePoint> sizes;
  if (!o.against.empty()) {
    const calibrate::NcclTestsRun run = calibrate::read_nccl_tests_output(o.against);
    if (run.ranks % run.nodes != 0 || run.ranks / run.nodes > hw.node.gpus)
      throw sim::InputError(
          o.against, "",
          fmt::format("{} ranks on {} nodes; valid: as many on each node, at most the {} of a "
                      "{} node",
                      run.ranks, run.nodes, hw.node.gpus, hw.name));
    per_node = run.ranks / run.nodes, nodes = run.nodes, sizes = run.busbw;
    op = run.op == "all_gather" ? "all-gather" : run.op == "reduce_scatter" ? "reduce-scatter" : "all-reduce";
  } else {
    if (o.min_bytes > o.max_bytes)
      throw sim::InputError(
          sim::Option{"min-bytes"}, "",
          fmt::format("{} is above --max-bytes {}; valid: at most it", o.min_bytes, o.max_bytes));
    for (std::int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor) {
      sizes.push_back({static_cast<double>(bytes), -1});
      if (bytes > o.max_bytes / o.step_factor) break;
    }
  }
  const sim::CollectiveKind kind = op == "all-gather"       ? sim::CollectiveKind::kAllGather
                                   : op == "reduce-scatter" ? sim::CollectiveKind::kReduceScatter
                                                            : sim::CollectiveKind::kAllReduce;
  const bool against = !o.against.empty();
  nlohmann::json rows = nlohmann::json::array();
  std::string table = fmt::format(
      "{} on {}: {} GPUs a node x {} node{} (predicted{}; bus bandwidth as nccl-tests reports it)\n"
      "{:>14} {:>12} {:>10} {:>10}{}  {}\n",
      op, hw.name, per_node, nodes, nodes == 1 ? "" : "s", against ? ", against " + o.against : "",
      "size (B)", "time (us)", "algbw GB/s", "busbw GB/s",
      against ? fmt::format(" {:>10} {:>8}", "measured", "error") : "", "algorithm");
  std::vector<double> errors;
  for (const sim::CurvePoint& size : sizes) {
    const auto bytes = static_cast<std::int64_t>(size.x);
    const sim::CollectiveProbe p = sim::probe_collective(hw, kind, per_node, nodes, bytes);
    const double us = static_cast<double>(p.time) / 1e3;
    const bool measured_curve = p.nccl.latency_us == 0 && p.nccl.wire_factor == 1;
    const std::string algorithm = measured_curve ? "measured bus bandwidth"
                                                 : fmt::format("{} {}", algorithm_name(p.nccl.algorithm),
                                                               protocol_name(p.nccl.protocol));
    nlohmann::json row = {{"bytes", bytes},
                          {"time_us", us},
                          {"algbw_GBps", p.algbw_GBps},
                          {"busbw_GBps", p.busbw_GBps},
                          {"algorithm", algorithm},
                          {"nccl_latency_us", p.nccl.latency_us}};
    std::string compared;
    if (against && size.y > 0) {
      const double error = 100 * (p.busbw_GBps - size.y) / size.y;
      errors.push_back(std::abs(error));
      row["measured_busbw_GBps"] = size.y;
      row["error_pct"] = error;
      compared = fmt::format(" {:>10.2f} {:>+7.1f}%", size.y, error);
    } else if (against) {
      compared = fmt::format(" {:>10} {:>8}", "-", "");
    }
    table += fmt::format("{:>14} {:>12.1f} {:>10.2f} {:>10.2f}{}  {}\n", bytes, us, p.algbw_GBps,
                         p.busbw_GBps, compared, algorithm);
    rows.push_back(row);
  }
  nlohmann::json report = {
      {"hw", hw.name}, {"op", op}, {"gpus_per_node", per_node}, {"nodes", nodes}, {"sizes", rows}};
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    const double median = errors.size() % 2 ? errors[errors.size() / 2]
                                            : (errors[errors.size() / 2 - 1] + errors[errors.size() / 2]) / 2;
    report["median_abs_error_pct"] = median;
    report["largest_abs_error_pct"] = errors.back();
    table += fmt::format("against the measured bus bandwidth: median error {:.1f}%, largest {:.1f}%\n",
                         median, errors.back());
  }
  if (o.format == "json")
    std::cout << report.dump(2) << "\n";
  else
    std::cout << table;
  return 0;
}

int run_calibrate_from_nccl_tests(const std::vector<std::string>& files, const std::string& base,
                                  const std::string& out, const std::string& name,
                                  std::int64_t message_bytes) {
  std::vector<calibrate::NcclTestsRun> runs;
  for (const std::string& f : files) runs.push_back(calibrate::read_nccl_tests_output(f));
  std::string base_name = base;
  if (base_name.empty()) base_name = calibrate::base_for_gpu(runs.front().device);
  if (base_name.empty())
    throw sim::InputError(
        sim::Option{"base"}, "",
        fmt::format("no shipped profile for '{}'; give the profile these nodes are as --base",
                    runs.front().device));
  sim::HardwareProfile hw =
      calibrate::with_nccl_tests(sim::load_hardware_profile(base_name), runs, message_bytes);
  hw.name = name.empty() ? std::filesystem::path(out).stem().string() : name;
  sim::write_output_file(out, sim::hardware_profile_to_json(hw));
  const char* kinds[] = {"all_reduce", "all_gather", "reduce_scatter"};
  std::cout << fmt::format("{}: bus bandwidth at {} bytes by node count (base {})\n", hw.name,
                           hw.network.busbw_message_bytes, base_name);
  for (std::size_t k = 0; k < 3; ++k)
    for (const sim::CurvePoint& p : hw.network.busbw_by_nodes[k])
      std::cout << fmt::format(
          "  {:<14} {:>5} nodes {:>9.2f} GB/s, NICs at {:.1f} GB/s a GPU\n", kinds[k], static_cast<int>(p.x),
          p.y,
          sim::network_nic_GBps(hw, static_cast<sim::CollectiveKind>(k), static_cast<std::int32_t>(p.x)));
  std::cout << fmt::format("wrote {}\n", out);
  return 0;
}

}  // namespace pipesim::cli
