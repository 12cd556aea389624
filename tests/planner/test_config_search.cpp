#include <gtest/gtest.h>

#include "pipesim/planner/config_search.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan_check.hpp"
#include "pipesim/sim/plan/plan_json.hpp"
#include "pipesim/sim/report/metrics.hpp"

#include <fmt/format.h>

namespace pipesim::planner {
namespace {

SearchOptions small_search() {
  SearchOptions o;
  o.base.model = "llama2-7b";
  o.base.hw = "h100-sxm-8x";
  o.base.seq = 2048;
  o.gpus = 8;
  o.global_batch = 32;
  o.top = 5;
  o.threads = 2;
  return o;
}

/// The default search, run once for the tests that only read it.
const SearchResult& default_search() {
  static const SearchResult r = search(small_search(), nullptr);
  return r;
}

TEST(ConfigSearch, RanksSimulatedConfigurationsBestFirst) {
  const SearchResult& r = default_search();
  ASSERT_FALSE(r.ranked.empty());
  EXPECT_GT(r.enumerated, r.simulated);
  for (std::size_t i = 1; i < r.ranked.size(); ++i)
    EXPECT_LE(r.ranked[i - 1].metrics.step_time_s, r.ranked[i].metrics.step_time_s);
  for (const auto& c : r.ranked) {
    EXPECT_EQ(c.job.pp * c.job.tp * c.job.dp, 8);
    EXPECT_FALSE(c.metrics.oom);
    EXPECT_LE(static_cast<double>(c.lower_bound_ns) / 1e9, c.metrics.step_time_s);  // the bound is a bound
  }
}

TEST(ConfigSearch, IsDeterministicWhateverTheThreadCount) {
  SearchOptions o = small_search();
  o.threads = 1;
  SearchResult a = search(o, nullptr);
  o.threads = 3;
  SearchResult b = search(o, nullptr);
  ASSERT_EQ(a.ranked.size(), b.ranked.size());
  for (std::size_t i = 0; i < a.ranked.size(); ++i) {
    EXPECT_EQ(a.ranked[i].key(), b.ranked[i].key());
    EXPECT_EQ(a.ranked[i].metrics.step_time_s, b.ranked[i].metrics.step_time_s);
  }
}

TEST(ConfigSearch, TheWinnersPlanSimulatesToThePlannersPrediction) {
  const SearchResult& r = default_search();
  ASSERT_FALSE(r.ranked.empty());
  const Candidate& best = r.ranked.front();
  sim::Plan plan = candidate_plan(best);
  sim::Plan back = sim::plan_from_json(sim::plan_to_json(plan), "winner.json");
  sim::check_plan_order(back);
  sim::Timeline tl = sim::Engine{}.run(back);
  EXPECT_EQ(sim::compute_metrics(back, tl).step_time_s, best.metrics.step_time_s);
  EXPECT_EQ(back.meta.partition.size(),
            static_cast<std::size_t>(best.job.pp * std::max(1, best.job.virtual_stages)));
}

TEST(ConfigSearch, ExhaustiveAndPrunedAgreeOnTheWinner) {
  // The lower bound never cuts the best configuration: compare with a search that keeps everything.
  SearchOptions o = small_search();
  o.top = 1;
  SearchResult pruned = search(o, nullptr);
  o.top = 100000;
  SearchResult all = search(o, nullptr);
  ASSERT_FALSE(all.ranked.empty());
  EXPECT_EQ(all.pruned_bound, 0);
  EXPECT_EQ(pruned.ranked.front().key(), all.ranked.front().key());
  EXPECT_LT(pruned.simulated, all.simulated);
}

TEST(ConfigSearch, PrunedSearchesReturnExactlyTheExhaustiveTopK) {
  // Pruning by the schedules' lower bounds changes how many candidates are simulated, never the answer: the
  // same top-K, in the same order, as simulating every feasible candidate, over a grid of searches.
  std::int64_t searches = 0, cut = 0;
  for (const char* model : {"qwen3-1.7b", "llama2-7b"})
    for (const char* hw : {"h100-sxm-8x", "rtx4090-8x"})
      for (const char* objective : {"throughput", "cost"}) {
        SearchOptions o = small_search();
        o.base.model = model;
        o.base.hw = hw;
        o.objective = objective;
        o.schedules = {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1"};
        o.recomputes = {"none", "full"};
        o.data_parallel = {"ddp", "zero-1"};
        o.top = 5;
        const SearchResult pruned = search(o, nullptr);
        o.exhaustive = true;
        const SearchResult all = search(o, nullptr);
        const std::string where = fmt::format("{} on {}, {}", model, hw, objective);
        ASSERT_EQ(all.pruned_bound, 0) << where;
        ASSERT_EQ(pruned.ranked.size(), all.ranked.size()) << where;
        for (std::size_t k = 0; k < all.ranked.size(); ++k) {
          EXPECT_EQ(pruned.ranked[k].key(), all.ranked[k].key()) << where << ", rank " << k + 1;
          EXPECT_EQ(pruned.ranked[k].metrics.step_span_ns, all.ranked[k].metrics.step_span_ns) << where;
        }
        ++searches;
        cut += pruned.pruned_bound;
      }
  // A GPT model run with Megatron-LM's 2021 kernels (unfused attention with dropout, separate bias kernels,
  // two-pass norm backwards): the bounds price the same extra traffic the simulation does.
  SearchOptions o = small_search();
  o.base.model = "gpt-40b";
  o.base.hw = "a100-80g-sxm-8x";
  o.base.attention = "unfused";
  o.base.dropout = true;
  o.base.sequence_parallel = false;
  o.base.bias_kernels = "separate";
  o.base.norm_backward = "two-pass";
  o.recomputes = {"full"};
  o.global_batch = 16;
  const SearchResult pruned = search(o, nullptr);
  o.exhaustive = true;
  const SearchResult all = search(o, nullptr);
  ASSERT_FALSE(all.ranked.empty());
  ASSERT_EQ(pruned.ranked.size(), all.ranked.size());
  for (std::size_t k = 0; k < all.ranked.size(); ++k) {
    EXPECT_EQ(pruned.ranked[k].key(), all.ranked[k].key()) << "gpt-40b, rank " << k + 1;
    EXPECT_EQ(pruned.ranked[k].metrics.step_span_ns, all.ranked[k].metrics.step_span_ns);
  }
  EXPECT_EQ(searches, 8);
  EXPECT_GT(cut, 0) << "the bounds prune something";
}

TEST(ConfigSearch, CostObjectiveTriesFewerGpus) {
  SearchOptions o = small_search();
  o.objective = "cost";
  SearchResult r = search(o, nullptr);
  ASSERT_FALSE(r.ranked.empty());
  for (std::size_t i = 1; i < r.ranked.size(); ++i)
    EXPECT_LE(r.ranked[i - 1].usd_per_million_tokens, r.ranked[i].usd_per_million_tokens);
  EXPECT_GT(r.ranked.front().usd_per_million_tokens, 0);
  o.gpu_hour_usd = 0;
  o.base.hw = "h100-sxm-8x";
  EXPECT_NO_THROW(search(o, nullptr));  // the profile has a price
}

TEST(ConfigSearch, PicksShardedDataParallelismWhereMemoryIsShort) {
  // Llama-3-8B on eight 24 GB GPUs without pipeline stages: plain data parallelism needs 16 B per parameter
  // (128 GB) on every GPU; only sharded configurations fit, and the planner says so.
  SearchOptions o = small_search();
  o.base.model = "llama3-8b";
  o.base.hw = "rtx4090-8x";
  o.pp = 1;
  o.schedules = {"1f1b"};
  SearchResult r = search(o, nullptr);
  ASSERT_FALSE(r.ranked.empty());
  const Candidate& best = r.ranked.front();
  EXPECT_NE(data_parallel_mode(best.job), "ddp");
  EXPECT_NE(r.why_sharded.find(data_parallel_mode(best.job)), std::string::npos) << r.why_sharded;
  for (const auto& c : r.ranked) EXPECT_FALSE(c.metrics.oom);
  // Restricted to plain data parallelism, nothing without optimizer offload fits.
  o.data_parallel = {"ddp"};
  SearchResult plain = search(o, nullptr);
  for (const auto& c : plain.ranked) EXPECT_TRUE(c.job.optimizer_offload) << c.key();
  EXPECT_TRUE(plain.why_sharded.empty());
}

TEST(ConfigSearch, DenseModelsAreNotSplitByExperts) {
  // llama2-7b has no experts: no candidate asks for expert parallelism, and none is invalid for it.
  const SearchResult& r = default_search();
  EXPECT_EQ(r.first_invalid.find("ep:"), std::string::npos) << r.first_invalid;
  for (const auto& c : r.ranked) EXPECT_EQ(c.job.ep, 1) << c.key();
}

TEST(ConfigSearch, BadOptions) {
  SearchOptions o = small_search();
  o.global_batch = 0;
  EXPECT_THROW(search(o, nullptr), sim::InputError);
  o = small_search();
  o.schedules = {"nope"};  // unknown names are rejected before any work
  EXPECT_THROW(search(o, nullptr), sim::InputError);
  o = small_search();
  o.objective = "speed";
  EXPECT_THROW(search(o, nullptr), sim::InputError);
}

TEST(ConfigSearch, SplitsLongSequencesOverContextParallelRanksWhenThatWins) {
  // llama3-8b at 64K tokens on 64 H100s: whole sequences per GPU need tp 8 (or memory runs out); splitting
  // each over 8 ranks keeps the GEMMs whole and wins. Short sequences are never split.
  SearchOptions o = small_search();
  o.base.model = "llama3-8b";
  o.base.seq = 65536;
  o.gpus = 64;
  o.global_batch = 64;
  o.top = 3;
  const SearchResult split = search(o, nullptr);
  ASSERT_FALSE(split.ranked.empty());
  const Candidate& best = split.ranked.front();
  EXPECT_GT(best.job.cp, 1) << best.key();
  EXPECT_EQ(best.job.pp * best.job.tp * best.job.cp * best.job.dp, 64);
  EXPECT_EQ(best.metrics.num_gpus, 64);
  EXPECT_NE(split.why_context_parallel.find(fmt::format("cp {}", best.job.cp)), std::string::npos);
  o.cp = 1;
  const SearchResult whole = search(o, nullptr);
  ASSERT_FALSE(whole.ranked.empty());
  EXPECT_GT(whole.ranked.front().metrics.step_time_s, best.metrics.step_time_s);
  EXPECT_TRUE(whole.why_context_parallel.empty());
  for (const auto& c : default_search().ranked) EXPECT_EQ(c.job.cp, 1) << c.key();  // 2,048 tokens
}

}  // namespace
}  // namespace pipesim::planner
