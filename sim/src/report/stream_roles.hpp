// What the reports' passes over millions of ops need to know of each op's stream, in 8 bytes a stream: in a
// plan whose GPUs' ops interleave, consecutive ops sit on different GPUs' streams, and the streams' own
// records (with their names, 40 bytes each) would be fetched from all over.
#pragma once

#include <cstdint>
#include <vector>

#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::sim {

struct StreamRole {
  std::int32_t device = 0;
  bool compute = false;  // a compute stream
  bool on_gpu = false;   // its device is a GPU
  bool fill = false;     // a fill job's stream: its work is not the main job's, nor are its iterations
};

inline std::vector<StreamRole> stream_roles(const Plan& plan) {
  std::vector<StreamRole> roles;
  roles.reserve(plan.streams.size());
  for (const Stream& s : plan.streams)
    roles.push_back({s.device, s.kind == StreamKind::kCompute,
                     plan.devices[static_cast<std::size_t>(s.device)].kind == DeviceKind::kGpu,
                     s.kind == StreamKind::kFill});
  return roles;
}

}  // namespace pipesim::sim
