// The checks of a plan's references, split so that the engine runs them inside the one pass it already makes
// over the ops (a plan of millions of ops is 96 bytes an op: every extra pass over it is memory traffic).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <variant>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::sim {

class PlanValidator {
 public:
  /// Checks the devices and the streams; `op` then checks each op and `finish` what spans all of them.
  PlanValidator(const Plan& plan, const std::string& file)
      : plan_(plan),
        file_(file),
        devices_(static_cast<std::int64_t>(plan.devices.size())),
        streams_(static_cast<std::int64_t>(plan.streams.size())),
        ops_(static_cast<std::int64_t>(plan.ops.size())),
        extras_(static_cast<std::int64_t>(plan.extras.size())),
        iterations_(std::max(0, plan.meta.iterations)) {
    for (std::size_t d = 0; d < plan.devices.size(); ++d) {
      const auto& dev = plan.devices[d];
      std::string path = fmt::format("/devices/{}", d);
      if (dev.node < 0 || dev.node >= plan.nodes)
        throw InputError(file, path + "/node",
                         fmt::format("node {} out of range; valid: 0 .. {}", dev.node, plan.nodes - 1));
      if (dev.kind == DeviceKind::kGpu && (dev.local_index < 0 || dev.local_index >= plan.hw.node.gpus))
        throw InputError(
            file, path + "/local_index",
            fmt::format("GPU index {} out of range; valid: 0 .. {}", dev.local_index, plan.hw.node.gpus - 1));
      if (dev.resident_bytes < 0) throw InputError(file, path + "/resident_bytes", "must be >= 0");
    }
    for (std::size_t s = 0; s < plan.streams.size(); ++s)
      if (plan.streams[s].device < 0 || plan.streams[s].device >= devices_)
        throw InputError(file, fmt::format("/streams/{}/device", s),
                         fmt::format("no device {}; valid: 0 .. {}", plan.streams[s].device, devices_ - 1));
  }

  /// Inlined into the loops over millions of ops; each failure is reported out of line. Each range check is
  /// one unsigned comparison (a negative number wraps past every valid bound).
  [[gnu::always_inline]] void op(std::size_t i) { op(i, plan_.ops[i]); }
  [[gnu::always_inline]] void op(std::size_t i, const Op& op) {
    last_iteration_ = std::max(last_iteration_, op.tags.iteration);
    if (!below(op.stream, streams_)) fail(i, Bad::kStream);
    const auto self = static_cast<OpId>(i);
    for (const OpId& d : op.deps)
      if (!below(d, ops_) || d == self) fail(i, Bad::kDep, static_cast<std::size_t>(&d - op.deps.begin()));
    if (op.extras >= 0) {
      if (!below(op.extras, extras_)) fail(i, Bad::kExtras);
      const OpExtras& e = plan_.extras[static_cast<std::size_t>(op.extras)];
      if ((e.alloc_bytes | e.free_bytes) < 0) fail(i, Bad::kMemory);
    }
    if (!below(op.tags.iteration, iterations_)) fail(i, Bad::kIteration);
    if (std::holds_alternative<SharedCompute>(op.payload)) return;  // GPU math refers to nothing else
    if (const auto* t = std::get_if<TransferWork>(&op.payload)) {
      if (!below(t->src, devices_) || !below(t->dst, devices_)) fail(i, Bad::kEndpoints);
      if (t->bytes < 0) fail(i, Bad::kBytes);
      if (!below(t->group_size - std::int64_t{1}, devices_)) fail(i, Bad::kGroupSize);
    }
    if (const auto* c = std::get_if<CpuWork>(&op.payload)) {
      if (plan_.devices[static_cast<std::size_t>(plan_.streams[static_cast<std::size_t>(op.stream)].device)]
              .kind != DeviceKind::kHost)
        fail(i, Bad::kCpuDevice);
      if (c->threads < 1 || c->threads > plan_.hw.host.cores) fail(i, Bad::kCpuThreads);
    }
  }

  /// After every op: metrics size per-iteration tables by meta.iterations, so it must be the iterations the
  /// ops run.
  void finish() const {
    if (ops_ > 0 && last_iteration_ + 1 != plan_.meta.iterations)
      throw InputError(file_, "/meta/iterations",
                       fmt::format("{} iterations, but the ops run {}; valid: {}", plan_.meta.iterations,
                                   last_iteration_ + 1, last_iteration_ + 1));
  }

 private:
  enum class Bad {
    kStream,
    kDep,
    kMemory,
    kExtras,
    kIteration,
    kEndpoints,
    kBytes,
    kGroupSize,
    kCpuDevice,
    kCpuThreads
  };
  /// Op i failed check `bad` (for a dependency: its k-th).
  [[noreturn, gnu::cold, gnu::noinline]] void fail(std::size_t i, Bad bad, std::size_t k = 0) const {
    const Op& op = plan_.ops[i];
    const std::string path = fmt::format("/ops/{}", i);
    switch (bad) {
      case Bad::kStream:
        throw InputError(file_, path + "/stream",
                         fmt::format("no stream {}; valid: 0 .. {}", op.stream, streams_ - 1));
      case Bad::kDep:
        throw InputError(
            file_, fmt::format("{}/deps/{}", path, k),
            fmt::format("dependency {} is not another op; valid: 0 .. {}", op.deps[k], ops_ - 1));
      case Bad::kMemory:
        throw InputError(file_, path, "alloc_bytes and free_bytes must be >= 0");
      case Bad::kExtras:
        throw InputError(
            file_, path,
            extras_ == 0
                ? fmt::format("extras entry {}, but the plan has none; valid: -1", op.extras)
                : fmt::format("extras entry {} out of range; valid: -1 .. {}", op.extras, extras_ - 1));
      case Bad::kIteration:
        throw InputError(file_, path + "/tags/iteration",
                         fmt::format("iteration {}; valid: 0 .. {} (meta.iterations - 1)", op.tags.iteration,
                                     plan_.meta.iterations - 1));
      case Bad::kEndpoints:
        throw InputError(file_, path + "/transfer",
                         fmt::format("src/dst must be devices 0 .. {}", devices_ - 1));
      case Bad::kBytes:
        throw InputError(file_, path + "/transfer/bytes", "must be >= 0");
      case Bad::kGroupSize:
        throw InputError(file_, path + "/transfer/group_size",
                         fmt::format("{} members; valid: 1 .. {} (the plan's devices)",
                                     std::get<TransferWork>(op.payload).group_size, devices_));
      case Bad::kCpuDevice:
        throw InputError(file_, path + "/cpu", "CPU work must sit on a host stream");
      case Bad::kCpuThreads:
        throw InputError(file_, path + "/cpu/threads",
                         fmt::format("valid: 1 .. {} (host cores)", plan_.hw.host.cores));
    }
    throw InputError(file_, path, "invalid op");
  }

  /// 0 <= v < bound, for a non-negative bound.
  static bool below(std::int64_t v, std::int64_t bound) {
    return static_cast<std::uint64_t>(v) < static_cast<std::uint64_t>(bound);
  }

  const Plan& plan_;
  const std::string& file_;
  std::int64_t devices_, streams_, ops_, extras_, iterations_;  // bounds, none negative
  std::int32_t last_iteration_ = -1;
};

}  // namespace pipesim::sim
