// Google Benchmark registrations of the CPU calibration: CPU Adam (params/s) and STREAM copy/triad/update
// (bytes/s) over sampled thread counts. Used by the standalone `pipesim_cpu_bench` program and by `pipesim
// calibrate`. Names: "cpu_adam/<grad>/<isa>/threads:<T>", "stream_{copy,triad,update}/threads:<T>".
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pipesim/calibrate/cpu_adam.hpp"
#include "pipesim/calibrate/host_info.hpp"

namespace pipesim::calibrate {

struct CpuBenchOptions {
  std::vector<int> threads;                 ///< thread counts to measure, ascending
  std::size_t adam_params = 64u << 20;      ///< parameters per Adam step (DRAM-bound: far beyond the caches)
  std::size_t stream_elements = 32u << 20;  ///< doubles per STREAM array
  std::vector<GradType> grad_types = {GradType::kBf16};
  Isa isa = best_isa();
  int repetitions = 5;
  double min_time_s = 0.2;
  /// A kernel's sweep stops once doubling its threads gained less than this share (0: never stops early).
  double converged_gain = 0.05;
};

/// 1, 2, 4, ... and `cores`: the rates of thread counts in between are interpolated.
std::vector<int> default_thread_counts(int cores);

/// The calibration's sizes on `host`: each STREAM array and the Adam step's footprint at least
/// kCacheMultiple x its last-level cache; quick runs use fewer repetitions and a shorter minimum time.
CpuBenchOptions cpu_bench_options(const HostInfo& host, bool quick);

/// The early stop of thread sweeps: a kernel ("stream_copy", "cpu_adam/bf16/avx2") has converged once a
/// doubling of its threads gained less than `min_gain` over the previous count; its larger counts are then
/// skipped (the profile's curve stays flat beyond its last point).
class ThreadSweep {
 public:
  explicit ThreadSweep(double min_gain) : min_gain_(min_gain) {}
  void record(const std::string& kernel, int threads, double rate);
  bool converged(const std::string& kernel) const;
  /// The largest thread count measured before convergence (0: not converged).
  int converged_at(const std::string& kernel) const;

 private:
  struct Last {
    int threads = 0;
    double rate = 0;
  };
  double min_gain_;
  std::map<std::string, Last> last_;
  std::map<std::string, int> converged_at_;
};

/// The kernel of a benchmark name: "stream_copy/threads:4" -> "stream_copy".
std::string kernel_of(const std::string& benchmark_name);

/// Registers the benchmarks with Google Benchmark (call before RunSpecifiedBenchmarks). `sweep` (may be
/// null) must outlive the run; the benchmarks of a converged kernel skip themselves.
void register_cpu_benchmarks(const CpuBenchOptions& options, const ThreadSweep* sweep = nullptr);

}  // namespace pipesim::calibrate
