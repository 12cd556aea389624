#include "pipesim/calibrate/host_info.hpp"

#include <sched.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

namespace pipesim::calibrate {

namespace {

std::string read_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

/// sysfs cache sizes: "32768K", "1M", or plain bytes.
std::int64_t parse_cache_size(const std::string& text) {
  std::size_t used = 0;
  std::int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  const std::string unit = text.substr(used);
  if (unit == "K") return v << 10;
  if (unit == "M") return v << 20;
  if (unit == "G") return v << 30;
  return unit.empty() ? v : 0;
}

}  // namespace

std::int64_t last_level_cache_bytes(const std::string& cpu_root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // Per instance (identified by the CPUs that share it): its level and size; the highest level wins.
  std::set<std::string> seen;
  int top_level = 0;
  std::int64_t total = 0;
  for (const auto& cpu : fs::directory_iterator(cpu_root, ec)) {
    const std::string name = cpu.path().filename().string();
    if (name.rfind("cpu", 0) != 0 || name.size() < 4 ||
        name.find_first_not_of("0123456789", 3) != std::string::npos)
      continue;
    int best_level = 0;
    std::string best_shared;
    std::int64_t best_size = 0;
    for (const auto& index : fs::directory_iterator(cpu.path() / "cache", ec)) {
      if (read_line(index.path() / "type") == "Instruction") continue;
      int level = 0;
      try {
        level = std::stoi(read_line(index.path() / "level"));
      } catch (const std::exception&) {
        continue;
      }
      if (level > best_level) {
        best_level = level;
        best_size = parse_cache_size(read_line(index.path() / "size"));
        best_shared = read_line(index.path() / "shared_cpu_list");
      }
    }
    if (best_level == 0) continue;
    if (best_level > top_level) {
      top_level = best_level;
      seen.clear();
      total = 0;
    }
    if (best_level == top_level && seen.insert(best_shared.empty() ? name : best_shared).second)
      total += best_size;
  }
  return total;
}

HostInfo probe_host() {
  HostInfo h;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) h.hostname = name;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) h.cpu_model = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  if (h.cpu_model.empty()) h.cpu_model = "unknown CPU";
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) h.cores = CPU_COUNT(&set);
  if (h.cores < 1) h.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  h.dram_bytes =
      static_cast<std::int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
  h.last_level_cache_bytes = last_level_cache_bytes();
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  h.date_utc = buf;
  return h;
}

}  // namespace pipesim::calibrate
