// Standalone CPU calibration benchmarks (Google Benchmark flags apply, e.g. --benchmark_repetitions,
// --benchmark_format=json, --benchmark_filter=cpu_adam). Thread counts: every count up to this machine's
// cores.
#include <benchmark/benchmark.h>

#include "pipesim/calibrate/cpu_benchmarks.hpp"
#include "pipesim/calibrate/host_info.hpp"

int main(int argc, char** argv) {
  using namespace pipesim::calibrate;
  CpuBenchOptions o;
  o.threads = default_thread_counts(probe_host().cores, false);
  o.grad_types = {GradType::kBf16, GradType::kFp16, GradType::kFp32};
  register_cpu_benchmarks(o);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
