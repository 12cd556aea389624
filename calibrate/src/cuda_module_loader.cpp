// Loads the CUDA benchmarks (a separate module linked against the CUDA runtime and cuBLAS) only when a
// calibration asks for them, so that pipesim itself never loads CUDA libraries.
#include <dlfcn.h>

#include <string>

#include "pipesim/calibrate/cuda_calibration.hpp"
#include "pipesim/sim/core/install_paths.hpp"

namespace pipesim::calibrate {

bool cuda_compiled() {
  return true;
}

CudaCalibration run_cuda_calibration(const CudaOptions& options,
                                     const std::function<void(const std::string&)>& progress) {
  CudaCalibration c;
  const std::string file = PIPESIM_CUDA_MODULE_FILE;
  const std::string path = sim::find_module(file);
  if (path.empty()) {
    c.why_not = "cannot load the CUDA benchmarks: " + sim::module_search_text(file);
    return c;
  }
  void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!module) {
    const char* why = dlerror();
    c.why_not = "cannot load the CUDA benchmarks (" + path + "): " + (why ? why : "unknown error");
    return c;
  }
  using Entry =
      void (*)(const CudaOptions*, const std::function<void(const std::string&)>*, CudaCalibration*);
  auto entry = reinterpret_cast<Entry>(dlsym(module, "pipesim_cuda_calibration_entry"));
  if (!entry) {
    c.why_not = "the CUDA benchmark module has no entry point pipesim_cuda_calibration_entry";
    return c;
  }
  entry(&options, &progress, &c);
  return c;  // the module stays loaded: the process is about to write the profile and exit
}

}  // namespace pipesim::calibrate
