// The pipesim command line: every subcommand's options (CLI11), and the dispatch to the libraries. main() is
// run_cli(); the argument-handling fuzz target builds the same application and parses without running it.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "bubbles_command.hpp"
#include "buy_command.hpp"
#include "collectives_command.hpp"
#include "import_trace_command.hpp"
#include "partition_command.hpp"
#include "pipesim/calibrate/calibrate.hpp"
#include "plan_command.hpp"
#include "replay_command.hpp"
#include "simulate_command.hpp"

namespace pipesim::cli {

/// What the parsed arguments say; the subcommand pointers tell which one was given.
struct Commands {
  SimulateOptions simulate;
  std::string replicas = "symmetric";
  pipesim::calibrate::CalibrateOptions calibrate;
  PartitionOptions partition;
  PlanOptions plan;
  BuyCommandOptions buy;
  BubblesOptions bubbles;
  std::string bubbles_replicas = "symmetric";
  std::string explain_file, explain_format = "table";
  int explain_top = 10;
  ReplayCommandOptions replay;
  std::string compare_predicted, compare_measured, compare_format = "table";
  int compare_top = 10;
  std::string check_result, check_plan;
  ImportTraceOptions import_trace;
  CollectivesOptions collectives;
  std::string list_format = "table";  // schedules, hw, models, fill-jobs
  bool calibrate_replay_host = false;
  std::string calibrate_from_replay, calibrate_plan, calibrate_from_trace, calibrate_dtype = "bf16";
  std::string calibrate_framework;      ///< the framework that ran a trace (--from-trace)
  std::string calibrate_framework_out;  ///< that framework with the trace's CPU time a launch (--from-trace)
  std::vector<std::string> calibrate_from_nccl_tests;  ///< nccl-tests outputs of the cluster's collectives
  std::int64_t calibrate_nccl_tests_bytes = 0;  ///< the size their figure is taken at (0: largest common)
  CLI::Option* calibrate_base = nullptr;
  CLI::App *sim = nullptr, *cal = nullptr, *part = nullptr, *pl = nullptr, *explain = nullptr, *bub = nullptr,
           *rep = nullptr, *cmp = nullptr, *buy_cmd = nullptr, *check = nullptr, *import_trace_cmd = nullptr,
           *collectives_cmd = nullptr;
};

/// Registers every subcommand and its options on `app`, writing into `c`.
void add_commands(CLI::App& app, Commands& c);
/// Runs the parsed subcommand (throws the libraries' typed errors).
int dispatch(CLI::App& app, Commands& c, bool no_arguments);
/// Parses, runs, and maps errors to one line: exit code 2 for bad input, 3 for a broken invariant, 1 for
/// other internal errors.
int run_cli(int argc, char** argv);

}  // namespace pipesim::cli
