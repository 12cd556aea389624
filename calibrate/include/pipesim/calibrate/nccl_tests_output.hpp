// A cluster's network from the nccl-tests runs its owner already has: each output of all_reduce_perf,
// all_gather_perf or reduce_scatter_perf over N nodes gives the bus bandwidth of that collective at every
// size it ran, and a hardware profile holds one size's figure by node count
// (network.collective_busbw_by_nodes), from which pipesim prices every collective across nodes
// (sim/hardware/nccl_tuning.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipesim/sim/hardware/hardware.hpp"

namespace pipesim::calibrate {

/// One nccl-tests run as its output reports it.
struct NcclTestsRun {
  std::string file;
  std::string op;  ///< all_reduce, all_gather or reduce_scatter
  int nodes = 0;   ///< distinct hosts of its "#  Rank" lines
  int ranks = 0;
  std::string device;  ///< the GPU its rank lines name
  /// Out-of-place bus bandwidth (GB/s) by message size (bytes), in the order the run printed them.
  std::vector<sim::CurvePoint> busbw;
};

/// Parses the text of one nccl-tests output. The collective comes from its "# Collective test starting:"
/// line (nccl-tests 2.13 and later), else from the file's name; the nodes from the hosts of its rank lines.
/// Throws InputError naming the file and line for anything else.
NcclTestsRun parse_nccl_tests_output(const std::string& text, const std::string& file);

/// Reads and parses the file `path` (at most 64 MiB).
NcclTestsRun read_nccl_tests_output(const std::string& path);

/// `hw` with its network's collective_busbw_by_nodes replaced by the runs' bus bandwidth at `message_bytes`
/// (0: the largest size every run measured), by collective and node count, each figure sourced to its file.
/// Every run must have the profile's GPUs a node; two runs of one collective on one node count are refused.
sim::HardwareProfile with_nccl_tests(const sim::HardwareProfile& hw, const std::vector<NcclTestsRun>& runs,
                                     std::int64_t message_bytes);

}  // namespace pipesim::calibrate
