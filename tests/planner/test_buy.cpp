#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "pipesim/planner/buy.hpp"
#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/hardware/hardware.hpp"

namespace pipesim::planner {
namespace {

/// Two small clusters of one node each, searched over 1F1B only (fast under the sanitizers).
BuyOptions small_buy() {
  BuyOptions o;
  o.search.base.model = "qwen3-1.7b";
  o.search.base.seq = 2048;
  o.search.global_batch = 32;
  o.search.schedules = {"1f1b"};
  o.search.recomputes = {"none"};
  o.search.threads = 2;
  o.hardware = {"h100-sxm-8x", "l40s-8x"};
  o.gpu_counts = {8, 12};
  o.tokens = 1e9;
  return o;
}

TEST(Buy, StepsToTrainRoundUp) {
  // 1e12 tokens at 1024 x 4096 tokens per step: 238,418.58 -> 238,419 steps.
  EXPECT_EQ(steps_to_train(1e12, 1024 * 4096), 238419);
  EXPECT_EQ(steps_to_train(4194304, 4194304), 1);
  EXPECT_EQ(steps_to_train(4194305, 4194304), 2);
  EXPECT_THROW(steps_to_train(1e30, 4194304), sim::InputError);  // beyond 1e18 tokens
  EXPECT_THROW(steps_to_train(0.5, 4194304), sim::InputError);
  EXPECT_THROW(steps_to_train(1e18, 1), sim::InputError);  // 1e18 steps: beyond 2^40
}

TEST(Buy, EveryClusterIsThePlannersAnswerPricedByHand) {
  BuyOptions o = small_buy();
  const BuyResult r = buy(o, nullptr);
  EXPECT_EQ(r.tokens_per_step, 32 * 2048);
  EXPECT_EQ(r.steps, 15259);  // ceil(1e9 / 65,536) = ceil(15,258.79)
  ASSERT_EQ(r.clusters.size(), 4u);
  for (const ClusterQuote& q : r.clusters) {
    if (q.gpus == 12) {  // not whole nodes of 8
      EXPECT_EQ(q.skipped, "not whole nodes of 8 GPUs");
      continue;
    }
    ASSERT_TRUE(q.answered()) << q.hw << " " << q.no_fit;
    SearchOptions s = o.search;
    s.base.hw = q.hw;
    s.gpus = q.gpus;
    s.top = 1;
    const SearchResult alone = search(s, nullptr);
    ASSERT_FALSE(alone.ranked.empty());
    EXPECT_EQ(q.best.key(), alone.ranked.front().key());
    EXPECT_EQ(q.best.metrics.step_span_ns, alone.ranked.front().metrics.step_span_ns);
    const double price = sim::load_hardware_profile(q.hw).gpu_hour_usd;
    const double seconds = 15259.0 * q.best.metrics.step_time_s;
    EXPECT_EQ(q.time_to_train_s, seconds);
    EXPECT_EQ(q.gpu_hours, 8.0 * seconds / 3600.0);
    EXPECT_EQ(q.usd, 8.0 * seconds / 3600.0 * price);
    // Energy: the 8 GPUs at their rated board power for the whole run.
    const double watts = sim::load_hardware_profile(q.hw).gpu.board_W;
    EXPECT_GT(watts, 0) << q.hw;
    EXPECT_EQ(q.energy_kwh, 8.0 * seconds / 3600.0 * watts / 1000.0);
    double lost = 0;
    for (const Loss& l : q.losses) lost += l.share;
    EXPECT_NEAR(q.best.metrics.mfu + lost, 1.0, 1e-9);
    EXPECT_EQ(q.limiter, q.losses.front().what);
    EXPECT_TRUE(q.meets_constraints);
  }
  // Both answered clusters are on the front unless one is faster and cheaper.
  const ClusterQuote &h = r.clusters[0], &l = r.clusters[2];
  const bool h_dominates = h.time_to_train_s <= l.time_to_train_s && h.usd <= l.usd;
  EXPECT_EQ(l.pareto, !h_dominates);
  EXPECT_TRUE(h.pareto || l.pareto);
}

TEST(Buy, ConstraintsAndPrices) {
  BuyOptions o = small_buy();
  o.gpu_counts = {8};
  o.hardware = {"h100-sxm-8x"};
  o.gpu_hour_usd["h100-sxm-8x"] = 2.0;
  o.steps = 1000;
  o.tokens = 0;
  BuyResult r = buy(o, nullptr);
  ASSERT_TRUE(r.clusters[0].answered());
  const double usd = 8.0 * 1000.0 * r.clusters[0].best.metrics.step_time_s / 3600.0 * 2.0;
  EXPECT_EQ(r.clusters[0].usd, usd);
  EXPECT_TRUE(r.clusters[0].pareto);
  o.max_usd = usd / 2;  // a budget it misses: still an answer, not an error
  r = buy(o, nullptr);
  EXPECT_FALSE(r.clusters[0].meets_constraints);
  EXPECT_FALSE(r.clusters[0].pareto);
  o.max_usd = 0;
  o.deadline_days = 1e-9;
  EXPECT_FALSE(buy(o, nullptr).clusters[0].meets_constraints);
  o.deadline_days = 0;
  o.max_gpus = 4;
  EXPECT_EQ(buy(o, nullptr).clusters[0].skipped, "over max_gpus 4");
}

TEST(Buy, BadInputIsAnInputError) {
  BuyOptions o = small_buy();
  o.hardware = {"h100-sxm-8x", "no-such-gpu"};
  EXPECT_THROW(buy(o, nullptr), sim::InputError);
  o = small_buy();
  o.steps = 10;  // both tokens and steps
  EXPECT_THROW(buy(o, nullptr), sim::InputError);
  o = small_buy();
  o.tokens = 1e30;
  EXPECT_THROW(buy(o, nullptr), sim::InputError);
  o = small_buy();
  o.gpu_hour_usd["rtx4090-8x"] = 1.0;  // a price for a cluster not asked about
  EXPECT_THROW(buy(o, nullptr), sim::InputError);
  // A budget needs every cluster's price: a profile without one is refused before any search.
  const auto dir = std::filesystem::temp_directory_path() / "pipesim_buy_test";
  std::filesystem::create_directories(dir);
  const auto path = (dir / "priceless.json").string();
  nlohmann::json hw =
      nlohmann::json::parse(sim::hardware_profile_to_json(sim::load_hardware_profile("l40s-8x")));
  hw.erase("gpu_hour_usd");
  hw["name"] = "priceless";
  std::ofstream(path) << hw.dump();
  o = small_buy();
  o.hardware = {"h100-sxm-8x", path};
  o.max_usd = 1e6;
  try {
    buy(o, nullptr);
    ADD_FAILURE() << "a budget without a price must be refused";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu_hour_usd:"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
  // An attention kernel one cluster has no rate for is refused before any search, naming that cluster.
  o = small_buy();
  o.search.base.attention_kernel = "cudnn";
  try {
    buy(o, nullptr);
    ADD_FAILURE() << "cudnn has no rate on l40s-8x";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'cudnn' has no published rate on l40s-8x; valid: gemm"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pipesim::planner
