// pipesim: predict, plan and validate pipeline-parallel LLM training (see cli_app.hpp).
#include "cli_app.hpp"

int main(int argc, char** argv) {
  return pipesim::cli::run_cli(argc, argv);
}
