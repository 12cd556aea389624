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
  std::string date_utc;  ///< ISO 8601
};

HostInfo probe_host();

}  // namespace pipesim::calibrate
