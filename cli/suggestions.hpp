// What the command line did not understand, named with the nearest valid word: a mistyped command or
// option gets "unknown command 'simulat'; did you mean 'simulate'?" instead of the parser's generic message.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace pipesim::cli {

/// The candidate nearest to `word` (edit distance), or "" when none is close enough to be a typo of it.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

/// One line for an unknown command (checked before parsing) or unknown option (after the parser refused
/// `argv`), or nothing when the words are known and the parser's own message says it better.
std::optional<std::string> unknown_command(const CLI::App& app, int argc, char** argv);
std::optional<std::string> unknown_option(CLI::App& app, int argc, char** argv);

}  // namespace pipesim::cli
