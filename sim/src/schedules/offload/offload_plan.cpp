#include "schedules/offload/offload_plan.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/option.hpp"
#include "schedules/plan_metadata.hpp"
#include "schedules/plan_size_guard.hpp"

namespace pipesim::sim::detail {

OffloadPlan::OffloadPlan(const ScheduleInput& in, const std::string& schedule, std::int32_t gpus)
    : in_(in), gpus_(gpus) {
  if (in.tp != 1 || in.dp != 1)
    throw InputError(in.tp != 1 ? Option{"tp"} : Option{"dp"}, "",
                     fmt::format("{} runs one pipeline over the GPUs; valid: {} 1 {} 1", schedule,
                                 spelled(Option{"tp"}), spelled(Option{"dp"})));
  if (in.iterations < 1 || in.iterations > 10000)
    throw InputError(Option{"iterations"}, "", "valid: 1 .. 10000");
  // About four ops per layer and microbatch: refuse plans that would not fit in memory rather than thrash
  // (in doubles: the product of untrusted counts may exceed int64).
  const double estimate = static_cast<double>(in.microbatches) * in.iterations * in.accum_steps *
                          static_cast<double>(in.costs.front().size()) * 4;
  check_plan_size(estimate, in.memory_budget_bytes, Option{"microbatches"},
                  "use fewer microbatches, accumulation steps or iterations");
  plan_.hw = in.hw;
  plan_.meta.schedule = schedule;
  const std::int32_t gpn = in.hw.node.gpus;
  plan_.nodes = (gpus + gpn - 1) / gpn;  // nodes beyond the job's are idle
  for (std::int32_t n = 0; n < plan_.nodes; ++n) {
    plan_.devices.push_back({fmt::format("host{}", n), DeviceKind::kHost, n, 0, 0});
    host_device_.push_back(static_cast<DeviceId>(plan_.devices.size() - 1));
  }
  cpu_streams_.resize(static_cast<std::size_t>(plan_.nodes));
  static const char* kNames[kSlots] = {"compute", "weight_upload", "activation_upload", "download",
                                       "p2p_recv"};
  static const StreamKind kKinds[kSlots] = {StreamKind::kCompute, StreamKind::kH2D, StreamKind::kH2D,
                                            StreamKind::kD2H, StreamKind::kP2PRecv};
  for (std::int32_t g = 0; g < gpus; ++g) {
    plan_.devices.push_back({fmt::format("gpu{}", g), DeviceKind::kGpu, g / gpn, g % gpn, 0});
    gpu_device_.push_back(static_cast<DeviceId>(plan_.devices.size() - 1));
    std::vector<StreamId> ids;
    for (std::size_t s = 0; s < kSlots; ++s) {
      plan_.streams.push_back({gpu_device_.back(), kKinds[s], kNames[s]});
      ids.push_back(static_cast<StreamId>(plan_.streams.size() - 1));
    }
    streams_.push_back(std::move(ids));
  }
  weight_release_.resize(static_cast<std::size_t>(gpus));
}

std::int32_t OffloadPlan::gpu_of_op(OpId id) const {
  const DeviceId d =
      plan_.streams[static_cast<std::size_t>(plan_.ops[static_cast<std::size_t>(id)].stream)].device;
  return static_cast<std::int32_t>(std::find(gpu_device_.begin(), gpu_device_.end(), d) -
                                   gpu_device_.begin());
}

DeviceId OffloadPlan::host_of_gpu(std::int32_t g) const {
  return host_device_[static_cast<std::size_t>(g / in_.hw.node.gpus)];
}

StreamId OffloadPlan::cpu_stream(std::int32_t node, std::int32_t queue) {
  auto& q = cpu_streams_[static_cast<std::size_t>(node)];
  while (static_cast<std::int32_t>(q.size()) <= queue) {
    plan_.streams.push_back(
        {host_device_[static_cast<std::size_t>(node)], StreamKind::kCpu, fmt::format("adam{}", q.size())});
    q.push_back(static_cast<StreamId>(plan_.streams.size() - 1));
  }
  return q[static_cast<std::size_t>(queue)];
}

namespace {
OpId push(Plan& plan, Op op, std::vector<OpId> deps, const OpExtras& extras) {
  deps.erase(std::remove(deps.begin(), deps.end(), kNoOp), deps.end());
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  op.deps = std::move(deps);
  plan.ops.push_back(std::move(op));
  const auto id = static_cast<OpId>(plan.ops.size() - 1);
  if (extras != OpExtras{}) plan.extras_of(id) = extras;
  return id;
}
}  // namespace

OpId OffloadPlan::forward(std::int32_t g, const OpTags& tags, const RangeCost& r, std::vector<OpId> deps,
                          std::int64_t alloc, std::int64_t free) {
  return compute(
      g, OpKind::kForward, tags,
      ComputeWork{r.fwd, r.gemm, r.kernels, r.fwd_mem, r.expert_fwd, r.expert_gemm, r.expert_weight_bytes, 0,
                  0, r.gemms, r.wide_fwd, r.fwd_score_mem, r.rated_fwd.flops, r.rated_fwd.tflops()},
      r.profiled ? r.fwd_ns : -1, std::move(deps), alloc, free);
}

OpId OffloadPlan::recompute(std::int32_t g, const OpTags& tags, const RangeCost& r, std::vector<OpId> deps,
                            std::int64_t alloc, std::int64_t free) {
  return compute(g, OpKind::kRecompute, tags,
                 ComputeWork{r.checkpoint_recompute, r.gemm, r.kernels, r.checkpoint_recompute_mem,
                             r.expert_checkpoint_recompute, r.expert_gemm, r.expert_weight_bytes, 0, 0,
                             r.block_gemms, r.wide_checkpoint_recompute, r.checkpoint_recompute_score_mem,
                             r.rated_checkpoint_recompute.flops, r.rated_checkpoint_recompute.tflops()},
                 r.profiled ? r.checkpoint_recompute_ns : -1, std::move(deps), alloc, free);
}

OpId OffloadPlan::backward(std::int32_t g, const OpTags& tags, const RangeCost& r, std::vector<OpId> deps,
                           std::int64_t alloc, std::int64_t free) {
  return compute(
      g, OpKind::kBackward, tags,
      ComputeWork{r.bwd, r.gemm, 2 * r.kernels + r.input_grad_extra_kernels, r.bwd_mem + r.grad_accum_mem, r.expert_bwd, r.expert_gemm,
                  2 * r.expert_weight_bytes, 0, 0, r.bwd_gemms, r.wide_bwd_in + r.wide_bwd_w, r.bwd_score_mem,
                  (r.rated_bwd_in + r.rated_bwd_w).flops, (r.rated_bwd_in + r.rated_bwd_w).tflops()},
      r.profiled ? r.bwd_ns : -1, std::move(deps), alloc, free);
}

OpId OffloadPlan::compute(std::int32_t g, OpKind kind, const OpTags& tags, ComputeWork work, Duration fixed,
                          std::vector<OpId> deps, std::int64_t alloc, std::int64_t free) {
  Op op;
  op.stream = stream(g, kCompute);
  op.kind = kind;
  op.tags = tags;
  op.payload = work;
  op.fixed_duration = fixed;
  return push(plan_, std::move(op), std::move(deps), {alloc, free});
}

OpId OffloadPlan::transfer(StreamId s, OpKind kind, const OpTags& tags, DeviceId src, DeviceId dst,
                           std::int64_t bytes, std::vector<OpId> deps, std::int32_t priority,
                           std::int64_t alloc, std::int64_t free) {
  Op op;
  op.stream = s;
  op.kind = kind;
  op.tags = tags;
  TransferWork w;
  w.src = src;
  w.dst = dst;
  w.bytes = bytes;
  set_priority(w, priority);
  op.payload = w;
  op.fixed_duration = bytes == 0 ? 0 : (kind == OpKind::kP2P ? in_.p2p_fixed_ns : -1);
  return push(plan_, std::move(op), std::move(deps), {alloc, free});
}

OpId OffloadPlan::cpu_adam(StreamId s, const OpTags& tags, std::int64_t params, std::int32_t threads,
                           std::vector<OpId> deps) {
  Op op;
  op.stream = s;
  op.kind = OpKind::kOptimizer;
  op.tags = tags;
  op.payload = CpuWork{params, std::clamp(threads, 1, in_.hw.host.cores)};
  return push(plan_, std::move(op), std::move(deps), {});
}

void OffloadPlan::add_dep(OpId op, OpId dep) {
  if (op == kNoOp || dep == kNoOp) return;
  auto& d = plan_.ops[static_cast<std::size_t>(op)].deps;
  if (std::find(d.begin(), d.end(), dep) == d.end()) d.push_back(dep);
}

void OffloadPlan::add_host_resident(std::int32_t node, std::int64_t bytes) {
  plan_.devices[static_cast<std::size_t>(host_device_[static_cast<std::size_t>(node)])].resident_bytes +=
      bytes;
}

Plan OffloadPlan::finish(const std::vector<std::int32_t>& partition, std::string note) {
  auto& m = plan_.meta;
  m.pp = gpus_;
  m.tp = 1;
  m.dp = 1;
  m.recompute = "full";
  m.replicas = "explicit";
  m.simulated_gpus = gpus_;
  m.partition = partition;
  m.note = std::move(note);
  // Blocks re-run their forward from the stage-input checkpoint; embedding and head do not.
  fill_job_metadata(m, in_,
                    [](const LayerCost& l) { return l.role == LayerRole::kBlock ? l.fwd_flops : 0.0; });
  return std::move(plan_);
}

RangeCost OffloadPlan::stage_cost(LayerRange range, std::int32_t m) const {
  const auto table = static_cast<std::size_t>(in_.cost_of_microbatch[static_cast<std::size_t>(m)]);
  return range_cost(in_.costs[table], range.first, range.second);
}

void OffloadPlan::hold_model_on_host(std::int32_t node, std::int64_t params, std::int64_t trainable,
                                     std::int64_t extra) {
  add_host_resident(node, kWeightBytesPerParam * params +
                              (kAdamStateBytesPerParam + kGradBytesPerParam) * trainable + extra);
}

OpId OffloadPlan::upload_weights(std::int32_t g, const RangeCost& r, const OpTags& tags,
                                 std::vector<OpId> deps, std::int32_t priority, std::int64_t chunk_bytes) {
  auto& released = weight_release_[static_cast<std::size_t>(g)];
  // The k-th upload waits for the (k-2)-th stage's weights to leave: two stages' weights at most.
  deps.push_back(released.size() >= 2 ? released[released.size() - 2] : kNoOp);
  std::int64_t left = r.weight_bytes();
  const std::int64_t chunk = chunk_bytes > 0 ? chunk_bytes : left;
  OpId last = kNoOp;
  do {
    const std::int64_t bytes = std::min(left, chunk);
    last = transfer(stream(g, kWeightUp), OpKind::kH2D, tags, host_of_gpu(g), gpu(g), bytes, std::move(deps),
                    priority, bytes);
    deps = {};
    left -= bytes;
  } while (left > 0);
  released.push_back(kNoOp);  // set when the stage's weights leave
  return last;
}

void OffloadPlan::drop_weights(std::int32_t g, const RangeCost& r, OpId last) {
  add_free(last, r.weight_bytes());
  weight_release_[static_cast<std::size_t>(g)].back() = last;
}

OpId OffloadPlan::download_gradients(std::int32_t g, const RangeCost& r, const OpTags& tags, OpId last) {
  OpId down = transfer(stream(g, kDown), OpKind::kD2H, tags, gpu(g), host_of_gpu(g), r.grad_bytes(), {last},
                       0, 0, r.grad_bytes() + r.weight_bytes());
  weight_release_[static_cast<std::size_t>(g)].back() = down;
  return down;
}

}  // namespace pipesim::sim::detail
