#include "pipesim/calibrate/cpu_benchmarks.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "parallel_for.hpp"
#include "pipesim/calibrate/adam_workspace.hpp"
#include "pipesim/calibrate/operand_values.hpp"
#include "pipesim/calibrate/stream_bandwidth.hpp"

namespace pipesim::calibrate {

std::vector<int> default_thread_counts(int cores) {
  std::vector<int> out;
  for (int t = 1; t < cores; t *= 2) out.push_back(t);
  out.push_back(std::max(1, cores));
  return out;
}

CpuBenchOptions cpu_bench_options(const HostInfo& host, bool quick) {
  CpuBenchOptions cpu;
  cpu.threads = default_thread_counts(host.cores);
  const auto cache = static_cast<std::size_t>(std::max<std::int64_t>(host.last_level_cache_bytes, 0));
  const std::size_t stream_floor = kCacheMultiple * cache / sizeof(double);
  cpu.adam_params = adam_step_params(host.last_level_cache_bytes, quick);
  if (quick) {
    cpu.stream_elements = 16u << 20;
    cpu.repetitions = 3;
    cpu.min_time_s = 0.05;
  }
  cpu.stream_elements = std::max(cpu.stream_elements, stream_floor + 1);
  return cpu;
}

void ThreadSweep::record(const std::string& kernel, int threads, double rate) {
  if (converged(kernel)) return;
  auto it = last_.find(kernel);
  if (it != last_.end() && threads > it->second.threads && rate < it->second.rate * (1 + min_gain_))
    converged_at_[kernel] = threads;
  last_[kernel] = {threads, rate};
}

bool ThreadSweep::converged(const std::string& kernel) const {
  return converged_at_.count(kernel) != 0;
}

int ThreadSweep::converged_at(const std::string& kernel) const {
  auto it = converged_at_.find(kernel);
  return it == converged_at_.end() ? 0 : it->second;
}

std::string kernel_of(const std::string& benchmark_name) {
  return benchmark_name.substr(0, benchmark_name.rfind("/threads:"));
}

namespace {

template <typename T>
std::unique_ptr<T[]> uninitialized(std::size_t n) {
  return std::unique_ptr<T[]>(new T[n]);
}

/// The arrays of every benchmark, allocated and filled once for the whole sweep: re-filling gigabytes for
/// each thread count and repetition cost more time than the measurements.
struct CpuArrays {
  std::size_t params = 0, elements = 0;
  std::unique_ptr<float[]> master, m, v, g32;
  std::unique_ptr<std::uint16_t[]> g16, w16;
  std::unique_ptr<double[]> a, b, c;
};

CpuArrays& arrays() {
  static CpuArrays arrays;
  return arrays;
}

void prepare_adam(std::size_t n, bool fp32_grads, int threads) {
  CpuArrays& x = arrays();
  if (x.params != n) {
    x.params = n;
    x.master = uninitialized<float>(n);
    x.m = uninitialized<float>(n);
    x.v = uninitialized<float>(n);
    x.g16 = uninitialized<std::uint16_t>(n);
    x.w16 = uninitialized<std::uint16_t>(n);
    x.g32.reset();
    // Weights, moments and gradients of a model in training: random, in their usual ranges.
    detail::parallel_for(n, threads, 64, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        x.master[i] = 0.02f * operand_value(1, i);
        x.m[i] = 1e-4f * operand_value(2, i);
        x.v[i] = 1e-8f * (1.5f + operand_value(3, i));
        x.g16[i] = float_to_bf16(1e-3f * operand_value(4, i));
        x.w16[i] = float_to_bf16(x.master[i]);
      }
    });
  }
  if (fp32_grads && !x.g32) {
    x.g32 = uninitialized<float>(n);
    for (std::size_t i = 0; i < n; ++i) x.g32[i] = 1e-3f * operand_value(5, i);
  }
}

void prepare_stream(std::size_t n, int threads) {
  CpuArrays& x = arrays();
  if (x.elements == n) return;
  x.elements = n;
  x.a = uninitialized<double>(n);
  x.b = uninitialized<double>(n);
  x.c = uninitialized<double>(n);
  parallel_fill_random(x.a.get(), n, 6, threads);
  parallel_fill_random(x.b.get(), n, 7, threads);
  parallel_fill_random(x.c.get(), n, 8, threads);
}

bool skipped(benchmark::State& state, const ThreadSweep* sweep, const std::string& kernel) {
  if (sweep == nullptr || !sweep->converged(kernel)) return false;
  state.SkipWithError("converged: more threads gained too little");
  return true;
}

void run_adam(benchmark::State& state, GradType grad, Isa isa, int threads, std::size_t n, int fill_threads) {
  prepare_adam(n, grad == GradType::kFp32, fill_threads);
  CpuArrays& x = arrays();
  AdamBuffers buf{x.master.get(),
                  x.m.get(),
                  x.v.get(),
                  grad == GradType::kFp32 ? static_cast<const void*>(x.g32.get()) : x.g16.get(),
                  grad == GradType::kFp32 ? nullptr : x.w16.get(),
                  n,
                  grad};
  AdamConfig cfg;
  for (auto _ : state) {
    adam_step(cfg, buf, isa, threads);
    ++cfg.step;
    benchmark::ClobberMemory();
  }
  const auto iters = static_cast<std::int64_t>(state.iterations());
  state.SetItemsProcessed(iters * static_cast<std::int64_t>(n));
  state.SetBytesProcessed(iters * static_cast<std::int64_t>(n) *
                          adam_bytes_per_param(grad, grad != GradType::kFp32));
  state.counters["params"] = static_cast<double>(n);
  state.counters["threads"] = threads;
}

enum class StreamKernel { kCopy, kTriad, kUpdate };

void run_stream(benchmark::State& state, StreamKernel kernel, int threads, std::size_t n, int fill_threads) {
  prepare_stream(n, fill_threads);
  CpuArrays& x = arrays();
  for (auto _ : state) {
    switch (kernel) {
      case StreamKernel::kCopy:
        stream_copy(x.a.get(), x.b.get(), n, threads);
        break;
      case StreamKernel::kTriad:
        stream_triad(x.a.get(), x.b.get(), x.c.get(), 3.0, n, threads);
        break;
      case StreamKernel::kUpdate:
        stream_update(x.a.get(), x.b.get(), 1e-9, n, threads);
        break;
    }
    benchmark::ClobberMemory();
  }
  const auto iters = static_cast<std::int64_t>(state.iterations());
  state.SetBytesProcessed(iters * static_cast<std::int64_t>(n) * (kernel == StreamKernel::kCopy ? 16 : 24));
  state.counters["threads"] = threads;
}

}  // namespace

void register_cpu_benchmarks(const CpuBenchOptions& o, const ThreadSweep* sweep) {
  auto setup = [&o](benchmark::internal::Benchmark* b) {
    b->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(o.repetitions)->MinTime(o.min_time_s);
  };
  const int fill_threads = o.threads.empty() ? 1 : o.threads.back();
  for (GradType g : o.grad_types)
    for (int t : o.threads) {
      const std::string kernel = std::string("cpu_adam/") + to_string(g) + "/" + to_string(o.isa);
      const std::string name = kernel + "/threads:" + std::to_string(t);
      setup(benchmark::RegisterBenchmark(name.c_str(),
                                         [=, isa = o.isa, n = o.adam_params](benchmark::State& s) {
                                           if (!skipped(s, sweep, kernel))
                                             run_adam(s, g, isa, t, n, fill_threads);
                                         }));
    }
  for (int t : o.threads) {
    for (auto [kernel, label] :
         {std::pair{StreamKernel::kCopy, "stream_copy"}, std::pair{StreamKernel::kTriad, "stream_triad"},
          std::pair{StreamKernel::kUpdate, "stream_update"}}) {
      const std::string name = std::string(label) + "/threads:" + std::to_string(t);
      setup(benchmark::RegisterBenchmark(name.c_str(), [=, kernel = kernel, label = std::string(label),
                                                        n = o.stream_elements](benchmark::State& s) {
        if (!skipped(s, sweep, label)) run_stream(s, kernel, t, n, fill_threads);
      }));
    }
  }
}

}  // namespace pipesim::calibrate
