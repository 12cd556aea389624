#include "pipesim/sim/core/option.hpp"

#include <atomic>

namespace pipesim::sim {
namespace {

std::string as_key(std::string_view key) {
  return std::string(key);
}

std::atomic<OptionSpelling> g_spelling{&as_key};

}  // namespace

void set_option_spelling(OptionSpelling spelling) {
  g_spelling.store(spelling ? spelling : &as_key);
}

std::string spelled(Option option) {
  const OptionSpelling spell = g_spelling.load();
  std::string out;
  std::string_view rest = option.key;
  for (;;) {
    const std::size_t slash = rest.find('/');
    out += spell(rest.substr(0, slash));
    if (slash == std::string_view::npos) return out;
    out += '/';
    rest.remove_prefix(slash + 1);
  }
}

}  // namespace pipesim::sim
