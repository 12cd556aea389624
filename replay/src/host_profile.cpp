// The hardware profile of the host replay backend itself: what one plan stream's thread does per FLOP, per
// copied byte and per Adam parameter on this CPU. Simulating a plan with it predicts what `replay --backend
// host` measures, so the loop calibrate -> simulate -> replay -> compare closes on any machine.
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "host_work.hpp"
#include "pipesim/calibrate/cpu_adam.hpp"
#include "pipesim/calibrate/host_info.hpp"
#include "pipesim/replay/replay.hpp"

namespace pipesim::replay {

namespace {

/// Adam parameters per second on `threads` threads (best of a few 1M-parameter steps).
double measure_adam_rate(int threads) {
  const std::size_t n = std::size_t{1} << 20;
  std::vector<float> master(n, 0.5f), m(n, 0.f), v(n, 0.f);
  std::vector<std::uint16_t> grad(n, calibrate::float_to_bf16(1e-3f)), weight(n, 0);
  calibrate::AdamBuffers b{
      master.data(), m.data(), v.data(), grad.data(), weight.data(), n, calibrate::GradType::kBf16};
  double best = 0;
  for (int k = 0; k < 5; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    calibrate::adam_step(calibrate::AdamConfig{}, b, calibrate::best_isa(), threads);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, static_cast<double>(n) / s);
  }
  return best;
}

}  // namespace

sim::HardwareProfile host_backend_profile(const std::string& name) {
  sim::HardwareProfile hw = sim::load_hardware_profile("rtx4090-8x");  // layout: 8 "GPUs" per node
  const auto host = calibrate::probe_host();
  const double flops = measure_fma_rate(), copy = measure_copy_rate() / 1e9;  // FLOP/s, GB/s
  const std::string how = fmt::format("measured by the host replay backend on {} ({} logical CPUs), {}",
                                      host.cpu_model, host.cores, host.date_utc);
  hw.name = name;
  hw.description = "the host replay backend: each plan stream is a thread of this CPU";
  hw.gpu_hour_usd = 0;
  hw.gpu.model = "host replay stream (" + host.cpu_model + ")";
  for (auto& [dtype, tflops] : hw.gpu.peak_tflops) tflops = flops / 1e12;
  hw.gpu.gemm_efficiency = {{1e-9, 1.0}, {1e9, 1.0}};  // compute ops run at the measured FMA rate, any size
  hw.gpu.hbm_GBps = 2 * copy;                          // a memory-bound byte is read once and written once
  hw.gpu.hbm_efficiency = 1;
  hw.gpu.launch_overhead = 0;
  hw.gpu.board_W = 0;  // no energy figure for CPU threads
  hw.gpu.sources = {{"peak_tflops", "FMA rate of one thread: " + how},
                    {"gemm_efficiency", "the FMA work has no shape: 1 at every size"},
                    {"hbm_GBps", "memcpy rate of one thread, read + write: " + how},
                    {"launch_overhead_us", "no kernel launches on the host"},
                    {"hbm_bytes", "kept from rtx4090-8x (memory is only accounted, not allocated)"},
                    {"model", how}};
  auto& pcie = hw.node.pcie;
  pcie.lane_GBps = pcie.uplink_GBps = copy;
  pcie.root_complex_GBps = 0;
  pcie.latency = 0;
  pcie.h2d_GBps_by_size.clear();
  pcie.d2h_GBps_by_size.clear();
  pcie.peer_to_peer = true;
  pcie.staged_busbw_GBps = 0;
  pcie.sources.erase("peer_to_peer");
  pcie.sources.erase("staged_busbw_GBps");
  pcie.sources.erase("root_complex_GBps");
  pcie.sources.erase("h2d_GBps_by_size");
  pcie.sources.erase("d2h_GBps_by_size");
  for (const char* key : {"lane_GBps", "uplink_GBps", "latency_us"})
    pcie.sources[key] = "memcpy rate of one thread (no latency): " + how;
  auto& nv = hw.node.nvlink;
  nv.GBps_per_direction = nv.allreduce_busbw_GBps = copy;
  nv.allreduce_busbw_by_size.clear();
  nv.latency = 0;
  nv.groups.clear();
  nv.sources = {{"GBps_per_direction", "memcpy rate of one thread: " + how},
                {"allreduce_busbw_GBps", "each member copies its bus bytes: " + how},
                {"latency_us", "no link latency on the host"}};
  hw.network.nic_GBps = copy;
  hw.network.latency = 0;
  for (auto& [key, source] : hw.network.sources) source = "memcpy rate of one thread: " + how;
  hw.host.cpu_model = host.cpu_model;
  hw.host.cores = std::max(1, host.cores);
  hw.host.adam_params_per_s_by_threads.clear();
  for (int t = 1; t <= hw.host.cores; t *= 2)
    hw.host.adam_params_per_s_by_threads.push_back({static_cast<double>(t), measure_adam_rate(t)});
  hw.host.sources["adam_params_per_s_by_threads"] = "the calibration's Adam kernel, bf16 gradients: " + how;
  hw.host.sources["cores"] = how;
  hw.host.sources["cpu_model"] = how;
  hw.calibrated_json.clear();
  return hw;
}

}  // namespace pipesim::replay
