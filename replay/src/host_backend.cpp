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
#include "pipesim/calibrate/adam_workspace.hpp"
#include "pipesim/calibrate/host_info.hpp"
#include "transport.hpp"

namespace pipesim::replay {

namespace {

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
  /// One Adam step over `params` parameters on `threads` threads (at most this machine's).
  void adam(std::size_t stream, double params, int threads) {
    const int workers = std::max(1, std::min(threads, static_cast<int>(std::thread::hardware_concurrency())));
    adam_[stream].step(static_cast<std::int64_t>(params), workers);
  }

  double scale_;
  double flops_per_s_;
  std::vector<CopyBuffers> copies_;             // per stream: only its own thread touches them
  std::vector<calibrate::AdamWorkspace> adam_;  // per stream
  Transport* transport_;                        // multi-node: where other nodes' devices are
};

}  // namespace

std::unique_ptr<Backend> make_host_backend(const sim::Plan& plan, double work_scale, Transport* transport) {
  return std::make_unique<HostBackend>(plan, work_scale, transport);
}

}  // namespace pipesim::replay
