// A simulated plan as Chakra execution traces (the format ASTRA-sim replays): one file per GPU, a
// GlobalMetadata message and then one Node message per op, each length-delimited (a varint of its size), in
// Chakra's protobuf schema (mlcommons/chakra schema/protobuf/et_def.proto, version 0.0.4). Compute, memory
// copies and markers become COMP_NODEs lasting the op's simulated time; collectives COMM_COLL_NODEs with their
// type, group and the buffer their ring moves (every collective of the op's layers and pass together); a
// pipeline send a COMM_SEND_NODE on the sender and a COMM_RECV_NODE on the receiver. An op waits on its
// stream's previous op (ctrl_deps) and on the ops it depends on (data_deps).
#pragma once

#include <cstdint>
#include <string>

#include "pipesim/sim/engine/engine.hpp"
#include "pipesim/sim/plan/plan.hpp"

namespace pipesim::sim {

struct ChakraExport {
  std::int32_t files = 0;         ///< one per GPU
  std::int64_t nodes = 0;         ///< in all files
  std::int64_t dropped_deps = 0;  ///< dependencies on another GPU's op that is not a transfer to this one
};

/// Writes `dir`/`prefix`.<rank>.et for every GPU of the plan (rank: its index among the plan's GPUs), each
/// written atomically; the ops' durations are `timeline`'s. Throws InputError naming a file it cannot write.
ChakraExport write_chakra_traces(const Plan& plan, const Timeline& timeline, const std::string& dir,
                                 const std::string& prefix);

}  // namespace pipesim::sim
