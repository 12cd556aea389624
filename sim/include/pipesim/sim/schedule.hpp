// Pipeline schedules: each registered generator says, for every pipeline rank, in which order it runs the
// forward and backward passes of (microbatch, model chunk). The plan builder turns those orders into a Plan.
// `pipesim schedules` lists the registry with each schedule's description and parameters.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pipesim::sim {

struct Plan;
struct ScheduleInput;

enum class TaskKind : std::uint8_t { kForward, kBackward, kBackwardInput, kBackwardWeight };

/// One pass of one microbatch through one model chunk (virtual stage) held by a rank.
struct Task {
  TaskKind kind = TaskKind::kForward;
  std::int32_t microbatch = 0;
  std::int32_t chunk = 0;  ///< virtual stage index on this rank, 0 .. v-1
};

struct ScheduleShape {
  std::int32_t pp = 1;
  std::int32_t microbatches = 1;
  std::int32_t virtual_stages = 1;
};

struct ScheduleParameter {
  std::string name;
  std::string description;
};

struct ScheduleInfo {
  std::string name;
  std::string source;
  std::string description;
  std::vector<ScheduleParameter> parameters;
  bool splits_backward = false;  ///< emits backward_input / backward_weight instead of backward
  bool interleaved = false;      ///< uses v > 1 model chunks per rank
  /// Empty when the shape is valid for this schedule, otherwise why not (one line).
  std::function<std::string(const ScheduleShape&)> check;
  /// The order of tasks on `rank`.
  std::function<std::vector<Task>(const ScheduleShape&, std::int32_t rank)> order;
  /// Schedules that place work on GPUs themselves (offload schedules) build the whole plan instead.
  std::function<Plan(const ScheduleInput&)> build;
  std::int32_t default_iterations = 1;  ///< asynchronous schedules need several to reach a steady state
  /// Default microbatches: per_gpu x pp + extra (classic 4p, SPipe 2P, RoundPipe G+1).
  std::int32_t default_microbatches_per_gpu = 4;
  std::int32_t default_microbatches_extra = 0;
};

/// All registered schedules, in listing order.
const std::vector<ScheduleInfo>& schedule_registry();
/// Throws InputError listing the valid names when `name` is unknown.
const ScheduleInfo& find_schedule(const std::string& name);

}  // namespace pipesim::sim
