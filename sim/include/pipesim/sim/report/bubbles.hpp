// Pipeline bubbles: every interval in which a GPU's compute stream sits idle during a simulated run, where it
// falls in the schedule, and how much GPU memory is free meanwhile — what a fill job could use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::sim {

/// Where a bubble falls, from the compute ops around it on its GPU.
enum class BubbleKind : std::uint8_t {
  kWarmup,           ///< before the GPU's first op: waiting for the first microbatch
  kForwardBackward,  ///< between a forward and a backward: the GPU holds its activations (peak memory)
  kSteady,           ///< between other ops while forwards remain (e.g. interleaved or async schedules)
  kCooldown,         ///< between backwards after the GPU's last forward of the step
  kOptimizerWait,    ///< before the optimizer step: data-parallel gradient sync or CPU optimizer
  kTail,             ///< after the GPU's last op, until the step ends on every GPU
};
const char* to_string(BubbleKind kind);

struct Bubble {
  DeviceId device = 0;
  std::int32_t stage = -1;
  std::int32_t iteration = 0;  ///< of the op after it (of the op before it for a tail)
  TimePoint start = 0, end = 0;
  std::int64_t free_bytes = 0;  ///< GPU memory free during all of it (capacity - peak use inside)
  BubbleKind kind = BubbleKind::kSteady;
  OpId before = -1, after = -1;  ///< the compute-stream ops around it (-1: none)
  Duration length() const { return end - start; }
};

/// The bubbles of every simulated GPU, in device then time order. `timeline` must come from an engine run
/// with EngineOptions::record_memory (free memory needs the memory samples); without them free memory is the
/// capacity less the device's peak.
std::vector<Bubble> find_bubbles(const Plan& plan, const Timeline& timeline);

}  // namespace pipesim::sim
