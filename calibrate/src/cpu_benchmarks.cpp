#include "pipesim/calibrate/cpu_benchmarks.hpp"

#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "parallel_for.hpp"
#include "pipesim/calibrate/stream_bandwidth.hpp"

namespace pipesim::calibrate {

std::vector<int> default_thread_counts(int cores, bool quick) {
  std::vector<int> out;
  if (!quick && cores <= 16) {
    for (int t = 1; t <= cores; ++t) out.push_back(t);
    return out;
  }
  for (int t = 1; t < cores; t *= 2) out.push_back(t);
  out.push_back(cores);
  return out;
}

namespace {

template <typename T>
std::unique_ptr<T[]> uninitialized(std::size_t n) {
  return std::unique_ptr<T[]>(new T[n]);
}

void run_adam(benchmark::State& state, GradType grad, Isa isa, int threads, std::size_t n) {
  auto master = uninitialized<float>(n), m = uninitialized<float>(n), v = uninitialized<float>(n);
  auto g16 = uninitialized<std::uint16_t>(n), w16 = uninitialized<std::uint16_t>(n);
  std::unique_ptr<float[]> g32;
  if (grad == GradType::kFp32) g32 = uninitialized<float>(n);
  const std::uint16_t gbits = grad == GradType::kFp16 ? float_to_fp16(1e-3f) : float_to_bf16(1e-3f);
  // First touch by the threads that will stream each block.
  detail::parallel_for(n, threads, 64, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      master[i] = 0.01f;
      m[i] = 0.0f;
      v[i] = 0.0f;
      g16[i] = gbits;
      w16[i] = 0;
      if (g32) g32[i] = 1e-3f;
    }
  });
  AdamBuffers buf{master.get(),
                  m.get(),
                  v.get(),
                  g32 ? static_cast<const void*>(g32.get()) : g16.get(),
                  grad == GradType::kFp32 ? nullptr : w16.get(),
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

void run_stream(benchmark::State& state, StreamKernel kernel, int threads, std::size_t n) {
  auto a = uninitialized<double>(n), b = uninitialized<double>(n), c = uninitialized<double>(n);
  parallel_fill(a.get(), n, 0.0, threads);
  parallel_fill(b.get(), n, 1.0, threads);
  parallel_fill(c.get(), n, 2.0, threads);
  for (auto _ : state) {
    switch (kernel) {
      case StreamKernel::kCopy:
        stream_copy(a.get(), b.get(), n, threads);
        break;
      case StreamKernel::kTriad:
        stream_triad(a.get(), b.get(), c.get(), 3.0, n, threads);
        break;
      case StreamKernel::kUpdate:
        stream_update(a.get(), b.get(), 1e-9, n, threads);
        break;
    }
    benchmark::ClobberMemory();
  }
  const auto iters = static_cast<std::int64_t>(state.iterations());
  state.SetBytesProcessed(iters * static_cast<std::int64_t>(n) * (kernel == StreamKernel::kCopy ? 16 : 24));
  state.counters["threads"] = threads;
}

}  // namespace

void register_cpu_benchmarks(const CpuBenchOptions& o) {
  auto setup = [&o](benchmark::internal::Benchmark* b) {
    b->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(o.repetitions)->MinTime(o.min_time_s);
  };
  for (GradType g : o.grad_types)
    for (int t : o.threads) {
      std::string name =
          std::string("cpu_adam/") + to_string(g) + "/" + to_string(o.isa) + "/threads:" + std::to_string(t);
      setup(benchmark::RegisterBenchmark(
          name.c_str(),
          [g, t, isa = o.isa, n = o.adam_params](benchmark::State& s) { run_adam(s, g, isa, t, n); }));
    }
  for (int t : o.threads) {
    for (auto [kernel, label] :
         {std::pair{StreamKernel::kCopy, "stream_copy"}, std::pair{StreamKernel::kTriad, "stream_triad"},
          std::pair{StreamKernel::kUpdate, "stream_update"}}) {
      std::string name = std::string(label) + "/threads:" + std::to_string(t);
      setup(benchmark::RegisterBenchmark(
          name.c_str(),
          [kernel = kernel, t, n = o.stream_elements](benchmark::State& s) { run_stream(s, kernel, t, n); }));
    }
  }
}

}  // namespace pipesim::calibrate
