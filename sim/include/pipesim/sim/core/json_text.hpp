// JSON as pipesim writes it. Strings from file names, flags and input files may hold bytes that are not
// UTF-8; they are written as U+FFFD instead of failing the whole output.
#pragma once

#include <string>

namespace pipesim::sim {

template <class Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace pipesim::sim
