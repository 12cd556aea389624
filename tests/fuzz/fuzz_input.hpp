// What every fuzz target shares: the input as text, and the contract under test — a loader given any bytes
// either succeeds or throws InputError (the CLI's one line and exit 2). Any other exception escapes to
// libFuzzer, which reports it as a finding, as it does crashes, sanitizer reports, leaks and timeouts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::fuzz {

inline std::string as_text(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

/// Runs `load`; input errors are the expected outcome of bad input, everything else is a bug.
template <class Load>
int expect_only_input_errors(Load&& load) {
  try {
    load();
  } catch (const sim::InputError&) {
  }
  return 0;
}

}  // namespace pipesim::fuzz
