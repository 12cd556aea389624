#include "pipesim/calibrate/nccl_tests_output.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::calibrate {

namespace {

constexpr std::uintmax_t kMaxOutputBytes = std::uintmax_t{64} << 20;
// The collectives a profile holds by node count, in CollectiveKind's order.
const std::vector<std::string> kOps = {"all_reduce", "all_gather", "reduce_scatter"};

std::vector<std::string> tokens_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

/// The line without mpirun's --tag-output prefix ("[1,0]<stdout>:").
std::string untagged(const std::string& line) {
  if (line.empty() || line[0] != '[') return line;
  const std::size_t end = line.find(">:");
  return end != std::string::npos && end < 40 ? line.substr(end + 2) : line;
}

bool parse_int(const std::string& s, std::int64_t& v) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  return ec == std::errc() && p == end;
}

bool parse_number(const std::string& s, double& v) {
  try {
    std::size_t used = 0;
    v = std::stod(s, &used);
    return used == s.size() && std::isfinite(v);
  } catch (const std::exception&) {
    return false;
  }
}

/// "all_reduce" for "all_reduce_perf" or "./build/all_reduce_perf_mpi"; empty for anything else.
std::string op_named_in(const std::string& text) {
  for (const std::string& op : kOps)
    if (text.find(op) != std::string::npos) return op;
  return "";
}

}  // namespace

NcclTestsRun parse_nccl_tests_output(const std::string& text, const std::string& file) {
  NcclTestsRun run;
  run.file = file;
  std::set<std::string> hosts;
  int busbw_column = -1;
  std::istringstream in(text);
  int number = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++number;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    const std::string line = untagged(raw);
    const std::vector<std::string> t = tokens_of(line);
    if (t.empty()) continue;
    const std::string where = fmt::format("line {}", number);
    if (t[0] == "#" || t[0][0] == '#') {
      if (const std::size_t at = line.find("Collective test starting:"); at != std::string::npos) {
        run.op = op_named_in(line.substr(at));
        if (run.op.empty())
          throw sim::InputError(file, where,
                                "a collective pipesim does not price by node count; valid: all_reduce_perf, "
                                "all_gather_perf, reduce_scatter_perf");
      } else if (t.size() >= 2 && t[1] == "Rank") {
        const auto on = std::find(t.begin(), t.end(), "on");
        if (on == t.end() || on + 1 == t.end())
          throw sim::InputError(file, where, "a rank line without its host ('on HOST')");
        hosts.insert(*(on + 1));
        ++run.ranks;
        const auto bus = std::find_if(on, t.end(), [](const std::string& s) { return s[0] == '['; });
        if (run.device.empty() && bus != t.end() && bus + 1 != t.end()) {
          std::string name;
          for (auto it = bus + 1; it != t.end(); ++it) name += (name.empty() ? "" : " ") + *it;
          run.device = name;
        }
      } else if (busbw_column < 0 && std::find(t.begin(), t.end(), "size") != t.end()) {
        // The column header: the first busbw is the out-of-place one; a data row has no leading '#'.
        const auto column = std::find(t.begin(), t.end(), "busbw");
        if (column != t.end()) busbw_column = static_cast<int>(column - t.begin()) - (t[0] == "#" ? 1 : 0);
      }
      continue;
    }
    std::int64_t bytes = 0;
    if (!parse_int(t[0], bytes)) continue;  // NCCL's and the launcher's own lines
    if (busbw_column < 0)
      throw sim::InputError(file, where, "a result row before the column header ('# size ... busbw')");
    double busbw = 0;
    if (static_cast<int>(t.size()) <= busbw_column || !parse_number(t[busbw_column], busbw) || busbw < 0 ||
        bytes <= 0)
      throw sim::InputError(
          file, where, "expected a size in bytes and a bus bandwidth of 0 GB/s or more in the busbw column");
    if (!run.busbw.empty() && static_cast<double>(bytes) <= run.busbw.back().x)
      throw sim::InputError(file, where, "message sizes must increase down the table");
    run.busbw.push_back({static_cast<double>(bytes), busbw});
  }
  if (run.op.empty()) run.op = op_named_in(std::filesystem::path(file).filename().string());
  if (run.op.empty())
    throw sim::InputError(
        file, "",
        "no '# Collective test starting:' line and no collective in the file's name; valid: "
        "the output of all_reduce_perf, all_gather_perf or reduce_scatter_perf");
  if (run.busbw.empty()) throw sim::InputError(file, "", "no result rows (size, count, ... busbw)");
  if (run.ranks == 0) throw sim::InputError(file, "", "no '#  Rank N ... on HOST' lines to count nodes by");
  run.nodes = static_cast<int>(hosts.size());
  return run;
}

NcclTestsRun read_nccl_tests_output(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw sim::InputError(path, "", "cannot read the file");
  if (size > kMaxOutputBytes)
    throw sim::InputError(path, "",
                          fmt::format("{} bytes; valid: an nccl-tests output of at most 64 MiB", size));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) throw sim::InputError(path, "", "cannot read the file");
  return parse_nccl_tests_output(text.str(), path);
}

sim::HardwareProfile with_nccl_tests(const sim::HardwareProfile& hw, const std::vector<NcclTestsRun>& runs,
                                     std::int64_t message_bytes) {
  if (runs.empty()) throw sim::InputError(sim::Option{"from_nccl_tests"}, "", "no nccl-tests output given");
  if (message_bytes <= 0) {
    double common = runs.front().busbw.back().x;
    for (const NcclTestsRun& r : runs) common = std::min(common, r.busbw.back().x);
    message_bytes = static_cast<std::int64_t>(common);
  }
  std::map<std::string, std::map<int, double>> by_op;
  std::string sources;
  for (const NcclTestsRun& r : runs) {
    if (r.ranks % r.nodes != 0 || r.ranks / r.nodes != hw.node.gpus)
      throw sim::InputError(
          r.file, "",
          fmt::format("{} ranks on {} nodes; valid: every GPU of each node, {} a node as {} has", r.ranks,
                      r.nodes, hw.node.gpus, hw.name));
    const auto point = std::find_if(r.busbw.begin(), r.busbw.end(), [&](const sim::CurvePoint& p) {
      return p.x == static_cast<double>(message_bytes);
    });
    if (point == r.busbw.end())
      throw sim::InputError(
          r.file, "",
          fmt::format("no result at {} bytes (the size taken from every run); it ran {} to {}", message_bytes,
                      static_cast<std::int64_t>(r.busbw.front().x),
                      static_cast<std::int64_t>(r.busbw.back().x)));
    if (point->y < 1e-3)
      throw sim::InputError(
          r.file, "", fmt::format("{} GB/s at {} bytes; valid: 0.001 GB/s or more", point->y, message_bytes));
    if (!by_op[r.op].emplace(r.nodes, point->y).second)
      throw sim::InputError(
          r.file, "",
          fmt::format("a second {}_perf run on {} nodes; give one per collective and node count", r.op,
                      r.nodes));
    sources += fmt::format("{}{} ({}_perf, {} nodes x {} GPUs{})", sources.empty() ? "" : "; ",
                           std::filesystem::path(r.file).filename().string(), r.op, r.nodes, hw.node.gpus,
                           r.device.empty() ? "" : ", " + r.device);
  }
  sim::HardwareProfile out = hw;
  out.network.busbw_message_bytes = message_bytes;
  for (std::size_t k = 0; k < kOps.size(); ++k) {
    out.network.busbw_by_nodes[k].clear();
    if (const auto it = by_op.find(kOps[k]); it != by_op.end())
      for (const auto& [nodes, busbw] : it->second)
        out.network.busbw_by_nodes[k].push_back({static_cast<double>(nodes), busbw});
  }
  out.network.sources["collective_busbw_by_nodes"] = fmt::format(
      "nccl-tests outputs, the out-of-place bus bandwidth at {} bytes (pipesim calibrate --from-nccl-tests): "
      "{}",
      message_bytes, sources);
  return out;
}

}  // namespace pipesim::calibrate
