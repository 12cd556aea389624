// `pipesim buy`: the best configuration on every candidate cluster, and the time and money to train on each.
#pragma once

#include <string>

#include "pipesim/planner/buy.hpp"

namespace pipesim::cli {

struct BuyCommandOptions {
  planner::BuyOptions buy;
  std::string hardware;      ///< comma-separated profiles
  std::string gpu_counts;    ///< comma-separated
  std::string schedules;     ///< comma-separated
  std::string gpu_hour_usd;  ///< NAME=PRICE,...
  std::string format = "table";
};

int run_buy(BuyCommandOptions options);

}  // namespace pipesim::cli
