// PyTorch profiler traces (Kineto JSON): the streaming reader, the replay of the CPU's launches and the
// attribution of its events to layers.
#include <sstream>

#include "fuzz_input.hpp"
#include "pipesim/trace_import/host_wait.hpp"
#include "pipesim/trace_import/kineto_trace.hpp"
#include "pipesim/trace_import/step_profile.hpp"
#include "pipesim/trace_import/workload_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipesim::trace_import;
  const std::string text = pipesim::fuzz::as_text(data, size);
  return pipesim::fuzz::expect_only_input_errors([&] {
    std::istringstream in(text);
    const KinetoTrace trace = parse_kineto_trace(in, "fuzz-trace.json");
    (void)replay_host(trace, ProfilerCost{});  // a trace without modules too
    const StepProfile step = profile_step(trace);
    WorkloadOptions o;
    o.name = "fuzz";
    o.blocks = 3;
    (void)workload_json(step, o);
  });
}
