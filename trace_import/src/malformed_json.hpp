// The one error line a streamed trace gets when it is not JSON, from nlohmann's SAX parse error.
#pragma once

#include <cstddef>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipesim/sim/core/error.hpp"

namespace pipesim::trace_import {

[[noreturn]] inline void throw_malformed_json(const std::string& file, std::size_t position,
                                              const nlohmann::detail::exception& e) {
  // nlohmann's message names the byte and what it expected; the prefix it adds says nothing more.
  std::string what = e.what();
  if (const auto at = what.rfind("syntax error"); at != std::string::npos) what = what.substr(at);
  throw sim::InputError(file, "", fmt::format("malformed JSON at byte {}: {}", position, what));
}

}  // namespace pipesim::trace_import
