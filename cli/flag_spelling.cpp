#include "flag_spelling.hpp"

#include <algorithm>

#include "pipesim/sim/core/option.hpp"

namespace pipesim::cli {

std::string flag_of(std::string_view key) {
  std::string out = "--" + std::string(key);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

void spell_options_as_flags() {
  pipesim::sim::set_option_spelling(&flag_of);
}

}  // namespace pipesim::cli
