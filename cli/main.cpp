// pipesim: predict, plan and validate pipeline-parallel LLM training (see cli_app.hpp).
#include "cli_app.hpp"
#include "pipesim/sim/memory_budget.hpp"

int main(int argc, char** argv) {
  pipesim::sim::configure_allocator();
  return pipesim::cli::run_cli(argc, argv);
}
