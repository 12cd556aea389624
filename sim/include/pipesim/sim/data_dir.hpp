// Where shipped data (hw_profiles/, models/) lives: $PIPESIM_DATA_DIR, else the source tree set at build
// time.
#pragma once

#include <string>

namespace pipesim::sim {

std::string data_dir();

}  // namespace pipesim::sim
