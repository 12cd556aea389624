#include "pipesim/calibrate/collective_bandwidth.hpp"

#include <fmt/format.h>

namespace pipesim::calibrate {

bool merge_collectives(const CudaCalibration& c, sim::HardwareProfile& hw, const std::string& source) {
  auto& nv = hw.node.nvlink;
  if (nv.GBps_per_direction <= 0) return false;  // a PCIe ring: its links are priced one by one
  std::vector<sim::CurvePoint> curve;
  int ranks = 0;
  for (const CollectivePoint& p : c.collectives) {
    if (p.op != "all_reduce" || p.ranks < 2 || p.busbw_GBps <= 0) continue;
    curve.push_back({static_cast<double>(p.bytes), p.busbw_GBps});
    ranks = p.ranks;
  }
  if (curve.empty()) return false;
  nv.allreduce_busbw_by_size = curve;
  nv.allreduce_busbw_GBps = curve.back().y;
  const std::string how = fmt::format(
      "{} (NCCL all-reduce over {} GPUs, bf16, {} to {} bytes; bus bandwidth as nccl-tests reports it)",
      source, ranks, static_cast<long long>(curve.front().x), static_cast<long long>(curve.back().x));
  nv.sources["allreduce_busbw_by_size"] = how;
  nv.sources["allreduce_busbw_GBps"] = how + ", at the largest message";
  return true;
}

}  // namespace pipesim::calibrate
