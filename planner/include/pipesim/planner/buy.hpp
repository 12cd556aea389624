// Before you buy: the planner's best configuration on every candidate cluster (hardware profile x GPU
// count), and what each costs to train a given number of tokens: steps, time, GPU-hours, dollars, memory
// headroom, where the step's time goes, whether it meets the user's budget and deadline, and which clusters
// are on the time-versus-cost Pareto front.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "pipesim/planner/config_search.hpp"

namespace pipesim::planner {

struct BuyOptions {
  SearchOptions search;                        ///< the model and job; hw and gpus are set per cluster
  std::vector<std::string> hardware;           ///< profile names or files
  std::vector<std::int32_t> gpu_counts;        ///< whole nodes of each profile
  double tokens = 0;                           ///< tokens to train, or 0 with `steps`
  std::int64_t steps = 0;                      ///< optimizer steps to train, or 0 with `tokens`
  std::map<std::string, double> gpu_hour_usd;  ///< per profile name: overrides the profile's price
  double max_usd = 0;                          ///< 0: no budget
  double deadline_days = 0;                    ///< 0: no deadline
  std::int32_t max_gpus = 0;                   ///< 0: no limit
};

/// One cluster's answer.
/// One cause of lost GPU time and its share of GPU time.
struct Loss {
  std::string
      key;  ///< machine-readable: bubbles, tp_comm, pp_comm, dp_comm, offload, optimizer, recompute, ...
  std::string what;
  double share = 0;
};

struct ClusterQuote {
  std::string hw;
  std::int32_t gpus = 0;
  std::string skipped;  ///< why it was not searched (not whole nodes, over --max-gpus), or empty
  std::string no_fit;   ///< the search found no configuration that fits, or empty
  Candidate best;       ///< when searched and something fits
  double usd_per_gpu_hour = 0;
  std::int64_t steps = 0;
  double time_to_train_s = 0;
  double gpu_hours = 0;
  double usd = 0;  ///< 0 when the profile has no price and none was given
  /// The GPUs at their rated board power, or the power limit they are held to, for the whole run (GPUs x
  /// watts x time): what the GPUs alone draw at most, without host, network and cooling; 0 when the profile
  /// has no board power figure.
  double energy_kwh = 0;
  std::int64_t headroom_bytes = 0;  ///< allowed GPU memory (the search's share) minus the peak
  /// Where a GPU's time goes besides useful model FLOPs at peak, as shares of GPU time (mfu + every loss =
  /// 1), largest first: pipeline bubbles, exposed TP / PP / DP communication, offload transfers and host
  /// work, the optimizer step, recompute, kernels below peak (GEMM efficiency, memory-bound work), other idle
  /// time.
  std::vector<Loss> losses;
  std::string limiter;  ///< the largest loss, in words
  /// The same layout with twice the microbatch does not fit memory (the search's share of it): memory, not
  /// speed, chose this microbatch size.
  bool microbatch_held_by_memory = false;
  bool meets_constraints = false;
  bool pareto = false;  ///< no other cluster meeting the constraints is both faster and cheaper
  bool answered() const { return skipped.empty() && no_fit.empty(); }
};

struct BuyResult {
  std::int64_t tokens_per_step = 0;
  std::int64_t steps = 0;
  std::vector<ClusterQuote> clusters;  ///< in the order asked: hardware, then GPU count
};

/// Optimizer steps to train `tokens` at `tokens_per_step` (rounded up); InputError on `--tokens` when the
/// count is out of range.
std::int64_t steps_to_train(double tokens, std::int64_t tokens_per_step);

/// Searches every cluster (progress, one line per cluster, to `progress` when not null).
BuyResult buy(const BuyOptions& options, std::ostream* progress);

}  // namespace pipesim::planner
