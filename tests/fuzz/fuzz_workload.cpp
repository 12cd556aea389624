// Profiled workloads (measured per-layer times and sizes), under each recompute policy.
#include "fuzz_input.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "pipesim/sim/workload/profiled_workload.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipesim::sim;
  const std::string text = pipesim::fuzz::as_text(data, size);
  return pipesim::fuzz::expect_only_input_errors([&] {
    (void)parse_workload(text, "fuzz-workload.json", Recompute::kNone);
    (void)parse_workload(text, "fuzz-workload.json", Recompute::kFull);
  });
}
