// pipesim: predict, plan and validate pipeline-parallel LLM training (see cli_app.hpp).
#include "cli_app.hpp"
#include "keep_until_exit.hpp"
#include "pipesim/sim/core/memory_budget.hpp"

int main(int argc, char** argv) {
  pipesim::sim::configure_allocator();
  pipesim::cli::process_ends_after_command = true;  // its results go with the process
  return pipesim::cli::run_cli(argc, argv);
}
