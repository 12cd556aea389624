// Where pipesim finds what it loads at run time, relative to the binary it runs in (the pipesim executable or
// the Python extension), so that a build tree that is moved and an installed tree (`cmake --install`) both
// work: the loadable modules (CUDA calibration, CUDA replay, MPI transport) in <prefix>/lib/pipesim, shipped
// data in <prefix>/share/pipesim.
#pragma once

#include <string>
#include <vector>

namespace pipesim::sim {

/// The directory of the executable or shared object that contains this code.
std::string binary_dir();

/// Where a module file is looked for, in order: $PIPESIM_MODULE_DIR, then lib/pipesim one and two levels
/// above binary_dir() (the executable's and the Python package's places in a build or install tree).
std::vector<std::string> module_dirs();

/// The path of the module `file` (e.g. "libpipesim_cuda_replay.so") in the first of module_dirs() holding
/// it; "" when none does.
std::string find_module(const std::string& file);

/// One line for an error message: which directories were searched for `file`.
std::string module_search_text(const std::string& file);

}  // namespace pipesim::sim
