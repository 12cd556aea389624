// Helpers shared by the simulator tests: uniform profiled workloads whose schedules have closed forms.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/report/metrics.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/schedules/schedule.hpp"

namespace pipesim::sim::testing {

/// A tiny plan on one h100-sxm-8x node: `gpus` GPUs (one compute and one send stream each, streams 2g and
/// 2g + 1) and the host (two CPU streams); more streams with `add_stream`.
struct PlanMaker {
  Plan plan;
  explicit PlanMaker(int gpus) {
    plan.hw = load_hardware_profile("h100-sxm-8x");
    plan.meta.schedule = "hand";
    for (int g = 0; g < gpus; ++g) {
      plan.devices.push_back({"gpu" + std::to_string(g), DeviceKind::kGpu, 0, g, 0});
      plan.streams.push_back({g, StreamKind::kCompute, "compute"});
      plan.streams.push_back({g, StreamKind::kP2PSend, "p2p_send"});
    }
    plan.devices.push_back({"host", DeviceKind::kHost, 0, 0, 0});
    plan.streams.push_back({gpus, StreamKind::kCpu, "cpu"});
    plan.streams.push_back({gpus, StreamKind::kCpu, "cpu2"});
  }
  StreamId add_stream(DeviceId device, StreamKind kind, std::string name) {
    plan.streams.push_back({device, kind, std::move(name)});
    return static_cast<StreamId>(plan.streams.size() - 1);
  }
  OpId add(StreamId s, Payload p, Duration fixed, std::vector<OpId> deps = {},
           OpKind kind = OpKind::kForward) {
    Op op;
    op.stream = s;
    op.kind = kind;
    op.payload = p;
    op.fixed_duration = fixed;
    op.deps = std::move(deps);
    plan.ops.push_back(op);
    return static_cast<OpId>(plan.ops.size() - 1);
  }
};

/// `blocks` identical blocks with the given per-microbatch times (ns) and bytes, no embedding or head.
inline std::vector<LayerCost> uniform_layers(int blocks, Duration fwd, Duration bwd_in, Duration bwd_w,
                                             std::int64_t act_bytes = 0, std::int64_t param_bytes = 0) {
  LayerCost c;
  c.role = LayerRole::kBlock;
  c.fwd_ns = fwd;
  c.bwd_input_ns = bwd_in;
  c.bwd_weight_ns = bwd_w;
  c.recompute_ns = 0;
  c.stored_activation_bytes = act_bytes;
  c.param_bytes = param_bytes;
  return std::vector<LayerCost>(static_cast<std::size_t>(blocks), c);
}

/// A pipeline of p stages, one block each, with fixed zero-time p2p: the textbook setting of the closed
/// forms.
inline ScheduleInput uniform_input(int p, int m, Duration fwd, Duration bwd_in, Duration bwd_w, int v = 1,
                                   std::int64_t act_bytes = 0) {
  ScheduleInput in;
  in.model_name = "uniform";
  in.hw = load_hardware_profile("h100-sxm-8x");
  in.pp = p;
  in.virtual_stages = v;
  in.microbatches = m;
  in.seq = 1024;
  in.global_batch = m;
  in.costs.push_back(uniform_layers(p * v, fwd, bwd_in, bwd_w, act_bytes));
  in.cost_of_microbatch.assign(static_cast<std::size_t>(m), 0);
  in.p2p_fixed_ns = 0;
  return in;
}

struct RunResult {
  Plan plan;
  Timeline timeline;
  Metrics metrics;
};

inline RunResult simulate(const std::string& schedule, const ScheduleInput& in) {
  Plan plan = build_plan(find_schedule(schedule), in);
  Timeline tl = Engine{}.run(plan);
  Metrics m = compute_metrics(plan, tl);
  return {std::move(plan), std::move(tl), std::move(m)};
}

/// A job as the CLI would describe it: a model on a profile, laid out pp x tp x dp with M microbatches.
inline JobOptions job(const std::string& model, const std::string& hw, int pp, int tp, int dp,
                      std::int64_t microbatches) {
  JobOptions j;
  j.model = model;
  j.hw = hw;
  j.pp = pp;
  j.tp = tp;
  j.dp = dp;
  j.microbatches = microbatches;
  return j;
}

/// The plan `simulate --schedule NAME` would run for the job.
inline Plan plan_of(const std::string& schedule, const JobOptions& j) {
  const auto& s = find_schedule(schedule);
  return build_plan(s, make_schedule_input(j, s));
}

/// The message of the InputError or DeadlockError `f` throws, or "no error".
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  } catch (const DeadlockError& e) {
    return e.what();
  }
  return "no error";
}

/// The error reading the shipped hardware profile `name` once `edit` has changed its JSON, or "no error".
template <typename Edit>
std::string edited_profile_error(const std::string& name, Edit&& edit) {
  const std::string path = std::string(PIPESIM_SOURCE_DIR) + "/hw_profiles/" + name + ".json";
  nlohmann::json p = nlohmann::json::parse(detail::read_text_file(path));
  edit(p);
  return error_of([&] { parse_hardware_profile(p.dump(), "mine.json"); });
}

inline Duration step_ns(const RunResult& r) {
  Duration last = 0;
  for (auto e : r.timeline.end) last = std::max(last, e);
  return last;
}

}  // namespace pipesim::sim::testing
