#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/fill/fill.hpp"

namespace pipesim::sim {

FillPolicy parse_fill_policy(const std::string& name) {
  if (name == "fifo") return FillPolicy::kFifo;
  if (name == "sjf") return FillPolicy::kShortestJobFirst;
  if (name == "max-efficiency") return FillPolicy::kMaxEfficiency;
  if (name == "deadline") return FillPolicy::kDeadline;
  throw InputError(Option{"fill_policy"}, "",
                   fmt::format("unknown policy '{}'; valid: fifo, sjf, max-efficiency, deadline", name));
}

const char* to_string(FillPolicy p) {
  switch (p) {
    case FillPolicy::kFifo:
      return "fifo";
    case FillPolicy::kShortestJobFirst:
      return "sjf";
    case FillPolicy::kMaxEfficiency:
      return "max-efficiency";
    case FillPolicy::kDeadline:
      return "deadline";
  }
  return "?";
}

namespace {

/// The fill jobs waiting at `now`, in the order the policy serves them.
std::vector<std::size_t> queue_order(const std::vector<FillJob>& jobs, const std::vector<std::int64_t>& left,
                                     TimePoint now, FillPolicy policy) {
  std::vector<std::size_t> q;
  for (std::size_t j = 0; j < jobs.size(); ++j)
    if (left[j] > 0 && duration_from_seconds(jobs[j].arrival_s) <= now) q.push_back(j);
  auto key = [&](std::size_t j) -> double {
    switch (policy) {
      case FillPolicy::kFifo:
        return jobs[j].arrival_s;
      case FillPolicy::kShortestJobFirst:
        return static_cast<double>(left[j]) * static_cast<double>(jobs[j].unit_ns);
      case FillPolicy::kMaxEfficiency:  // most useful FLOPs per second of bubble first
        return -jobs[j].unit_flops / static_cast<double>(jobs[j].unit_ns);
      case FillPolicy::kDeadline:
        return jobs[j].deadline_s > 0 ? jobs[j].deadline_s : 1e300;
    }
    return 0;
  };
  std::stable_sort(q.begin(), q.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  return q;
}

/// Host <-> GPU bandwidth of one GPU while every GPU of its node copies at once (pipeline stages' bubbles
/// line up, so their context switches do): its lane, its share of the switch uplink and of the root complex.
double concurrent_host_copy_GBps(const HardwareProfile& hw) {
  const auto& pcie = hw.node.pcie;
  std::size_t per_switch = 1;
  for (const auto& sw : pcie.switches) per_switch = std::max(per_switch, sw.size());
  const double root = pcie.root_complex_GBps > 0
                          ? pcie.root_complex_GBps
                          : pcie.uplink_GBps * static_cast<double>(pcie.switches.size());
  double bw = std::min(pcie.lane_GBps, pcie.uplink_GBps / static_cast<double>(per_switch));
  if (hw.node.gpus > 0 && root > 0) bw = std::min(bw, root / hw.node.gpus);
  return bw;
}

/// A job's unit at its own batch, then at each smaller batch: largest first.
std::vector<FillShape> shapes_of(const FillJob& job) {
  std::vector<FillShape> shapes{{job.batch, job.unit_ns, job.unit_flops, job.unit_memory_bytes}};
  shapes.insert(shapes.end(), job.smaller.begin(), job.smaller.end());
  return shapes;
}

/// What a job runs in one bubble: as many units as fit at the largest batch that fits, then smaller batches
/// in what remains of the bubble (no further switch: the job's state is already on the GPU).
struct ChunkSize {
  Duration busy = 0;
  std::int64_t units = 0, unit_memory = 0;
  bool smaller = false;  // some units ran at a smaller batch than the job's own
  double flops = 0;
};

/// Sizes job's chunk in bubble `b` with `room` to run in, taking what it runs off `left`.
ChunkSize size_chunk(const FillJob& job, const std::vector<FillShape>& shapes, const Bubble& b, Duration room,
                     std::int64_t& left) {
  ChunkSize c;
  for (std::size_t k = 0; k < shapes.size() && left > 0; ++k) {
    const FillShape& shape = shapes[k];
    if (job.state_bytes + shape.unit_memory_bytes > b.free_bytes) continue;  // no room in this bubble
    const std::int64_t wanted = (left + shape.batch - 1) / shape.batch;
    const std::int64_t n = shape.unit_ns > 0 ? std::min(wanted, room / shape.unit_ns) : wanted;
    if (n <= 0) continue;
    c.units += n;
    c.busy += n * shape.unit_ns;
    room -= n * shape.unit_ns;
    c.flops += static_cast<double>(n) * shape.unit_flops;
    left = std::max<std::int64_t>(0, left - n * shape.batch);
    c.unit_memory = std::max(c.unit_memory, shape.unit_memory_bytes);
    c.smaller = c.smaller || k > 0;
  }
  return c;
}

/// Adds the fill ops to the plan, with the fill streams and host devices they need, made on first use.
class FillEmitter {
 public:
  FillEmitter(Plan& plan, const FillOptions& o)
      : plan_(plan), o_(o), copy_GBps_(concurrent_host_copy_GBps(plan.hw)) {
    for (std::size_t d = 0; d < plan_.devices.size(); ++d)
      if (plan_.devices[d].kind == DeviceKind::kHost)
        host_of_node_[plan_.devices[d].node] = static_cast<DeviceId>(d);
  }

  /// Planning estimate of a context switch: the state over the GPU's share of the PCIe tree, plus the fixed
  /// overhead. The re-simulation times the real transfer, contending with the main job's traffic.
  Duration switch_ns(std::int64_t bytes) const {
    return o_.switch_overhead_ns +
           (bytes > 0 ? plan_.hw.node.pcie.latency +
                            static_cast<Duration>(std::ceil(static_cast<double>(bytes) / copy_GBps_))
                      : 0);
  }

  /// Job `j`'s chunk `c` in bubble `b` after op `chain`: the switch in, the chunk, the switch back. Returns
  /// the chunk's op and the last op.
  std::pair<OpId, OpId> emit_chunk(const Bubble& b, std::size_t j, const FillJob& job, const ChunkSize& c,
                                   OpId chain) {
    const StreamId stream = stream_of(b.device);
    const OpTags tags{b.stage, -1, static_cast<std::int32_t>(j), -1, -1, b.iteration};
    OpId first = -1;
    if (job.state_bytes > 0) {
      TransferWork w;
      w.src = host(b.device);
      w.dst = b.device;
      w.bytes = job.state_bytes;
      first = add(stream, OpKind::kContextSwitch, tags, w, -1, chain);
    }
    // The chunk: its units plus the fixed switch overheads; it holds the job's state and working memory.
    const Duration work = c.busy + o_.switch_overhead_ns * (job.writes_back ? 2 : 1);
    OpId chunk = add(stream, OpKind::kFill, tags, ComputeWork{}, work, first >= 0 ? first : chain);
    plan_.extras_of(chunk).alloc_bytes = c.unit_memory + (first >= 0 ? 0 : job.state_bytes);
    if (first >= 0) plan_.extras_of(first).alloc_bytes = job.state_bytes;
    OpId last = chunk;
    if (job.writes_back && job.state_bytes > 0) {
      TransferWork w;
      w.src = b.device;
      w.dst = host(b.device);
      w.bytes = job.state_bytes;
      last = add(stream, OpKind::kContextSwitch, tags, w, -1, chunk);
      plan_.extras_of(chunk).free_bytes = c.unit_memory;
      plan_.extras_of(last).free_bytes = job.state_bytes;
    } else {
      plan_.extras_of(chunk).free_bytes = c.unit_memory + job.state_bytes;
    }
    if (b.after >= 0) plan_.ops[static_cast<std::size_t>(b.after)].deps.push_back(last);
    return {chunk, last};
  }

 private:
  DeviceId host(DeviceId gpu) {
    const std::int32_t node = plan_.devices[static_cast<std::size_t>(gpu)].node;
    auto it = host_of_node_.find(node);
    if (it != host_of_node_.end()) return it->second;
    plan_.devices.push_back({fmt::format("host{}", node), DeviceKind::kHost, node, 0, 0});
    return host_of_node_[node] = static_cast<DeviceId>(plan_.devices.size() - 1);
  }
  StreamId stream_of(DeviceId gpu) {
    auto it = fill_stream_.find(gpu);
    if (it != fill_stream_.end()) return it->second;
    plan_.streams.push_back({gpu, StreamKind::kFill, "fill"});
    return fill_stream_[gpu] = static_cast<StreamId>(plan_.streams.size() - 1);
  }
  OpId add(StreamId stream, OpKind kind, const OpTags& tags, Payload payload, Duration fixed, OpId dep) {
    const OpId id = append_op(plan_, stream, kind, tags, std::move(payload), fixed);
    if (dep >= 0) plan_.ops[static_cast<std::size_t>(id)].deps.push_back(dep);
    return id;
  }

  Plan& plan_;
  const FillOptions& o_;
  const double copy_GBps_;
  std::map<DeviceId, StreamId> fill_stream_;
  std::map<std::int32_t, DeviceId> host_of_node_;
};

/// A job fits when some bubble has the memory and the time for one unit (at some batch) with its context
/// switches.
void mark_fitting_jobs(FillOutcome& out, const std::vector<FillJob>& jobs,
                       const std::vector<std::vector<FillShape>>& shapes, const std::vector<Bubble>& bubbles,
                       const FillEmitter& fill, const FillOptions& o) {
  for (std::size_t j = 0; j < jobs.size(); ++j)
    for (const Bubble& b : bubbles) {
      const Duration usable = static_cast<Duration>(static_cast<double>(b.length()) * o.bubble_share) -
                              fill.switch_ns(jobs[j].state_bytes) * (jobs[j].writes_back ? 2 : 1);
      for (const FillShape& shape : shapes[j])
        if (jobs[j].state_bytes + shape.unit_memory_bytes <= b.free_bytes && usable >= shape.unit_ns)
          out.jobs[j].fits = true;
      if (out.jobs[j].fits) break;
    }
}

}  // namespace

FillOutcome add_fill_jobs(Plan& plan, const Timeline& tl, const std::vector<FillJob>& jobs,
                          const FillOptions& o) {
  FillOutcome out;
  for (const FillJob& j : jobs) out.jobs.push_back({j.name, 0, j.units, 0, false, -1});
  std::vector<Bubble> bubbles = find_bubbles(plan, tl);
  std::stable_sort(bubbles.begin(), bubbles.end(), [](const Bubble& a, const Bubble& b) {
    return a.start != b.start ? a.start < b.start : a.device < b.device;
  });
  // Work left per job in samples x blocks (a unit of batch b does b of it).
  std::vector<std::int64_t> left;
  std::vector<std::vector<FillShape>> shapes;
  for (const FillJob& j : jobs) {
    left.push_back(j.units * j.batch);
    shapes.push_back(shapes_of(j));
  }
  FillEmitter fill(plan, o);
  mark_fitting_jobs(out, jobs, shapes, bubbles, fill, o);
  for (const Bubble& b : bubbles) {
    Duration usable = static_cast<Duration>(static_cast<double>(b.length()) * o.bubble_share);
    OpId chain = b.before;  // chunks in one bubble follow each other
    for (std::size_t j : queue_order(jobs, left, b.start, o.policy)) {
      const FillJob& job = jobs[j];
      const Duration in = fill.switch_ns(job.state_bytes),
                     back = job.writes_back ? fill.switch_ns(job.state_bytes) : 0;
      const ChunkSize c = size_chunk(job, shapes[j], b, std::max<Duration>(0, usable - in - back), left[j]);
      if (c.units <= 0) continue;
      const auto [chunk, last] = fill.emit_chunk(b, j, job, c, chain);
      chain = last;
      usable -= in + back + c.busy;
      out.jobs[j].units_done = (job.units * job.batch - left[j]) / job.batch;
      ++out.jobs[j].chunks;
      if (c.smaller) ++out.jobs[j].smaller_batch_chunks;
      out.fill_ops.push_back(chunk);
      out.fill_flops += c.flops;
      out.jobs[j].last_op = last;
    }
  }
  return out;
}

}  // namespace pipesim::sim
