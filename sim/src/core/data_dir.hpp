// Where shipped data (hw_profiles/, models/, frameworks/, fill_jobs/) lives: $PIPESIM_DATA_DIR, else an
// installed tree's <prefix>/share/pipesim, else the source tree set at build time.
#pragma once

#include <string>
#include <vector>

namespace pipesim::sim {

std::string data_dir();

/// Names (file stems) of the JSON files shipped in data_dir()/folder, sorted.
std::vector<std::string> shipped_names(const std::string& folder);

/// The file for `name_or_path`: a path as given, or data_dir()/folder/NAME.json for a bare name; throws
/// InputError listing the shipped names (`what` says what they are) when a bare name is unknown.
std::string resolve_shipped(const std::string& name_or_path, const std::string& folder,
                            const std::string& what);

}  // namespace pipesim::sim
