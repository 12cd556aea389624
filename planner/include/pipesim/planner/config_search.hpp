// Configuration search: for a model on N GPUs, enumerate pp x tp x dp (tp inside a node), microbatch size and
// count, schedule, virtual stages, recompute, data-parallel sharding (ZeRO 1-3, FSDP) and optimizer offload;
// give each candidate its optimal partition; prune by memory and by a cheap lower bound (M x bottleneck stage
// time); simulate the rest in parallel threads and rank them. Deterministic: candidates are visited in a
// fixed order and ties break on the configuration.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/plan/plan.hpp"
#include "pipesim/sim/report/metrics.hpp"

namespace pipesim::planner {

/// From this sequence length on the search also splits sequences over context-parallel ranks.
inline constexpr std::int64_t kContextParallelFromSeq = 16384;

struct SearchOptions {
  sim::JobOptions base;  ///< model or workload, hardware, seq, dtype, LoRA; parallel layout is searched
  std::int32_t gpus = 8;
  std::int64_t global_batch = 0;
  std::vector<std::string> schedules;    ///< empty: every classic schedule, and the offload ones on one node
  std::string objective = "throughput";  ///< or "cost": also tries fewer GPUs, ranks by $ per token
  double max_mem_fraction = 0.9;
  double gpu_hour_usd = 0;  ///< 0: the profile's figure
  std::int32_t top = 10;
  /// Simulate every feasible candidate (no pruning by lower bounds): the reference the pruned search must
  /// match exactly.
  bool exhaustive = false;
  std::int32_t threads = 0;  ///< 0: hardware concurrency
  /// Layout constraints (0 / empty: searched): a fixed tp or pp, and the recompute policies to try.
  std::int32_t tp = 0, pp = 0;
  /// A fixed context-parallel degree (0: searched: 1, and for sequences of kContextParallelFromSeq tokens
  /// or more every power of two that splits them).
  std::int32_t cp = 0;
  std::int64_t microbatch_size = 0;  ///< one of 1, 2, 4, 8
  std::vector<std::string> recomputes;
  /// Data-parallel modes to try where dp > 1 with an order-based schedule: ddp, zero-1, zero-2, zero-3,
  /// fsdp-hybrid (empty: ddp and ZeRO 1-3).
  std::vector<std::string> data_parallel;
};

/// Applies a data-parallel mode name (ddp, zero-1..3, fsdp-hybrid) to a job; throws InputError naming
/// --data-parallel for an unknown one.
void apply_data_parallel_mode(const std::string& mode, sim::JobOptions& job);
/// The data-parallel mode a job asks for, in the same vocabulary: sim::data_parallel_mode.
using sim::data_parallel_mode;

struct Candidate {
  sim::JobOptions job;  ///< a complete simulate configuration
  std::string schedule;
  std::int64_t lower_bound_ns = 0;
  sim::Metrics metrics;
  double usd_per_million_tokens = 0;
  std::string key() const;  ///< stable text of the configuration, for ties and tables
  double objective(const std::string& objective) const;
  /// True when this candidate ranks before `other`: a shorter step (exact, in integer nanoseconds) or a
  /// lower $ per token, then the configuration text.
  bool ranks_before(const Candidate& other, const std::string& objective) const;
};

struct SearchResult {
  std::vector<Candidate> ranked;  ///< best first, at most `top`
  std::int64_t enumerated = 0;
  std::int64_t pruned_memory = 0;  ///< dropped before simulation: no partition fits memory
  std::int64_t pruned_bound = 0;   ///< never simulated: their lower bound could not reach the top K
  std::int64_t simulated = 0;
  std::int64_t oom = 0;       ///< simulated, but ran out of GPU or host memory
  std::int64_t failed = 0;    ///< not a valid configuration for the schedule
  std::string first_invalid;  ///< the first of those, with why
  /// When the winner shards its data-parallel state: why, against the best plain data-parallel run (faster
  /// by how much, or: plain data parallelism does not fit memory).
  std::string why_sharded;
  std::string why_context_parallel;  ///< when the winner uses context parallelism: against the best without
};

/// Runs the search; progress (a bar on long searches) goes to `progress` when not null.
SearchResult search(const SearchOptions& options, std::ostream* progress);

/// The plan of a candidate (the one `simulate` would run), e.g. to write the winner with `--out`.
sim::Plan candidate_plan(const Candidate& c);

}  // namespace pipesim::planner
