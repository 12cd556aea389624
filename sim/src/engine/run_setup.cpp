// Reading a plan into the state of one engine run: the op records, the streams' chains, the dependents,
// the transfers' shapes and the collective groups.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "core/page_populator.hpp"
#include "engine/group_numbering.hpp"
#include "engine/run.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/hardware/stragglers.hpp"
#include "plan/endpoints.hpp"
#include "plan/plan_validator.hpp"

namespace pipesim::sim::detail {

struct RunState::PlanReading {
  explicit PlanReading(const Plan& plan) : check(plan, plan.origin) {}

  // The plan is checked as it is read: devices and streams on construction, each op in read_op.
  PlanValidator check;
  // Each op's dependents, gathered as the ops that name it are read (copied into ops_ after the pass: an op
  // may depend on one later in the plan).
  HugeVector<OpId> dependents;
  // Streams whose ops collectives may slow or that slow compute (GPU streams, when the profile names a
  // slowdown): looked up per stream, not per op.
  std::vector<char> contended;
  // Sized for every op up front (address space only: pages are backed as entries are written), so that
  // neither array is copied as it grows: growth was a fifth of the tp 8 x pp 16 x dp 64 run's page faults.
  HugeVector<std::int32_t> group_ids;
  struct Member {
    OpId op;
    std::int32_t size;  // the group's size this op states
  };
  HugeVector<Member> grouped;  // the transfers that belong to a collective group, beside group_ids
  // Each stream's last transfer shapes (a stream's index into `memos` once it carries a transfer).
  std::vector<ShapeMemos> memos;
  std::vector<std::int32_t> memo_of_stream;
  DurationCache durations;
};

RunState::RunState(const Plan& plan, const EngineOptions& options)
    : plan_(plan),
      options_(options),
      topo_(plan.hw, used_nodes(plan), plan.meta.node_twins, plan.meta.switch_twins),
      net_(capacities(topo_)) {
  net_.set_batching(true);
}

void RunState::read_plan() {
  PlanReading r(plan_);
  const std::size_t n = plan_.ops.size();
  slowdown_ = plan_.hw.gpu.collective_compute_slowdown;
  straggler_ = straggler_slowdown(plan_.meta.gpu_speed_cv, plan_.num_gpus());
  if (slowdown_ > 0) {
    computing_.assign(plan_.devices.size(), {});
  }
  size_op_arrays(n);
  r.dependents.assign(n, -1);
  r.contended = read_streams();
  r.group_ids.reserve(n);
  r.grouped.reserve(n);
  r.memo_of_stream.assign(plan_.streams.size(), -1);
  endpoints_.resize(plan_.devices.size());
  for (std::size_t d = 0; d < plan_.devices.size(); ++d) endpoints_[d] = endpoint_of(plan_.devices[d]);
  for (std::size_t i = 0; i < n; ++i) read_op(i, r);
  r.check.finish();
  for (std::size_t i = 0; i < n; ++i) ops_[i].dependents = r.dependents[i];
  number_groups(r, n);
}

void RunState::size_op_arrays(std::size_t n) {
  // Every op's start and end are written as it runs (a run that leaves one out is a deadlock and returns no
  // timeline), so they are not filled first.
  tl_.start.resize(n);
  tl_.end.resize(n);
  ops_.clear();
  ops_.reserve(n);  // filled by read_op: each op's entry is written once
  // Backed with pages on the other CPU meanwhile: the records as read_op fills them, the timeline as the
  // run does.
  populate_elements(ops_, 0, n);
  populate_elements(tl_.start, 0, n);
  populate_elements(tl_.end, 0, n);
}

std::vector<char> RunState::read_streams() {
  streams_.resize(plan_.streams.size());
  std::vector<char> contended(plan_.streams.size(), 0);
  for (std::size_t s = 0; s < plan_.streams.size(); ++s) {
    const DeviceId d = plan_.streams[s].device;
    streams_[s].device = d;
    contended[s] = slowdown_ > 0 && plan_.devices[static_cast<std::size_t>(d)].kind == DeviceKind::kGpu;
  }
  return contended;
}

void RunState::read_op(std::size_t i, PlanReading& r) {
  const Op& op = plan_.ops[i];
  r.check.op(i, op);
  const OpExtras& extras = plan_.extras_of(op);
  const bool timed_by_work = op.fixed_duration < 0;
  const auto id = static_cast<OpId>(i);
  HotOp& h = ops_.emplace_back();
  auto& st = streams_[static_cast<std::size_t>(op.stream)];
  h.stream = op.stream;
  if (st.last_op >= 0)
    ops_[static_cast<std::size_t>(st.last_op)].next = id;
  else
    st.head_op = id;
  st.last_op = id;
  h.deps_left = static_cast<std::int32_t>(op.deps.size());
  // The flags start false: each is stored only when set (a bit field's store reads its byte first).
  if (extras.alloc_bytes != 0) h.allocates = true;
  if (extras.free_bytes != 0) h.frees = true;
  if (r.contended[static_cast<std::size_t>(op.stream)] != 0) {
    if (is_collective(op.kind)) h.collective = true;
    if (std::holds_alternative<SharedCompute>(op.payload) && timed_by_work) h.stretchable = true;
  }
  if (const auto* t = std::get_if<TransferWork>(&op.payload); t && timed_by_work) {
    h.mode = Mode::kFlow;
    h.duration = -1;
    if (t->group >= 0) {
      r.group_ids.push_back(t->group);
      r.grouped.push_back({id, t->group_size});
    }
    std::int32_t& memo = r.memo_of_stream[static_cast<std::size_t>(op.stream)];
    if (memo < 0) {
      memo = static_cast<std::int32_t>(r.memos.size());
      r.memos.emplace_back();
    }
    h.end_version = shape_of(r.memos[static_cast<std::size_t>(memo)], *t, is_collective(op.kind));
  } else {
    h.mode = std::holds_alternative<CpuWork>(op.payload) && timed_by_work ? Mode::kCpu : Mode::kTimed;
    try {
      h.duration = timed_by_work ? cached_duration(op, st.device, r.durations) : op.fixed_duration;
    } catch (const InputError&) {
      throw InputError(
          plan_.hw.origin, fmt::format("/ops/{}", i),
          "op duration exceeds the simulated time range (about 292 years); check its work and rates");
    }
  }
  if (h.mode == Mode::kTimed && !h.allocates && !h.frees && !h.collective && !h.stretchable) h.plain = true;
  for (OpId d : op.deps) add_dependent(r.dependents[static_cast<std::size_t>(d)], id);
}

void RunState::number_groups(const PlanReading& r, std::size_t n) {
  // The members are numbered from the ids kept beside them: the plan's ops are not read again.
  const GroupNumbering groups(r.group_ids, n);
  groups_.assign(groups.size(), {});
  for (std::size_t k = 0; k < r.grouped.size(); ++k) {
    const auto i = static_cast<std::size_t>(r.grouped[k].op);
    const std::int32_t group = r.group_ids[k], size = r.grouped[k].size;
    Group& g = groups_[groups[group]];
    ops_[i].duration = static_cast<Duration>(groups[group]);
    if (g.size != 0 && g.size != size)
      throw InputError(plan_.origin, fmt::format("/ops/{}/transfer/group_size", i),
                       fmt::format("{} members, where another op of collective group {} says {}; valid: {}",
                                   size, group, g.size, g.size));
    g.size = size;
    if (++g.ready > g.size)  // counts members here; reset below
      throw InputError(plan_.origin, fmt::format("/ops/{}/transfer/group", i),
                       fmt::format("collective group {} has {} member ops; valid: at most its group_size, {} "
                                   "(each collective its own group)",
                                   group, g.ready, g.size));
  }
  // Each group's member ops in one flat array, in the order they become ready (sized by the ops present: a
  // group may declare more members than the plan holds, and then never starts; it starts once `size` are
  // ready, which is then all of them).
  std::int64_t members = 0;
  for (Group& g : groups_) {
    g.begin = members;
    members += std::exchange(g.ready, 0);
  }
  group_members_.assign(static_cast<std::size_t>(members), -1);
}

Duration RunState::compute_duration(const Op& op, DeviceId device) const {
  const auto& hw = plan_.hw;
  if (const auto* c = compute_of(op.payload)) {
    // The framework's element-wise kernels stream their bytes at its share of the GPU's rate.
    const double share = plan_.meta.elementwise_efficiency;
    const std::int64_t mem =
        share < 1 ? c->score_bytes +
                        static_cast<std::int64_t>(static_cast<double>(c->mem_bytes - c->score_bytes) / share)
                  : c->mem_bytes;
    const Duration rated =
        hw.op_ns(c->flops, c->gemm_gflop, c->kernels, plan_.meta.dtype, mem, c->expert_flops,
                 c->expert_gemm_gflop, c->expert_weight_bytes, c->attention_flops, c->attention_bytes,
                 c->wide_flops, c->score_bytes, c->rated_flops, c->rated_tflops);
    // Every GPU keeps the pace of the job's slowest (stragglers), and runs no faster than the CPU issues its
    // kernels.
    const Duration gpu = straggler_ == 1
                             ? rated
                             : static_cast<Duration>(std::llround(static_cast<double>(rated) * straggler_));
    return std::max(gpu, c->kernels * plan_.meta.host_dispatch_ns + c->host_ns);
  }
  if (const auto* m = std::get_if<MemoryWork>(&op.payload)) {
    if (plan_.devices[static_cast<std::size_t>(device)].kind == DeviceKind::kGpu)
      return hw.memory_ns(m->bytes);
    return duration_for_work(static_cast<double>(m->bytes), hw.host.dram_GBps * 1e9);
  }
  if (const auto* w = std::get_if<CpuWork>(&op.payload))
    return duration_for_work(static_cast<double>(w->params), hw.adam_params_per_s(w->threads));
  return 0;
}

std::uint32_t RunState::shape_of(ShapeMemos& memo, const TransferWork& t, bool ring) {
  if (memo.entry[memo.newest].matches(t, ring)) return memo.entry[memo.newest].shape;
  memo.newest ^= 1;
  ShapeMemo& m = memo.entry[memo.newest];
  if (!m.matches(t, ring)) {
    if (shapes_.size() > std::numeric_limits<std::uint32_t>::max())
      throw InputError(plan_.origin, "/ops", "over 2^32 distinct transfers; valid: fewer");
    TransferShape shape;
    shape.path = ring ? topo_.ring_path(endpoint(t.src), endpoint(t.dst), t.bytes, t.message_bytes)
                      : topo_.path(endpoint(t.src), endpoint(t.dst), t.bytes);
    shape.bytes = t.bytes;
    shape.latency_steps = t.latency_steps;
    shape.priority = t.priority;
    shape.latency_ns = t.latency_ns;
    shapes_.push_back(shape);
    m.src = t.src, m.dst = t.dst, m.ring = ring;
    m.latency_steps = t.latency_steps, m.priority = t.priority;
    m.bytes = t.bytes, m.message_bytes = t.message_bytes, m.latency_ns = t.latency_ns;
    m.shape = static_cast<std::uint32_t>(shapes_.size() - 1);
  }
  return m.shape;
}

void RunState::add_dependent(OpId& dependents, OpId op) {
  if (dependents == -1) {
    dependents = op;
    return;
  }
  // A second dependent: both move to links (the chain is walked backwards, so the first is linked first).
  if (dependent_links_.size() + 2 > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) - 2)
    throw InputError(plan_.origin, "/ops",
                     "over 2^31 - 4 dependencies on ops that have more than one dependent; valid: fewer");
  std::int32_t prev = -1;
  if (dependents >= 0) {
    prev = static_cast<std::int32_t>(dependent_links_.size());
    dependent_links_.push_back({dependents, -1});
  } else {
    prev = chain_link(dependents);
  }
  dependents = chain_ref(static_cast<std::int32_t>(dependent_links_.size()));
  dependent_links_.push_back({op, prev});
}

}  // namespace pipesim::sim::detail
