// A minimal spec sheet of a GPU server (`pipesim-spec`: datasheet figures only) completed into a full
// hardware profile with stated default efficiencies, so a GPU nobody has calibrated yet can be evaluated.
#pragma once

#include <string>

namespace pipesim::sim {

/// The `pipesim-hw` JSON text of the profile a `pipesim-spec` text describes; every completed figure's
/// source says "default: ...". Throws InputError naming `file` and the JSON path of a bad figure.
std::string complete_spec_sheet(const std::string& text, const std::string& file);

}  // namespace pipesim::sim
