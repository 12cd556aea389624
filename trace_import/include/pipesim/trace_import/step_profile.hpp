// One training step of a traced model, attributed: every GPU kernel, copy and fill to the layer whose code
// launched it (the embedding, each repeated block, the head with its loss, or the optimizer) and to its pass
// (forward or backward), with how many launches each pass took and the kernel time of each class. The
// forward's launches fall inside nn.Module spans of the thread that ran the model; the backward's inside the
// autograd engine's evaluation of a node, which names the forward op that made it (the sequence number).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "pipesim/trace_import/host_wait.hpp"
#include "pipesim/trace_import/kernel_class.hpp"
#include "pipesim/trace_import/kineto_trace.hpp"

namespace pipesim::trace_import {

struct PassProfile {
  double gpu_us = 0;          ///< summed time of the pass's kernels, copies and fills
  std::int32_t launches = 0;  ///< of them
  ClassTimes classes{};       ///< gpu_us by kernel class
  /// The GPU's idle time before the pass's kernels, waiting for the CPU to launch them (host_wait.hpp).
  double host_wait_us = 0;
};

struct LayerProfile {
  std::string role;  ///< embedding | block | head
  PassProfile forward, backward;
  /// Elements of the weights its forward read (linear, embedding and addmm inputs; norms' are not counted).
  /// The head's leaves out a matrix shaped like the embedding's (`StepProfile::head_matrix`).
  std::int64_t params = 0;
  double forward_flops = 0;  ///< of its GEMMs and attention, from the recorded shapes
  /// Bytes its forward keeps for the backward (StepProfile::memory_source); 0 unknown.
  std::int64_t saved_bytes = 0;
  /// The most bytes its backward has made and still needs at once: the gradients passed between its ops,
  /// the logits' at the loss. Freed by the backward's end.
  std::int64_t backward_working_bytes = 0;
  /// Bytes of its forward's results that later layers read (execution trace): what a pipeline stage ending
  /// with it sends on.
  std::int64_t output_bytes = 0;
};

struct StepProfile {
  /// The ProfilerStep#N imported ("ProfilerStep#3 to ProfilerStep#5" for a mean); empty when the trace marks
  /// none.
  std::string step;
  std::int32_t marked_steps = 0;     ///< ProfilerStep spans in the trace
  std::int32_t averaged_steps = 1;   ///< the steps this is the mean of (kAllSteps)
  std::string block_module;          ///< the repeated module taken as a block (e.g. Qwen3DecoderLayer)
  std::vector<LayerProfile> layers;  ///< [embedding, block 0 .. block n-1, head]
  /// Elements of the head's matrix shaped like the embedding's: the embedding's own where the two are tied
  /// (a trace does not say whether they are: WorkloadOptions::tied_embeddings).
  std::int64_t head_matrix = 0;
  PassProfile optimizer;     ///< Optimizer.step and zero_grad
  PassProfile unattributed;  ///< launched outside every span above
  ClassTimes classes{};      ///< every activity's time by class
  double gpu_us = 0;         ///< every activity's time
  std::int32_t launches = 0;
  /// The step replayed without the profiler's own cost (host_wait.hpp): the GPU's waits for the CPU in all,
  /// the CPU's time between launches, the step from the first kernel's start to the last one's end.
  double host_wait_us = 0, host_cpu_us = 0, replayed_step_us = 0;
  ProfilerCost profiler_cost;  ///< what the replay took out per recorded event
  /// The layer (index into `layers`) of each autograd op of the model's forward, by sequence number.
  std::unordered_map<std::int64_t, std::int32_t> layer_of_sequence;
  /// The layers' saved, working and passed-on bytes and step_grad_bytes are known: from an execution trace
  /// (add_saved_activations) or the trace's memory events (memory_events.hpp), as memory_source says.
  bool has_saved_bytes = false;
  std::string memory_source;
  /// The gradients the backward made that the optimizer then read: the step's own when
  /// zero_grad(set_to_none=True) frees them, none when the backward adds into gradients kept between steps.
  std::int64_t step_grad_bytes = 0;
  /// From the GPU's memory events (profile_memory=True), where the trace has them: how many the step holds,
  /// the bytes allocated before its first and the most allocated at once (torch.cuda.max_memory_allocated),
  /// and the most the caching allocator reserved (max_memory_reserved; 0 where the events do not say).
  std::int64_t memory_events = 0;
  std::int64_t allocated_at_start_bytes = 0, peak_allocated_bytes = 0, peak_reserved_bytes = 0;
};

/// profile_step's `step` for the last step a trace marks, and for the mean of all it marks.
constexpr std::int64_t kLastStep = -1, kAllSteps = -2;

/// Attributes the GPU activity of one step: ProfilerStep#`step` where the trace marks its steps
/// (torch.profiler with a schedule), the last one marked for kLastStep, the mean of every one marked for
/// kAllSteps (mean_of_steps); the whole trace where it marks none.
/// Only the CPU events inside that step's span count, and the GPU work they launched; its memory events,
/// where the trace has them, give its activation memory (add_memory_events). The GPU's waits for the CPU are
/// found with the profiler's own cost per recorded event taken out (`cost`). Throws InputError naming the
/// trace when it has no nn.Module spans (profile with with_stack=True or with_modules=True), no repeated
/// block module, or no step `step`.
StepProfile profile_step(const KinetoTrace& trace, std::int64_t step = kLastStep,
                         const ProfilerCost& cost = {});

/// The mean of several steps of one loop, in the order they ran: each layer's and pass's GPU time, launches
/// (rounded to the nearest whole one), kernel classes and waits for the CPU, and the step's; the memory
/// figures of the last step (a steady loop allocates alike each step) with the most allocated at once of any.
/// Throws InputError naming `file` when two steps run another block module or another number of blocks.
StepProfile mean_of_steps(const std::vector<StepProfile>& steps, const std::string& file);

/// Launches of one layer a pass.
struct LayerLaunchCounts {
  std::int32_t forward = 0, backward = 0;
};

/// What a step launched a pass: its embedding's, its blocks' mean (rounded to the nearest whole launch) and
/// its head's, whose backward also counts the launches outside every layer's span (`unattributed`).
struct StepLaunches {
  LayerLaunchCounts embedding, block, head;
};
StepLaunches step_launches(const StepProfile& step);

/// The profiler's cost per event on the host that took the trace, from a step measured there without it:
/// `cost` scaled (its op and Python costs in the same ratio) until step `step`'s replay (replayed_step_us)
/// lasts `measured_us` (the scale to 0.01 %, at most 64). Where even no cost at all leaves the replay
/// shorter, the scale is 0; where the replay at 64 times `cost` is still longer than `measured_us` (the GPU's
/// own work takes that long), the least scale that reaches the replay at 64. Throws as profile_step.
ProfilerCost fit_profiler_cost(const KinetoTrace& trace, std::int64_t step, double measured_us,
                               const ProfilerCost& cost);

}  // namespace pipesim::trace_import
