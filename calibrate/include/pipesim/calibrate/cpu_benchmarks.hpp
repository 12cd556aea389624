// Google Benchmark registrations of the CPU calibration: CPU Adam (params/s) and STREAM copy/triad (bytes/s)
// over thread counts. Used by the standalone `pipesim_cpu_bench` program and by `pipesim calibrate`.
// Names: "cpu_adam/<grad>/<isa>/threads:<T>", "stream_{copy,triad,update}/threads:<T>".
#pragma once

#include <cstddef>
#include <vector>

#include "pipesim/calibrate/cpu_adam.hpp"

namespace pipesim::calibrate {

struct CpuBenchOptions {
  std::vector<int> threads;                 ///< thread counts to measure
  std::size_t adam_params = 64u << 20;      ///< parameters per Adam step (DRAM-bound: far beyond the caches)
  std::size_t stream_elements = 32u << 20;  ///< doubles per STREAM array
  std::vector<GradType> grad_types = {GradType::kBf16};
  Isa isa = best_isa();
  int repetitions = 5;
  double min_time_s = 0.2;
};

/// 1, 2, 4, ... and `cores` (every count up to 16 unless quick).
std::vector<int> default_thread_counts(int cores, bool quick);

/// Registers the benchmarks with Google Benchmark (call before RunSpecifiedBenchmarks).
void register_cpu_benchmarks(const CpuBenchOptions& options);

}  // namespace pipesim::calibrate
