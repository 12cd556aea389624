// Hardware profiles (shipped, calibrated or hand-written): parsed, written back and parsed again, and every
// figure the engine reads through the profile queried once.
#include "fuzz_input.hpp"
#include "pipesim/sim/hardware/hardware.hpp"
#include "pipesim/sim/hardware/nccl_tuning.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipesim::sim;
  return pipesim::fuzz::expect_only_input_errors([&] {
    HardwareProfile hw = parse_hardware_profile(pipesim::fuzz::as_text(data, size), "fuzz-hw.json");
    (void)hw.op_ns(1e12, 100, 4, "bf16", 1 << 20, 0, 0, 0, 0, 0);
    (void)hw.adam_params_per_s(4);
    // Collectives as plans time them: staged through host memory, inside a node and across 2 to 4,096 nodes.
    (void)hw.staged_GBps(hw.node.gpus);
    for (CollectiveKind kind :
         {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter})
      for (std::int32_t nodes : {1, 2, 64, 4096})
        (void)nccl_timing(hw, kind, nodes * hw.node.gpus, nodes, std::int64_t{1} << 28);
    (void)parse_hardware_profile(hardware_profile_to_json(hw), "fuzz-hw-roundtrip.json");
  });
}
