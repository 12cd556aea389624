#include "pipesim/sim/report/bubbles.hpp"

#include <algorithm>
#include <map>

namespace pipesim::sim {

const char* to_string(BubbleKind kind) {
  switch (kind) {
    case BubbleKind::kWarmup:
      return "warmup";
    case BubbleKind::kForwardBackward:
      return "forward-backward";
    case BubbleKind::kSteady:
      return "steady";
    case BubbleKind::kCooldown:
      return "cooldown";
    case BubbleKind::kOptimizerWait:
      return "optimizer-wait";
    case BubbleKind::kTail:
      return "tail";
  }
  return "?";
}

namespace {

bool is_forward(OpKind k) {
  return k == OpKind::kForward;
}

bool is_backward(OpKind k) {
  return k == OpKind::kBackward || k == OpKind::kBackwardInput || k == OpKind::kBackwardWeight ||
         k == OpKind::kRecompute;
}

using MemoryTrace = std::vector<std::pair<TimePoint, std::int64_t>>;  // (time, bytes in use), in time order

/// The engine's memory samples split by device in one pass (8K GPUs: one scan, not one per GPU).
std::vector<MemoryTrace> memory_by_device(const Timeline& tl, std::size_t devices) {
  std::vector<MemoryTrace> out(devices);
  for (const MemorySample& s : tl.memory)
    if (static_cast<std::size_t>(s.device) < devices)
      out[static_cast<std::size_t>(s.device)].push_back({s.time, s.bytes});
  return out;
}

/// A device's memory in use over time, from the engine's samples: the highest use within an interval.
class MemoryUse {
 public:
  MemoryUse(const Timeline& tl, DeviceId device, const MemoryTrace& samples)
      : samples_(samples), peak_(tl.peak_bytes[static_cast<std::size_t>(device)]) {}
  std::int64_t highest(TimePoint a, TimePoint b) const {
    if (samples_.empty()) return peak_;
    // The level in force at `a` (the last sample at or before it), then every change up to `b`.
    auto it = std::upper_bound(samples_.begin(), samples_.end(), a,
                               [](TimePoint t, const auto& s) { return t < s.first; });
    std::int64_t use = it == samples_.begin() ? 0 : std::prev(it)->second;
    for (; it != samples_.end() && it->first < b; ++it) use = std::max(use, it->second);
    return use;
  }

 private:
  const MemoryTrace& samples_;
  std::int64_t peak_ = 0;
};

}  // namespace

std::vector<Bubble> find_bubbles(const Plan& plan, const Timeline& tl) {
  // Compute-stream ops of each GPU, and the end of the run.
  std::map<DeviceId, std::vector<OpId>> ops_of;
  TimePoint run_end = 0;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    run_end = std::max(run_end, tl.end[i]);
    const Stream& s = plan.streams[static_cast<std::size_t>(plan.ops[i].stream)];
    if (s.kind == StreamKind::kCompute &&
        plan.devices[static_cast<std::size_t>(s.device)].kind == DeviceKind::kGpu)
      ops_of[s.device].push_back(static_cast<OpId>(i));
  }
  std::vector<Bubble> out;
  const std::vector<MemoryTrace> memory_of = memory_by_device(tl, plan.devices.size());
  for (auto& [bound_device, ops] : ops_of) {
    const DeviceId device = bound_device;  // a plain local: lambdas below capture it (clang 14)
    std::sort(ops.begin(), ops.end(), [&](OpId a, OpId b) {
      return tl.start[static_cast<std::size_t>(a)] != tl.start[static_cast<std::size_t>(b)]
                 ? tl.start[static_cast<std::size_t>(a)] < tl.start[static_cast<std::size_t>(b)]
                 : a < b;
    });
    // The last forward of each iteration on this GPU: later gaps between backwards are its cool-down.
    std::map<std::int32_t, TimePoint> last_forward;
    for (OpId id : ops) {
      const Op& op = plan.ops[static_cast<std::size_t>(id)];
      if (is_forward(op.kind))
        last_forward[op.tags.iteration] =
            std::max(last_forward[op.tags.iteration], tl.start[static_cast<std::size_t>(id)]);
    }
    const MemoryUse memory(tl, device, memory_of[static_cast<std::size_t>(device)]);
    const std::int64_t capacity = tl.capacity_bytes[static_cast<std::size_t>(device)];
    auto add = [&](TimePoint a, TimePoint b, const Op* before, const Op* after, OpId before_id,
                   OpId after_id) {
      if (b <= a) return;
      Bubble bubble;
      bubble.device = device;
      bubble.before = before_id;
      bubble.after = after_id;
      bubble.start = a;
      bubble.end = b;
      const Op& near = after ? *after : *before;
      bubble.stage = near.tags.stage;
      bubble.iteration = near.tags.iteration;
      bubble.free_bytes = std::max<std::int64_t>(0, capacity - memory.highest(a, b));
      if (!before)
        bubble.kind = BubbleKind::kWarmup;
      else if (!after)
        bubble.kind = BubbleKind::kTail;
      else if (after->kind == OpKind::kOptimizer)
        bubble.kind = BubbleKind::kOptimizerWait;
      else if (is_forward(before->kind) && is_backward(after->kind))
        bubble.kind = BubbleKind::kForwardBackward;
      else if (is_backward(after->kind) && a >= last_forward[after->tags.iteration])
        bubble.kind = BubbleKind::kCooldown;
      else
        bubble.kind = BubbleKind::kSteady;
      out.push_back(bubble);
    };
    // Bubbles are classified by the passes around them, looking past collectives on the compute stream.
    auto is_pass = [](OpKind k) { return is_forward(k) || is_backward(k) || k == OpKind::kOptimizer; };
    std::vector<const Op*> next_pass(ops.size() + 1, nullptr);
    for (std::size_t k = ops.size(); k-- > 0;) {
      const Op& op = plan.ops[static_cast<std::size_t>(ops[k])];
      next_pass[k] = is_pass(op.kind) ? &op : next_pass[k + 1];
    }
    const Op* previous = nullptr;  // the last pass before the gap
    const Op* any_previous = nullptr;
    TimePoint free_from = 0;
    for (std::size_t k = 0; k < ops.size(); ++k) {
      const Op& op = plan.ops[static_cast<std::size_t>(ops[k])];
      const Op* after = next_pass[k] ? next_pass[k] : &op;
      add(free_from, tl.start[static_cast<std::size_t>(ops[k])], previous ? previous : any_previous, after,
          k > 0 ? ops[k - 1] : -1, ops[k]);
      free_from = std::max(free_from, tl.end[static_cast<std::size_t>(ops[k])]);
      if (is_pass(op.kind)) previous = &op;
      any_previous = &op;
    }
    if (any_previous) add(free_from, run_end, previous ? previous : any_previous, nullptr, ops.back(), -1);
  }
  return out;
}

}  // namespace pipesim::sim
