// What machine this is, for calibration provenance: host name, CPU model, cores, DRAM, date (UTC).
#pragma once

#include <cstdint>
#include <string>

namespace pipesim::calibrate {

struct HostInfo {
  std::string hostname;
  std::string cpu_model;
  int cores = 1;  ///< logical CPUs this process may use
  std::int64_t dram_bytes = 0;
  /// The last-level cache of the whole machine: the sum over its distinct instances (one per socket, or per
  /// core complex on AMD), from sysfs; 0 when the system does not say.
  std::int64_t last_level_cache_bytes = 0;
  std::string date_utc;  ///< ISO 8601
};

HostInfo probe_host();

/// Every array a timed CPU kernel streams is at least this many times the machine's last-level cache, so that
/// the rates are DRAM's, not the cache's.
inline constexpr std::int64_t kCacheMultiple = 4;

/// The machine's last-level cache read from `cpu_root` (sysfs' /sys/devices/system/cpu layout): for every
/// cpuN, its highest-level data or unified cache; each instance (by its shared_cpu_list) counted once.
std::int64_t last_level_cache_bytes(const std::string& cpu_root = "/sys/devices/system/cpu");

}  // namespace pipesim::calibrate
