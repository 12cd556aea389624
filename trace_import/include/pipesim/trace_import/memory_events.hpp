// Activation memory from the profiler's memory events (torch.profiler's profile_memory=True), for a trace
// taken without an execution trace. Each allocation of the GPU's caching allocator is followed from the event
// that made it to the one that freed it at the same address; the thread and time of the first say which
// layer's pass made it:
// - made by a layer's forward and still held when the backward starts: kept for the backward (saved_bytes),
//   given to the layer whose forward made it (an execution trace gives it to the layer whose backward reads
//   it first: a block's output to the next block);
// - made by the backward and freed before it ends: the backward's working memory, the most of it held while
//   each layer's backward runs (backward_working_bytes);
// - made by the backward and held past its end: the gradients it leaves for the optimizer (step_grad_bytes).
// The events' own running total gives the step's peak and what was held before it (weights, optimizer state).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "pipesim/trace_import/kineto_trace.hpp"
#include "pipesim/trace_import/step_profile.hpp"

namespace pipesim::trace_import {

/// Which layer's pass a CPU thread was running at a time.
struct PassPlace {
  enum class Pass : std::uint8_t { kForward, kBackward, kOther };
  Pass pass = Pass::kOther;
  std::int32_t layer = -1;  ///< index into StepProfile::layers; -1 for kOther
};
using PlaceOf = std::function<PassPlace(std::int64_t tid, TraceTime ts)>;

/// The step's backward: from its first autograd evaluation's start to its last one's end.
struct BackwardWindow {
  TraceTime begin = 0, end = 0;
};

/// Fills `step`'s memory figures from its memory events (any order): the allocated bytes before the step and
/// at its peak and, where the step has a backward, the layers' saved_bytes and backward_working_bytes and
/// step_grad_bytes (memory_source "memory events"). An allocation the backward makes outside every layer's
/// evaluation is still working memory or a gradient; a layer's working peak is read at its own events.
void add_memory_events(const std::vector<MemoryEvent>& events, const PlaceOf& place,
                       const BackwardWindow& backward, StepProfile& step);

}  // namespace pipesim::trace_import
