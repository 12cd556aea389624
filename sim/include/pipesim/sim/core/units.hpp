// Units the reports and limits are written in.
#pragma once

namespace pipesim::sim {

inline constexpr double kBytesPerGiB = 1073741824.0;  // 2^30

}  // namespace pipesim::sim
