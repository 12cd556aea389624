// What a hardware profile takes from the NCCL collectives the calibration measured (their bus bandwidth:
// CollectivePoint, collective_bus_factor).
#pragma once

#include <string>
#include <vector>

#include "pipesim/calibrate/cuda_calibration.hpp"
#include "pipesim/sim/hardware/hardware.hpp"

namespace pipesim::calibrate {

/// Puts the measured all-reduce bus bandwidth by message size into the profile's NVLink figures
/// (`allreduce_busbw_by_size`, and `allreduce_busbw_GBps` at the largest message) when the GPUs measured are
/// joined by NVLink and two or more took part; returns whether it did.
bool merge_collectives(const CudaCalibration& c, sim::HardwareProfile& hw, const std::string& source);

}  // namespace pipesim::calibrate
