#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "pipesim/sim/error.hpp"
#include "pipesim/sim/fill.hpp"

namespace pipesim::sim {

FillPolicy parse_fill_policy(const std::string& name) {
  if (name == "fifo") return FillPolicy::kFifo;
  if (name == "sjf") return FillPolicy::kShortestJobFirst;
  if (name == "max-efficiency") return FillPolicy::kMaxEfficiency;
  if (name == "deadline") return FillPolicy::kDeadline;
  throw InputError("--fill-policy", "",
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

}  // namespace

FillOutcome add_fill_jobs(Plan& plan, const Timeline& tl, const std::vector<FillJob>& jobs,
                          const FillOptions& o) {
  FillOutcome out;
  for (const FillJob& j : jobs) out.jobs.push_back({j.name, 0, j.units, 0, false, -1});
  std::vector<Bubble> bubbles = find_bubbles(plan, tl);
  std::stable_sort(bubbles.begin(), bubbles.end(), [](const Bubble& a, const Bubble& b) {
    return a.start != b.start ? a.start < b.start : a.device < b.device;
  });
  std::vector<std::int64_t> left;
  for (const FillJob& j : jobs) left.push_back(j.units);
  // Planning estimate of a context switch: the state over the GPU's PCIe lane, plus the fixed overhead. The
  // re-simulation times the real transfer, contending with the main job's traffic.
  const auto& pcie = plan.hw.node.pcie;
  auto switch_ns = [&](std::int64_t bytes) {
    return o.switch_overhead_ns +
           (bytes > 0
                ? pcie.latency + static_cast<Duration>(std::ceil(static_cast<double>(bytes) / pcie.lane_GBps))
                : 0);
  };
  std::map<DeviceId, StreamId> fill_stream;
  std::map<std::int32_t, DeviceId> host_of_node;
  for (std::size_t d = 0; d < plan.devices.size(); ++d)
    if (plan.devices[d].kind == DeviceKind::kHost)
      host_of_node[plan.devices[d].node] = static_cast<DeviceId>(d);
  auto host = [&](DeviceId gpu) {
    const std::int32_t node = plan.devices[static_cast<std::size_t>(gpu)].node;
    auto it = host_of_node.find(node);
    if (it != host_of_node.end()) return it->second;
    plan.devices.push_back({fmt::format("host{}", node), DeviceKind::kHost, node, 0, 0});
    return host_of_node[node] = static_cast<DeviceId>(plan.devices.size() - 1);
  };
  auto stream_of = [&](DeviceId gpu) {
    auto it = fill_stream.find(gpu);
    if (it != fill_stream.end()) return it->second;
    plan.streams.push_back({gpu, StreamKind::kFill, "fill"});
    return fill_stream[gpu] = static_cast<StreamId>(plan.streams.size() - 1);
  };
  auto add = [&](StreamId stream, OpKind kind, const OpTags& tags, Payload payload, Duration fixed,
                 OpId dep) {
    const OpId id = append_op(plan, stream, kind, tags, std::move(payload), fixed);
    if (dep >= 0) plan.ops[static_cast<std::size_t>(id)].deps.push_back(dep);
    return id;
  };
  // A job fits when some bubble has the memory and the time for one unit with its context switches.
  for (std::size_t j = 0; j < jobs.size(); ++j)
    for (const Bubble& b : bubbles)
      if (jobs[j].state_bytes + jobs[j].unit_memory_bytes <= b.free_bytes &&
          static_cast<Duration>(static_cast<double>(b.length()) * o.bubble_share) >=
              switch_ns(jobs[j].state_bytes) * (jobs[j].writes_back ? 2 : 1) + jobs[j].unit_ns) {
        out.jobs[j].fits = true;
        break;
      }
  for (const Bubble& b : bubbles) {
    Duration usable = static_cast<Duration>(static_cast<double>(b.length()) * o.bubble_share);
    OpId chain = b.before;  // chunks in one bubble follow each other
    for (std::size_t j : queue_order(jobs, left, b.start, o.policy)) {
      const FillJob& job = jobs[j];
      if (job.state_bytes + job.unit_memory_bytes > b.free_bytes) continue;  // no room in this bubble
      const Duration in = switch_ns(job.state_bytes), back = job.writes_back ? switch_ns(job.state_bytes) : 0;
      const std::int64_t units = std::min(left[j], std::max<Duration>(0, usable - in - back) / job.unit_ns);
      if (units <= 0) continue;
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
      const Duration work = units * job.unit_ns + o.switch_overhead_ns * (job.writes_back ? 2 : 1);
      OpId chunk = add(stream, OpKind::kFill, tags, ComputeWork{}, work, first >= 0 ? first : chain);
      Op& c = plan.ops[static_cast<std::size_t>(chunk)];
      c.alloc_bytes = job.unit_memory_bytes + (first >= 0 ? 0 : job.state_bytes);
      if (first >= 0) plan.ops[static_cast<std::size_t>(first)].alloc_bytes = job.state_bytes;
      OpId last = chunk;
      if (job.writes_back && job.state_bytes > 0) {
        TransferWork w;
        w.src = b.device;
        w.dst = host(b.device);
        w.bytes = job.state_bytes;
        last = add(stream, OpKind::kContextSwitch, tags, w, -1, chunk);
        c.free_bytes = job.unit_memory_bytes;
        plan.ops[static_cast<std::size_t>(last)].free_bytes = job.state_bytes;
      } else {
        c.free_bytes = job.unit_memory_bytes + job.state_bytes;
      }
      if (b.after >= 0) plan.ops[static_cast<std::size_t>(b.after)].deps.push_back(last);
      chain = last;
      usable -= in + back + units * job.unit_ns;
      left[j] -= units;
      out.jobs[j].units_done += units;
      ++out.jobs[j].chunks;
      out.fill_ops.push_back(chunk);
      out.fill_flops += static_cast<double>(units) * job.unit_flops;
      out.jobs[j].last_op = last;
    }
  }
  return out;
}

}  // namespace pipesim::sim
