// Fill jobs in pipeline bubbles (PipeFill): independent work (batch inference or training of other models)
// run on a GPU while the main training job leaves its compute stream idle. Each fill job is a queue of equal
// units (one layer of one batch); a bubble takes as many units as fit in its length less the context switches
// (the job's state over PCIe, both ways for training, plus a fixed overhead) and in its free memory; a chunk
// never runs while the main job computes on that GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/plan/plan.hpp"
#include "pipesim/sim/report/bubbles.hpp"
#include "pipesim/sim/report/invariants.hpp"

namespace pipesim::sim {

/// A fill job's unit at a smaller batch: the same work in pieces that fit shorter or fuller bubbles.
struct FillShape {
  std::int64_t batch = 1;
  Duration unit_ns = 0;
  double unit_flops = 0;
  std::int64_t unit_memory_bytes = 0;
};

struct FillJob {
  std::string name;
  Duration unit_ns = 0;                ///< one unit of work on this GPU
  double unit_flops = 0;               ///< useful FLOPs of a unit
  std::int64_t units = 0;              ///< the whole job
  std::int64_t unit_memory_bytes = 0;  ///< working memory while a unit runs
  std::int64_t batch = 1;              ///< samples in a unit (model jobs: the batch; measured jobs: 1)
  /// Model jobs: the unit at halved batches (batch/2, batch/4 .. min_batch), largest first. A bubble too
  /// short or too full for the job's own unit takes the largest of these that fits.
  std::vector<FillShape> smaller;
  std::int64_t state_bytes = 0;  ///< brought to the GPU before each chunk
  bool writes_back = false;      ///< training: the state returns to host memory after each chunk
  double arrival_s = 0;          ///< when the job joins the queue
  double deadline_s = 0;         ///< for the deadline policy (0: none)
};

/// Loads fill jobs: a comma-separated list of shipped names (fill_jobs/) or files, each a pipesim-fill-job
/// object or an array of them. A job gives either measured units (`unit_ms`, `unit_gflop`, `units`,
/// `unit_memory_bytes`, `state_bytes`) or a model it runs (`model`: preset or config.json, `mode`: inference
/// or training, `batch`, `seq`, `samples`, `min_batch`), priced by the cost model on `hw`. Throws InputError
/// naming the file and JSON path.
std::vector<FillJob> load_fill_jobs(const std::string& spec, const HardwareProfile& hw,
                                    const std::string& dtype);
/// The shipped fill jobs' names.
std::vector<std::string> shipped_fill_jobs();

enum class FillPolicy : std::uint8_t { kFifo, kShortestJobFirst, kMaxEfficiency, kDeadline };
FillPolicy parse_fill_policy(const std::string& name);  ///< fifo, sjf, max-efficiency, deadline
const char* to_string(FillPolicy p);

struct FillOptions {
  FillPolicy policy = FillPolicy::kFifo;
  Duration switch_overhead_ns = 50'000;  ///< fixed cost of each switch in and out (allocator, streams)
  double bubble_share = 1.0;             ///< use this share of each bubble (the slowdown guard lowers it)
};

struct FillJobOutcome {
  std::string name;
  std::int64_t units_done = 0, units = 0;  ///< whole units of the job's own batch (smaller batches add up)
  std::int64_t chunks = 0;
  bool fits = false;  ///< false: no bubble had room (time and memory) for even one unit
  OpId last_op = -1;  ///< its last chunk's last op: when the job is done, in the re-simulated timeline
  std::int64_t smaller_batch_chunks = 0;  ///< chunks that ran some of its units at a smaller batch
};

struct FillOutcome {
  std::vector<FillJobOutcome> jobs;
  std::vector<OpId> fill_ops;  ///< the chunks added to the plan
  double fill_flops = 0;       ///< useful FLOPs of all chunks, on the simulated GPUs
};

/// Adds fill chunks (context switch in, the chunk, switch out) on a fill stream of each simulated GPU, into
/// the bubbles of `timeline` (found with find_bubbles on `plan`). The chunk waits for the main op before the
/// bubble and the main op after it waits for the chunk, so the two never overlap.
FillOutcome add_fill_jobs(Plan& plan, const Timeline& timeline, const std::vector<FillJob>& jobs,
                          const FillOptions& options);

/// The main job re-simulated with fill jobs in its bubbles.
struct FillRun {
  FillOutcome outcome;
  Plan plan;          ///< the main plan with the fill chunks
  Timeline timeline;  ///< of `plan`
  double bubble_share =
      1.0;                   ///< of each bubble the fill was allowed (lowered to keep the slowdown in bounds)
  double main_slowdown = 0;  ///< step with fill / step without - 1
  double fill_busy_s = 0;    ///< fill chunks' time summed over the simulated GPUs
  double fill_gpu_equivalents = 0;  ///< whole job: GPUs' worth of time the fill jobs used
  double fill_tflops_per_gpu = 0;
  double utilization_before = 0, utilization_after = 0;  ///< compute-busy share of the GPUs' time
  std::vector<double> completed_s;  ///< per job: when its last chunk ended (-1: not finished)
};

/// Adds the fill jobs to `plan` (simulated as `timeline`, with memory samples) and re-simulates; when the
/// main job slows down by more than `max_slowdown`, retries with a smaller share of each bubble (x 0.8, down
/// to 0.05) and keeps the first run in bounds (or none at all).
FillRun simulate_with_fill(const Plan& plan, const Timeline& timeline, const std::vector<FillJob>& jobs,
                           FillOptions options, double max_slowdown);

/// What a fill run kept within `max_slowdown` claims, for check_fill.
FillClaims claims_of(const FillRun& run, double max_slowdown);

}  // namespace pipesim::sim
