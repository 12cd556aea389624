// What calibration and replay time runs on real data at real sizes: every timed buffer holds pseudo-random
// operands (never one constant, never zeros), every STREAM array and Adam step is at least 4x the machine's
// last-level cache (read from sysfs), and thread sweeps stop once more threads stop paying.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "pipesim/calibrate/adam_workspace.hpp"
#include "pipesim/calibrate/calibrate.hpp"
#include "pipesim/calibrate/cpu_benchmarks.hpp"
#include "pipesim/calibrate/host_info.hpp"
#include "pipesim/calibrate/operand_values.hpp"

namespace pipesim::calibrate {
namespace {

TEST(OperandValues, AreRandomReproducibleAndInRange) {
  constexpr std::uint64_t kN = 1 << 16;
  std::set<float> distinct;
  double sum = 0;
  int zeros = 0;
  for (std::uint64_t i = 0; i < kN; ++i) {
    const float v = operand_value(7, i);
    ASSERT_GE(v, -1.0f);
    ASSERT_LT(v, 1.0f);
    ASSERT_TRUE(std::isnormal(v) || v == 0.0f);
    zeros += v == 0.0f;
    distinct.insert(v);
    sum += v;
    ASSERT_EQ(v, operand_value(7, i));  // a fixed seed gives the same buffer every run
  }
  EXPECT_LE(zeros, 1);
  EXPECT_GT(distinct.size(), kN * 99 / 100);  // 24 random bits: nearly all distinct
  EXPECT_LT(std::abs(sum / kN), 0.02);        // centred on zero
  // Other seeds give other buffers; bytes for copy-only buffers cover every value.
  int same = 0;
  std::set<int> bytes;
  for (std::uint64_t i = 0; i < 4096; ++i) {
    same += operand_value(7, i) == operand_value(8, i);
    bytes.insert(operand_byte(9, i));
  }
  EXPECT_LT(same, 8);
  EXPECT_EQ(bytes.size(), 256u);
}

/// A fake sysfs cpu tree: `sockets` sockets of `cores` CPUs, each socket one L3 of `l3_kib`.
std::string fake_sysfs(int sockets, int cores, int l3_kib) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("pipesim_sysfs_" + std::to_string(sockets) + "_" +
                                                     std::to_string(cores) + "_" + std::to_string(l3_kib));
  fs::remove_all(root);
  auto write = [](const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  };
  for (int s = 0; s < sockets; ++s)
    for (int c = 0; c < cores; ++c) {
      const int cpu = s * cores + c;
      const fs::path cache = root / ("cpu" + std::to_string(cpu)) / "cache";
      const std::string socket_cpus = std::to_string(s * cores) + "-" + std::to_string(s * cores + cores - 1);
      write(cache / "index0/level", "1");
      write(cache / "index0/type", "Data");
      write(cache / "index0/size", "48K");
      write(cache / "index0/shared_cpu_list", std::to_string(cpu));
      write(cache / "index1/level", "1");
      write(cache / "index1/type", "Instruction");
      write(cache / "index1/size", "32K");
      write(cache / "index2/level", "2");
      write(cache / "index2/type", "Unified");
      write(cache / "index2/size", "2048K");
      write(cache / "index2/shared_cpu_list", std::to_string(cpu));
      write(cache / "index3/level", "3");
      write(cache / "index3/type", "Unified");
      write(cache / "index3/size", std::to_string(l3_kib) + "K");
      write(cache / "index3/shared_cpu_list", socket_cpus);
    }
  write(root / "cpufreq/policy0", "");  // not a cpuN directory: ignored
  return root.string();
}

TEST(LastLevelCache, SumsEachInstanceOnce) {
  EXPECT_EQ(last_level_cache_bytes(fake_sysfs(1, 4, 32768)), std::int64_t{32} << 20);
  EXPECT_EQ(last_level_cache_bytes(fake_sysfs(2, 3, 107520)), std::int64_t{2} * 107520 << 10);
  EXPECT_EQ(last_level_cache_bytes("/nonexistent"), 0);
}

/// Every array a CPU benchmark streams, for `host` and quick or full runs.
void expect_beyond_cache(const HostInfo& host) {
  for (bool quick : {true, false}) {
    const CpuBenchOptions o = cpu_bench_options(host, quick);
    const auto cache = static_cast<std::size_t>(host.last_level_cache_bytes);
    EXPECT_GE(o.stream_elements * sizeof(double), kCacheMultiple * cache) << "quick " << quick;
    EXPECT_GE(o.adam_params * static_cast<std::size_t>(kAdamResidentBytesPerParam), kCacheMultiple * cache)
        << "quick " << quick;
    EXPECT_EQ(o.threads, default_thread_counts(host.cores));
    // The replay's optimizer runs shards of the calibration's step.
    EXPECT_EQ(o.adam_params, adam_step_params(host.last_level_cache_bytes, quick));
  }
}

TEST(CpuBenchmarks, EveryStreamArrayIsFourTimesTheLastLevelCache) {
  const HostInfo here = probe_host();
  EXPECT_EQ(here.last_level_cache_bytes, last_level_cache_bytes());
  expect_beyond_cache(here);
  HostInfo server = here;  // a two-socket server with 2 x 384 MiB of L3
  server.cores = 192;
  server.last_level_cache_bytes = std::int64_t{768} << 20;
  expect_beyond_cache(server);
}

TEST(ThreadSweep, StopsWhenDoublingThreadsStopsPaying) {
  ThreadSweep sweep(0.05);
  sweep.record("stream_copy", 1, 10e9);
  sweep.record("stream_copy", 2, 19e9);
  sweep.record("stream_copy", 4, 30e9);
  EXPECT_FALSE(sweep.converged("stream_copy"));
  sweep.record("stream_copy", 8, 31e9);  // +3 %: converged at 8
  EXPECT_TRUE(sweep.converged("stream_copy"));
  EXPECT_EQ(sweep.converged_at("stream_copy"), 8);
  sweep.record("stream_copy", 16, 60e9);  // nothing is recorded past convergence
  EXPECT_EQ(sweep.converged_at("stream_copy"), 8);
  EXPECT_FALSE(sweep.converged("cpu_adam/bf16/avx2"));  // each kernel on its own
  EXPECT_EQ(kernel_of("cpu_adam/bf16/avx2/threads:16"), "cpu_adam/bf16/avx2");
  ThreadSweep never(0);
  never.record("k", 1, 1);
  never.record("k", 2, 1);
  EXPECT_FALSE(never.converged("k"));
}

TEST(CalibrateBase, IsTheShippedProfileOfTheGpu) {
  EXPECT_EQ(base_for_gpu("NVIDIA H100 80GB HBM3"), "h100-sxm-8x");
  EXPECT_EQ(base_for_gpu("NVIDIA H100 PCIe"), "h100-sxm-8x");
  EXPECT_EQ(base_for_gpu("NVIDIA A100-SXM4-80GB"), "a100-80g-sxm-8x");
  EXPECT_EQ(base_for_gpu("NVIDIA A800 80GB PCIe"), "a800-80g-8x");
  EXPECT_EQ(base_for_gpu("NVIDIA B200"), "b200-sxm-8x");
  EXPECT_EQ(base_for_gpu("NVIDIA H200"), "h200-sxm-8x");
  EXPECT_EQ(base_for_gpu("NVIDIA GeForce RTX 4090"), "rtx4090-8x");
  EXPECT_EQ(base_for_gpu("NVIDIA GeForce RTX 3090 Ti"), "rtx3090-4x");
  EXPECT_EQ(base_for_gpu("Tesla V100-SXM2-16GB"), "v100-sxm2-4x");
  EXPECT_EQ(base_for_gpu("AMD Instinct MI300X"), "mi300x-8x");
  EXPECT_EQ(base_for_gpu("NVIDIA H20"), "");  // not an H200
  EXPECT_EQ(base_for_gpu("NVIDIA T4"), "");
}

}  // namespace
}  // namespace pipesim::calibrate
