// The options of a job by name. The library says which option is at fault by its key, snake_case as
// JobOptions and the Python keywords write it ("microbatch_size"); how a front end spells it
// ("--microbatch-size" on the command line) is the front end's business, installed once at its start.
#pragma once

#include <string>
#include <string_view>

namespace pipesim::sim {

/// An option's key; "pp/tp/dp" names several options at once.
struct Option {
  std::string_view key;
};

/// How a front end writes one option key. The default writes the key as it is.
using OptionSpelling = std::string (*)(std::string_view key);

/// Installs the spelling every later error uses (the command line installs its flags at start).
void set_option_spelling(OptionSpelling spelling);

/// The option as the installed spelling writes it; each key of "a/b" spelled, joined by '/'.
std::string spelled(Option option);

}  // namespace pipesim::sim
