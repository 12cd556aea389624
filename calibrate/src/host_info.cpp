#include "pipesim/calibrate/host_info.hpp"

#include <sched.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <thread>

namespace pipesim::calibrate {

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
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  h.date_utc = buf;
  return h;
}

}  // namespace pipesim::calibrate
