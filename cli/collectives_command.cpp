#include "collectives_command.hpp"

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
  return a == sim::NcclAlgorithm::kTree ? "tree" : a == sim::NcclAlgorithm::kPat ? "pat" : "ring";
}

const char* protocol_name(sim::NcclProtocol p) {
  return p == sim::NcclProtocol::kLL ? "LL" : p == sim::NcclProtocol::kLL128 ? "LL128" : "Simple";
}

}  // namespace

int run_collectives(const CollectivesOptions& o) {
  const sim::HardwareProfile hw = sim::load_hardware_profile(o.hw);
  const std::int32_t per_node = o.gpus_per_node > 0 ? o.gpus_per_node : hw.node.gpus;
  if (o.min_bytes > o.max_bytes)
    throw sim::InputError(
        sim::Option{"min-bytes"}, "",
        fmt::format("{} is above --max-bytes {}; valid: at most it", o.min_bytes, o.max_bytes));
  const sim::CollectiveKind kind = o.op == "all-gather"       ? sim::CollectiveKind::kAllGather
                                   : o.op == "reduce-scatter" ? sim::CollectiveKind::kReduceScatter
                                                              : sim::CollectiveKind::kAllReduce;
  nlohmann::json rows = nlohmann::json::array();
  std::string table = fmt::format(
      "{} on {}: {} GPUs a node x {} node{} (predicted; bus bandwidth as nccl-tests reports it)\n"
      "{:>14} {:>12} {:>10} {:>10}  {}\n",
      o.op, hw.name, per_node, o.nodes, o.nodes == 1 ? "" : "s", "size (B)", "time (us)", "algbw GB/s",
      "busbw GB/s", "algorithm");
  for (std::int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor) {
    const sim::CollectiveProbe p = sim::probe_collective(hw, kind, per_node, o.nodes, bytes);
    const double us = static_cast<double>(p.time) / 1e3;
    const bool measured_curve = p.nccl.latency_us == 0 && p.nccl.wire_factor == 1;
    const std::string algorithm = measured_curve ? "measured bus bandwidth"
                                                 : fmt::format("{} {}", algorithm_name(p.nccl.algorithm),
                                                               protocol_name(p.nccl.protocol));
    table += fmt::format("{:>14} {:>12.1f} {:>10.2f} {:>10.2f}  {}\n", bytes, us, p.algbw_GBps, p.busbw_GBps,
                         algorithm);
    rows.push_back({{"bytes", bytes},
                    {"time_us", us},
                    {"algbw_GBps", p.algbw_GBps},
                    {"busbw_GBps", p.busbw_GBps},
                    {"algorithm", algorithm},
                    {"nccl_latency_us", p.nccl.latency_us}});
    if (bytes > o.max_bytes / o.step_factor) break;
  }
  if (o.format == "json")
    std::cout << nlohmann::json{{"hw", hw.name},
                                {"op", o.op},
                                {"gpus_per_node", per_node},
                                {"nodes", o.nodes},
                                {"sizes", rows}}
                     .dump(2)
              << "\n";
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
