#include "suggestions.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace pipesim::cli {

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string near = nearest(word, candidates);
  return near.empty() ? "" : fmt::format("; did you mean '{}'?", near);
}

}  // namespace

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (best.empty() || d < best_distance) best = c, best_distance = d;
  }
  // A typo changes a few letters: at most a third of the word, and never all of a short one.
  return !best.empty() && best_distance * 3 <= std::max(word.size(), best.size()) ? best : "";
}

std::optional<std::string> unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return std::nullopt;
  const std::string word = argv[1];
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == word) return std::nullopt;
    names.push_back(sub->get_name());
  }
  std::string valid;
  for (const std::string& n : names) valid += (valid.empty() ? "" : ", ") + n;
  return fmt::format("unknown command '{}'{} (valid: {})", word, did_you_mean(word, names), valid);
}

std::optional<std::string> unknown_option(CLI::App& app, int argc, char** argv) {
  if (argc < 2) return std::nullopt;
  CLI::App* sub = nullptr;
  try {
    sub = app.get_subcommand(argv[1]);
  } catch (const CLI::OptionNotFound&) {
    return std::nullopt;
  }
  std::vector<std::string> names;
  for (const CLI::Option* o : sub->get_options())
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  for (int i = 2; i < argc; ++i) {
    std::string word = argv[i];
    if (word.rfind("--", 0) != 0 || word == "--") continue;
    word = word.substr(0, word.find('='));  // --flag=value
    if (std::find(names.begin(), names.end(), word) != names.end()) continue;
    return fmt::format("unknown option '{}' for '{}'{} (see pipesim {} --help)", word, sub->get_name(),
                       did_you_mean(word, names), sub->get_name());
  }
  return std::nullopt;
}

}  // namespace pipesim::cli
