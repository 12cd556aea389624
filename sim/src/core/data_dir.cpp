#include "core/data_dir.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "pipesim/sim/core/error.hpp"
#include "pipesim/sim/core/install_paths.hpp"

namespace pipesim::sim {

std::string data_dir() {
  if (const char* env = std::getenv("PIPESIM_DATA_DIR"); env && *env) return env;
  // An installed tree: <prefix>/bin/pipesim beside <prefix>/share/pipesim.
  const std::filesystem::path installed =
      std::filesystem::path(binary_dir()).parent_path() / "share" / "pipesim";
  std::error_code ec;
  if (std::filesystem::is_directory(installed / "hw_profiles", ec)) return installed.string();
  return PIPESIM_DATA_DIR_DEFAULT;
}

std::vector<std::string> shipped_names(const std::string& folder) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data_dir() + "/" + folder, ec))
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string resolve_shipped(const std::string& name_or_path, const std::string& folder,
                            const std::string& what) {
  if (name_or_path.find('/') != std::string::npos || name_or_path.find(".json") != std::string::npos)
    return name_or_path;
  std::string path = data_dir() + "/" + folder + "/" + name_or_path + ".json";
  std::error_code ec;  // a name the file system refuses (too long, say) is as unknown as a missing one
  if (!std::filesystem::exists(path, ec))
    throw InputError(name_or_path, "",
                     fmt::format("unknown {}; shipped: {} (or give a file path)", what,
                                 fmt::join(shipped_names(folder), ", ")));
  return path;
}

}  // namespace pipesim::sim
