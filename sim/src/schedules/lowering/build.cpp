// The lowering's driver: a whole plan from the layout and the passes.
#include "schedules/lowering/builder.hpp"

namespace pipesim::sim::lowering {

Plan Builder::build(bool explicit_replicas) {
  explicit_ = explicit_replicas;
  plan_.hw = in_.hw;
  validate_and_layout();
  device_of_rank_.assign(static_cast<std::size_t>(plan_.nodes) * static_cast<std::size_t>(in_.hw.node.gpus),
                         kNone);
  if (explicit_) {
    for (std::int32_t d = 0; d < grad_replicas(); ++d)
      for (std::int32_t t = 0; t < in_.tp; ++t) replicas_.push_back({d, t});
  } else {
    replicas_.push_back({0, 0});
  }
  host_of_node_.assign(static_cast<std::size_t>(plan_.nodes), kNone);
  nvme_of_node_.assign(static_cast<std::size_t>(plan_.nodes), kNone);
  {
    // The node's cores are shared by the job's GPUs on it, each optimizer step getting an equal share.
    const std::int32_t on_node = std::min(gpus_total_, in_.hw.node.gpus);
    cpu_threads_per_gpu_ = in_.optimizer_threads(std::max(1, in_.hw.host.cores / on_node));
  }
  microbatch_ops_.assign(
      replicas_.size() * static_cast<std::size_t>(chunks_) * static_cast<std::size_t>(total_mb_),
      MicrobatchOps{});
  dp_ops_.resize(replicas_.size() * static_cast<std::size_t>(in_.pp));
  // At most kGpuStreams streams per GPU: sized once, not regrown (and copied) as they are added.
  plan_.streams.reserve(replicas_.size() * static_cast<std::size_t>(in_.pp) * kGpuStreams);
  streams_.reserve(replicas_.size() * static_cast<std::size_t>(in_.pp));
  for (const auto& [d, t] : replicas_) {
    for (std::int32_t s = 0; s < in_.pp; ++s) {
      DeviceId dev = device_of_rank(global_rank(d, s, t));
      std::vector<StreamId> ids(kGpuStreams, kNone);
      auto add_stream = [&](std::size_t index, DeviceId on, StreamKind k, std::string name) {
        plan_.streams.push_back({on, k, std::move(name)});
        ids[index] = static_cast<StreamId>(plan_.streams.size() - 1);
      };
      add_stream(kComputeStream, dev, StreamKind::kCompute, "compute");
      add_stream(kP2PSendStream, dev, StreamKind::kP2PSend, "p2p_send");
      if (grad_replicas() > 1) add_stream(kCollectiveStream, dev, StreamKind::kCollective, "collective");
      if (grad_replicas() > 1 && shards_params())
        add_stream(kGatherStream, dev, StreamKind::kCollective, "allgather");
      if (in_.cp > 1) add_stream(kCpStream, dev, StreamKind::kCollective, kContextParallelStream);
      if (overlaps_tp()) add_stream(kTpStream, dev, StreamKind::kCollective, kTensorParallelStream);
      if (offloads()) {
        add_stream(kD2HStream, dev, StreamKind::kD2H, "d2h");
        add_stream(kH2DStream, dev, StreamKind::kH2D, "h2d");
        add_stream(kCpuStream, host_of(dev), StreamKind::kCpu,
                   plan_.devices[static_cast<std::size_t>(dev)].name + ".adam");
        if (in_.sharding.offload_to_nvme) add_stream(kNvmeStream, dev, StreamKind::kNvme, "nvme");
      }
      streams_.push_back(std::move(ids));
    }
  }
  first_in_iteration_.assign(plan_.streams.size(), kNone);
  last_on_stream_.assign(plan_.streams.size(), kNone);
  {
    // Resident weights are placed GPU by GPU, replica after replica: the host and NVMe devices they create
    // are numbered in that order.
    std::vector<std::int64_t> trainable(replicas_.size() * static_cast<std::size_t>(in_.pp));
    for (std::size_t r = 0; r < replicas_.size(); ++r)
      for (std::int32_t s = 0; s < in_.pp; ++s)
        trainable[r * static_cast<std::size_t>(in_.pp) + static_cast<std::size_t>(s)] =
            place_weights(gpu_rank(r, s));
    for (std::int32_t s = 0; s < in_.pp; ++s) emit_stage(s, trainable);
  }
  if (in_.blocking_p2p) {
    // Each op's successor on its stream, for blocking sends.
    next_on_stream_.assign(plan_.ops.size(), kNone);
    std::vector<OpId> last(plan_.streams.size(), kNone);
    for (std::size_t i = 0; i < plan_.ops.size(); ++i) {
      OpId& previous = last[static_cast<std::size_t>(plan_.ops[i].stream)];
      if (previous != kNone) next_on_stream_[static_cast<std::size_t>(previous)] = static_cast<OpId>(i);
      previous = static_cast<OpId>(i);
    }
  }
  for (std::int32_t s = 0; s < in_.pp; ++s) emit_p2p(s);

  auto& m = plan_.meta;
  m.schedule = sched_.name;
  m.pp = in_.pp;
  m.tp = in_.tp;
  m.dp = in_.dp;
  m.cp = in_.cp;
  m.recompute = to_string(in_.recompute);
  m.replicas = explicit_ ? "explicit" : "symmetric";
  m.data_parallel = describe(in_.sharding);
  m.ep = in_.ep;
  m.simulated_gpus = static_cast<std::int32_t>(replicas_.size()) * in_.pp;
  fill_job_metadata(m, in_, [](const LayerCost& l) { return l.recompute_flops; });
  return std::move(plan_);
}

}  // namespace pipesim::sim::lowering
