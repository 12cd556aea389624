#include "pipesim/sim/plan/plan.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "core/page_populator.hpp"

namespace pipesim::sim {

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::kForward:
      return "forward";
    case OpKind::kBackward:
      return "backward";
    case OpKind::kBackwardInput:
      return "backward_input";
    case OpKind::kBackwardWeight:
      return "backward_weight";
    case OpKind::kRecompute:
      return "recompute";
    case OpKind::kH2D:
      return "h2d";
    case OpKind::kD2H:
      return "d2h";
    case OpKind::kP2P:
      return "p2p";
    case OpKind::kAllReduce:
      return "allreduce";
    case OpKind::kAllGather:
      return "allgather";
    case OpKind::kReduceScatter:
      return "reducescatter";
    case OpKind::kOptimizer:
      return "optimizer";
    case OpKind::kFill:
      return "fill";
    case OpKind::kContextSwitch:
      return "context_switch";
    case OpKind::kNvmeRead:
      return "nvme_read";
    case OpKind::kNvmeWrite:
      return "nvme_write";
    case OpKind::kAllToAll:
      return "alltoall";
    case OpKind::kBubble:
      return "bubble";
    case OpKind::kSync:
      return "sync";
  }
  return "?";
}

namespace {
/// Zero-work ops (syncs, bubble markers, fill chunks timed by their own duration) all share one instance,
/// never freed and held without a reference count (a pointer with no owner): copying it for each such op of a
/// plan of millions, and dropping it, takes no atomic add and subtract.
const std::shared_ptr<const ComputeWork>& no_work() {
  static const ComputeWork* const none = new ComputeWork{};
  static const std::shared_ptr<const ComputeWork> unowned(std::shared_ptr<const ComputeWork>(), none);
  return unowned;
}
}  // namespace

SharedCompute::SharedCompute() : work_(no_work()) {}

SharedCompute::SharedCompute(const ComputeWork& work) {
  work_ = work == ComputeWork{} ? no_work() : std::make_shared<const ComputeWork>(work);
}

OpId append_op(Plan& plan, StreamId stream, OpKind kind, const OpTags& tags, Payload&& payload,
               Duration fixed) {
  // Built with its payload in place: a default op's empty ComputeWork would be made and dropped first (a
  // reference count up and down, per op of a plan of millions).
  plan.ops.emplace_back(stream, kind, tags, std::move(payload), fixed);
  // The huge page after the one being filled is backed on the other CPU while this one builds.
  constexpr std::size_t kPageOfOps = kHugePageBytes / sizeof(Op), kAhead = 1;
  const std::size_t size = plan.ops.size();
  if (size == 1)
    populate_elements(plan.ops, 0, (kAhead + 1) * kPageOfOps);
  else if (size % kPageOfOps == 0)
    populate_elements(plan.ops, size + kAhead * kPageOfOps, kPageOfOps);
  return static_cast<OpId>(size - 1);
}

OpTags::OpTags(std::int32_t s, std::int32_t v, std::int32_t mb, std::int32_t lb, std::int32_t le,
               std::int32_t it)
    : stage(s), virtual_stage(v), microbatch(mb), iteration(it) {
  if (lb < -1 || lb > kMaxLayerIndex || le < -1 || le > kMaxLayerIndex)
    throw std::length_error("a layer index beyond 32767 in an op's tags");
  layer_begin = static_cast<std::int16_t>(lb);
  layer_end = static_cast<std::int16_t>(le);
}

OpExtras& Plan::extras_of(OpId id) {
  Op& op = ops[static_cast<std::size_t>(id)];
  if (op.extras < 0) {
    if (extras.size() >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
      throw std::length_error("a plan holds at most 2^31 - 1 ops with extras");
    op.extras = static_cast<std::int32_t>(extras.size());
    extras.emplace_back();
  }
  return extras[static_cast<std::size_t>(op.extras)];
}

std::string schedule_label(const PlanMeta& meta) {
  return meta.schedule + (meta.data_parallel == "ddp" ? "" : " " + meta.data_parallel) +
         (meta.ep > 1 ? " ep" + std::to_string(meta.ep) : "") +
         (meta.cp > 1 ? " cp" + std::to_string(meta.cp) : "");
}

const char* to_string(StreamKind k) {
  switch (k) {
    case StreamKind::kCompute:
      return "compute";
    case StreamKind::kH2D:
      return "h2d";
    case StreamKind::kD2H:
      return "d2h";
    case StreamKind::kP2PSend:
      return "p2p_send";
    case StreamKind::kP2PRecv:
      return "p2p_recv";
    case StreamKind::kCollective:
      return "collective";
    case StreamKind::kCpu:
      return "cpu";
    case StreamKind::kNvme:
      return "nvme";
    case StreamKind::kFill:
      return "fill";
  }
  return "?";
}

const char* to_string(DeviceKind k) {
  return k == DeviceKind::kGpu ? "gpu" : k == DeviceKind::kHost ? "host" : "nvme";
}

// The fields are bit-fields two to a word (an op stays 96 bytes); the values are checked here, so the
// narrowing the compiler warns about cannot lose anything.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wconversion"
void set_priority(TransferWork& w, std::int32_t priority) {
  w.priority = priority != 0 ? 1 : 0;
}

void set_latency_ns(TransferWork& w, std::int64_t ns) {
  w.latency_ns = static_cast<std::int32_t>(ns < 0 ? -1 : std::min<std::int64_t>(ns, kMaxTransferLatencyNs));
}
#pragma GCC diagnostic pop

}  // namespace pipesim::sim
