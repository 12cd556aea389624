// The command line's spelling of the library's option keys: "microbatch_size" is --microbatch-size.
#pragma once

#include <string>
#include <string_view>

namespace pipesim::cli {

/// "--" and the key with '-' for '_'.
std::string flag_of(std::string_view key);

/// Makes every later library error name its option as a flag.
void spell_options_as_flags();

}  // namespace pipesim::cli
