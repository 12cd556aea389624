// What a replay backend does for one op: its real work, on the thread of the op's stream. The executor owns
// ordering, dependencies, collectives' start, memory accounting and timing.
#pragma once

#include <memory>
#include <string>

#include "pipesim/replay/replay.hpp"
#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::replay {

class Backend {
 public:
  virtual ~Backend() = default;
  /// Runs op `id` of `plan` to completion; called from the thread of the op's stream.
  virtual void execute(const sim::Plan& plan, sim::OpId id) = 0;
  /// Fills what the backend knows about the machine.
  virtual void describe(ReplayEnvironment& environment) const = 0;
};

/// The host backend: compute ops as real FMA work at the measured rate of this CPU, transfers as memcpy
/// between real buffers, optimizer ops as the real CPU Adam kernel, fixed durations as busy waits.
/// With a transport (multi-node), transfers to another node's device are sent to its process.
std::unique_ptr<Backend> make_host_backend(const sim::Plan& plan, double work_scale,
                                           class Transport* transport);

}  // namespace pipesim::replay
