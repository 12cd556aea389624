// `pipesim calibrate`: measures this machine (CPU Adam, memory bandwidth; CUDA copies, GEMMs, launches when a
// device is present) and writes a hardware profile that `pipesim simulate --hw FILE` reads: the measured
// figures merged over a base profile, each with its source, plus provenance and the raw measurements beside
// it.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "pipesim/sim/hardware/hardware.hpp"

namespace pipesim::calibrate {

struct CalibrateOptions {
  /// Profile (name or file) for the figures not measured here; empty: the shipped profile of this machine's
  /// GPU (base_for_gpu), or kFallbackBase without one.
  std::string base;
  bool quick = false;     ///< smaller arrays, fewer thread counts and samples (well under a minute)
  bool cpu_only = false;  ///< skip the CUDA benchmarks
  std::string out;        ///< profile to write; raw measurements go beside it
  std::string name;       ///< profile name; default: the file name without extension
};

/// The base profile when no GPU is measured, or none of the shipped profiles is of this GPU.
inline constexpr const char* kFallbackBase = "rtx4090-8x";

/// The shipped profile of the GPU a CUDA device names itself ("NVIDIA H100 80GB HBM3" -> h100-sxm-8x): the
/// first, by name, whose gpu.model's identifying word (its first word of three or more characters with a
/// digit: H100, A800, 4090, MI300X) is a word of `device_name`; "" when none is.
std::string base_for_gpu(const std::string& device_name);

struct CalibrateReport {
  sim::HardwareProfile profile;
  std::string cpu_raw_path;          ///< Google Benchmark JSON of the CPU benchmarks
  std::string cuda_raw_path;         ///< empty when CUDA did not run
  std::vector<std::string> skipped;  ///< what was not measured, and why
};

/// Runs the calibration and writes `options.out` (+ raw files). Progress lines go to `progress`.
/// Throws sim::InputError for bad options (unknown base, unwritable output).
CalibrateReport run_calibration(const CalibrateOptions& options, std::ostream& progress);

}  // namespace pipesim::calibrate
