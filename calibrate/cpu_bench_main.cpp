// Standalone CPU calibration benchmarks (Google Benchmark flags apply, e.g. --benchmark_repetitions,
// --benchmark_format=json, --benchmark_filter=cpu_adam). Thread counts 1, 2, 4, ... and this machine's cores,
// each sweep to the end; array sizes as `pipesim calibrate` chooses them.
#include <benchmark/benchmark.h>

#include "pipesim/calibrate/cpu_benchmarks.hpp"
#include "pipesim/calibrate/host_info.hpp"

int main(int argc, char** argv) {
  using namespace pipesim::calibrate;
  CpuBenchOptions o = cpu_bench_options(probe_host(), false);
  o.grad_types = {GradType::kBf16, GradType::kFp16, GradType::kFp32};
  register_cpu_benchmarks(o);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
