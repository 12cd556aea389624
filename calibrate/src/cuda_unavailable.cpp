// Built when CMake found no CUDA compiler: the CUDA benchmarks are absent and say so.
#include "pipesim/calibrate/cuda_calibration.hpp"

namespace pipesim::calibrate {

bool cuda_compiled() {
  return false;
}

CudaCalibration run_cuda_calibration(const CudaOptions&, const std::function<void(const std::string&)>&) {
  CudaCalibration c;
  c.why_not = "this pipesim was built without CUDA (no nvcc found when it was configured)";
  return c;
}

}  // namespace pipesim::calibrate
