#include "pipesim/sim/core/install_paths.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

namespace pipesim::sim {

namespace fs = std::filesystem;

std::string binary_dir() {
  Dl_info info{};
  // The address of this function names the object it was linked into.
  if (dladdr(reinterpret_cast<void*>(&binary_dir), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ec;
    fs::path self = fs::canonical(info.dli_fname, ec);
    if (!ec) return self.parent_path().string();
  }
  std::error_code ec;
  fs::path exe = fs::canonical("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::vector<std::string> module_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("PIPESIM_MODULE_DIR"); env != nullptr && *env != '\0')
    dirs.push_back(env);
  const fs::path here = binary_dir();
  for (const fs::path& up : {here.parent_path(), here.parent_path().parent_path()})
    dirs.push_back((up / "lib" / "pipesim").string());
  return dirs;
}

std::string find_module(const std::string& file) {
  for (const std::string& dir : module_dirs()) {
    std::error_code ec;
    const fs::path candidate = fs::path(dir) / file;
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
  }
  return "";
}

std::string module_search_text(const std::string& file) {
  return fmt::format("{} not found in {} (set PIPESIM_MODULE_DIR to the folder holding it)", file,
                     fmt::join(module_dirs(), ", "));
}

}  // namespace pipesim::sim
