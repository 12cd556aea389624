#include "pipesim/sim/data_dir.hpp"

#include <cstdlib>

namespace pipesim::sim {

std::string data_dir() {
  if (const char* env = std::getenv("PIPESIM_DATA_DIR"); env && *env) return env;
  return PIPESIM_DATA_DIR_DEFAULT;
}

}  // namespace pipesim::sim
