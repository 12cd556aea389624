// The schedule registry: the single source of truth about every pipeline schedule. Each schedule is one file
// under sim/src/schedules/ that returns a ScheduleDescriptor; the CLI (`simulate` flags, `--schedule all`,
// `pipesim schedules`), the planner's candidate enumeration, the partitioner's memory model and the tests all
// iterate the registry. A schedule is either order-based (it says in which order each rank runs its passes;
// the shared lowering turns the orders into a Plan) or whole-plan (it builds its own Plan).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pipesim/sim/core/time.hpp"
#include "pipesim/sim/workload/cost_model.hpp"

namespace pipesim::sim {

struct Plan;
struct ScheduleInput;

enum class TaskKind : std::uint8_t { kForward, kBackward, kBackwardInput, kBackwardWeight };

/// One pass of one microbatch through one model chunk (virtual stage) held by a rank.
struct Task {
  TaskKind kind = TaskKind::kForward;
  std::int32_t microbatch = 0;
  std::int32_t chunk = 0;  ///< virtual stage index on this rank, 0 .. v-1
  /// Runs overlapped with the next task of the order (DualPipe's forward-backward pairs): the pair starts
  /// only once the inputs of both have arrived, then takes both passes' compute.
  bool paired_with_next = false;
};

struct ScheduleShape {
  std::int32_t pp = 1;
  std::int32_t microbatches = 1;
  std::int32_t virtual_stages = 1;
};

enum class ScheduleKind : std::uint8_t {
  kOrderBased,  ///< gives each rank's task order; the shared lowering builds the plan
  kWholePlan,   ///< builds its whole plan itself (the CPU-offload schedules)
};
const char* to_string(ScheduleKind kind);

// ---- Typed parameters of a schedule, each set by one option of the job ----

enum class ParameterType : std::uint8_t { kFlag, kInteger, kReal, kIntegerPair };
using ParameterValue = std::variant<bool, std::int64_t, double, std::vector<std::int64_t>>;

struct ScheduleParameter {
  std::string name;    ///< key in ScheduleParameters, e.g. "cross_mapping"
  std::string option;  ///< key of the option that sets it, e.g. "cross_mapping" (see core/option.hpp)
  ParameterType type = ParameterType::kFlag;
  std::string description;
  ParameterValue default_value = false;
  double min = 0, max = 0;  ///< valid range of a number (of each entry of a pair)
  std::string metavar;      ///< how the value reads in messages, e.g. "F,B"
};

/// Parses `text` as given for the parameter's option ("true" for a flag) and range-checks it; throws
/// InputError naming the option and what would be valid.
ParameterValue parse_parameter(const ScheduleParameter& parameter, const std::string& text);
/// Throws InputError when `value` has the wrong type or is out of the parameter's range.
void check_parameter(const ScheduleParameter& parameter, const ParameterValue& value);
std::string to_string(const ParameterValue& value);

/// Values of one schedule's parameters by name: its defaults with the given options applied.
class ScheduleParameters {
 public:
  bool flag(const std::string& name) const { return std::get<bool>(at(name)); }
  std::int64_t integer(const std::string& name) const { return std::get<std::int64_t>(at(name)); }
  double real(const std::string& name) const { return std::get<double>(at(name)); }
  const std::vector<std::int64_t>& integers(const std::string& name) const {
    return std::get<std::vector<std::int64_t>>(at(name));
  }
  void set(const std::string& name, ParameterValue value) { values_[name] = std::move(value); }
  /// Sets a parameter the user did not give to its default (a schedule may adapt such a value to the job).
  void set_default(const std::string& name, ParameterValue value) {
    set(name, std::move(value));
    defaulted_.insert(name);
  }
  bool is_default(const std::string& name) const { return defaulted_.count(name) != 0; }
  const std::map<std::string, ParameterValue>& values() const { return values_; }

 private:
  const ParameterValue& at(const std::string& name) const;  // a missing name is a bug: std::logic_error
  std::map<std::string, ParameterValue> values_;
  std::set<std::string> defaulted_;
};

// ---- What the planner and the partitioner need to know ----

enum class ClusterShape : std::uint8_t {
  kAnyLayout,        ///< any pp x tp x dp on any number of nodes
  kOnePipelineNode,  ///< tp = dp = 1, every GPU in one pipeline; tried by default only within one node
};

struct PlannerHints {
  bool tried_by_default = true;
  ClusterShape shape = ClusterShape::kAnyLayout;
  bool takes_profiled_workloads = true;  ///< tried by default for --workload jobs
  std::vector<std::int32_t> virtual_stages = {1};
  std::vector<Recompute> recomputes = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  bool with_optimizer_offload = true;  ///< also tried with --optimizer-offload
  /// At pp = 1 every order-based schedule runs the same passes; only the one that says so is tried there.
  bool stands_for_single_stage = false;
};

enum class PartitionRule : std::uint8_t {
  kContiguousStages,         ///< pp x v contiguous stages: `pipesim partition` and the planner search them
  kOwnRule,                  ///< the schedule places layers by its own rule
  kSeparateForwardBackward,  ///< separate forward and backward partitions from the schedule's own algorithm
};

/// A schedule's own forward and backward partitions (PartitionRule::kSeparateForwardBackward).
struct OwnPartition {
  std::vector<std::pair<std::int32_t, std::int32_t>> forward, backward;  ///< layer ranges [begin, end)
  std::string backward_note;                                             ///< e.g. "(fused first)"
  Duration stage_time_target_ns = 0;
};

/// A count per stage position k = chunk x pp + rank (0 .. pp*v-1) of a schedule shape.
using StageCount = std::function<std::int64_t(const ScheduleShape&, std::int32_t stage)>;

struct PartitionerHints {
  PartitionRule rule = PartitionRule::kContiguousStages;
  /// Microbatches whose whole activations stage position k holds at its peak. Empty for an order-based
  /// schedule: derived from its task order.
  StageCount activations_in_flight;
  /// Weight-gradient passes stage position k still owes at that peak, each holding the inputs of the linear
  /// layers. Empty for an order-based schedule: derived from its task order.
  StageCount deferred_weight_grads;
  /// kSeparateForwardBackward: computes the schedule's own partitions.
  std::function<OwnPartition(const ScheduleInput&)> own_partition;
};

/// Where a rank's model chunks sit: kLoop puts chunk k on rank k mod pp (chunks k, k + pp, ... on one rank:
/// interleaved 1F1B); kV puts the first pp chunks down the ranks and the next pp back up (rank r holds chunks
/// r and 2pp - 1 - r: ZB-V), so the last chunk shares rank 0 with the first. kDual (DualPipe) splits the
/// model into pp stages and holds each twice: rank r holds stage r for the microbatches that enter at rank 0
/// (the first half) and stage pp - 1 - r for those that enter at rank pp - 1 (the second half); model chunks
/// 0 .. pp-1 are the first copy down the ranks, pp .. 2pp-1 the second copy up them, and a microbatch runs
/// through one copy only.
enum class ChunkPlacement : std::uint8_t { kLoop, kV, kDual };

/// Distinct layer ranges a placement splits the model into: pp x v, or pp when each is held twice (kDual).
inline std::int32_t model_stages(ChunkPlacement placement, std::int32_t pp, std::int32_t virtual_stages) {
  return placement == ChunkPlacement::kDual ? pp : pp * virtual_stages;
}

// ---- The descriptor ----

struct ScheduleDescriptor {
  std::string name;
  std::string source;  ///< where the schedule comes from
  std::string description;
  ScheduleKind kind = ScheduleKind::kOrderBased;
  std::vector<std::string> constraints;  ///< in words, e.g. "microbatches divisible by pp"
  /// Empty when the shape is valid for this schedule, otherwise why not (one line).
  std::function<std::string(const ScheduleShape&)> check;
  std::vector<ScheduleParameter> parameters;
  bool multi_chunk = false;      ///< runs v > 1 model chunks per rank (--virtual-stages)
  bool splits_backward = false;  ///< emits backward_input / backward_weight instead of backward
  ChunkPlacement placement = ChunkPlacement::kLoop;
  std::int32_t default_virtual_stages = 1;
  std::int32_t default_iterations = 1;  ///< asynchronous schedules need several to reach a steady state
  /// Default microbatches: per_gpu x pp + extra (classic 4p, SPipe 2P, RoundPipe G+1).
  std::int32_t default_microbatches_per_gpu = 4;
  std::int32_t default_microbatches_extra = 0;
  PlannerHints planner;
  PartitionerHints partitioner;
  /// kOrderBased: the order of tasks on `rank`.
  std::function<std::vector<Task>(const ScheduleShape&, std::int32_t rank)> order;
  /// kWholePlan: builds the whole plan.
  std::function<Plan(const ScheduleInput&)> build;
};

/// Every schedule of this process in listing order: the built-in ones, then those registered later.
/// References stay valid; register before simulating from several threads.
const std::deque<ScheduleDescriptor>& schedule_registry();
/// The schedule a command that simulates one runs when none is named: 1F1B, the one every pipeline framework
/// ships.
const ScheduleDescriptor& default_schedule();
/// Adds a schedule; throws std::invalid_argument for a duplicate name or a descriptor missing what its kind
/// needs (an order for order-based, a build for whole-plan, a check).
const ScheduleDescriptor& register_schedule(ScheduleDescriptor descriptor);
/// Throws InputError listing the valid names when `name` is unknown.
const ScheduleDescriptor& find_schedule(const std::string& name);

/// Activations in flight and weight-gradient passes owed by stage position `stage` at its memory peak
/// (whole activations count 34 units, a deferred weight gradient 14), from an order-based schedule's order.
struct StageLoad {
  std::int64_t activations_in_flight = 0;
  std::int64_t deferred_weight_grads = 0;
};
StageLoad peak_stage_load(const ScheduleDescriptor& schedule, const ScheduleShape& shape, std::int32_t stage);

}  // namespace pipesim::sim
