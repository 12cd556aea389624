// The host replay backend: every op does real work on the CPU thread of its stream. Compute ops run their
// FLOPs as fused multiply-adds at this CPU's measured rate and stream their memory-bound bytes; transfers
// copy their bytes between real buffers; GPU optimizer steps stream their bytes; CPU optimizer steps run the
// calibration's Adam kernel over real buffers; fixed durations are busy waits.
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "backend.hpp"
#include "host_work.hpp"
#include "pipesim/calibrate/cpu_adam.hpp"
#include "pipesim/calibrate/host_info.hpp"
#include "transport.hpp"

namespace pipesim::replay {

namespace {

constexpr std::size_t kAdamParams = std::size_t{1} << 20;  // per CPU stream; longer steps loop over it

class HostBackend final : public Backend {
 public:
  HostBackend(const sim::Plan& plan, double work_scale, Transport* transport)
      : scale_(work_scale),
        flops_per_s_(measure_fma_rate()),
        copies_(plan.streams.size()),
        adam_(plan.streams.size()),
        transport_(transport) {}

  void execute(const sim::Plan& plan, sim::OpId id) override {
    const sim::Op& op = plan.ops[static_cast<std::size_t>(id)];
    const auto stream = static_cast<std::size_t>(op.stream);
    if (op.fixed_duration >= 0) {
      busy_wait(static_cast<double>(op.fixed_duration) * 1e-9 * scale_);
      return;
    }
    if (const auto* c = sim::compute_of(op.payload)) {
      fma_work(c->flops * scale_);
      copies_[stream].copy(static_cast<double>(c->mem_bytes) / 2 * scale_);  // read once, written once
    } else if (const auto* t = std::get_if<sim::TransferWork>(&op.payload)) {
      const int to = plan.devices[static_cast<std::size_t>(t->dst)].node;
      if (transport_ && to != transport_->rank())
        transport_->send_bytes(to, static_cast<std::int64_t>(static_cast<double>(t->bytes) * scale_));
      else
        copies_[stream].copy(static_cast<double>(t->bytes) * scale_);
    } else if (const auto* m = std::get_if<sim::MemoryWork>(&op.payload)) {
      copies_[stream].copy(static_cast<double>(m->bytes) / 2 * scale_);
    } else if (const auto* w = std::get_if<sim::CpuWork>(&op.payload)) {
      adam(stream, static_cast<double>(w->params) * scale_, w->threads);
    }
  }

  void describe(ReplayEnvironment& e) const override {
    const auto host = calibrate::probe_host();
    e.host = fmt::format("{} ({} logical CPUs)", host.cpu_model, host.cores);
    e.compute_gflops_per_thread = flops_per_s_ / 1e9;
  }

 private:
  struct AdamState {
    std::vector<float> master, m, v;
    std::vector<std::uint16_t> grad, weight;
  };

  /// One Adam step over `params` bf16-gradient parameters on `threads` threads, in shards of kAdamParams.
  void adam(std::size_t stream, double params, int threads) {
    auto left = static_cast<std::int64_t>(params);
    if (left <= 0) return;
    AdamState& a = adam_[stream];
    if (a.master.empty()) {
      a.master.assign(kAdamParams, 0.5f);
      a.m.assign(kAdamParams, 0.f);
      a.v.assign(kAdamParams, 0.f);
      a.grad.assign(kAdamParams, calibrate::float_to_bf16(1e-3f));
      a.weight.assign(kAdamParams, 0);
    }
    const int workers = std::max(1, std::min(threads, static_cast<int>(std::thread::hardware_concurrency())));
    calibrate::AdamConfig config;
    while (left > 0) {
      const auto n =
          static_cast<std::size_t>(std::min<std::int64_t>(left, static_cast<std::int64_t>(kAdamParams)));
      calibrate::AdamBuffers buf{
          a.master.data(),           a.m.data(), a.v.data(), a.grad.data(), a.weight.data(), n,
          calibrate::GradType::kBf16};
      calibrate::adam_step(config, buf, calibrate::best_isa(), workers);
      left -= static_cast<std::int64_t>(n);
    }
  }

  double scale_;
  double flops_per_s_;
  std::vector<CopyBuffers> copies_;  // per stream: only its own thread touches them
  std::vector<AdamState> adam_;      // per stream
  Transport* transport_;             // multi-node: where other nodes' devices are
};

}  // namespace

std::unique_ptr<Backend> make_host_backend(const sim::Plan& plan, double work_scale, Transport* transport) {
  return std::make_unique<HostBackend>(plan, work_scale, transport);
}

}  // namespace pipesim::replay
