// PyTorch execution traces: the streaming reader, the activation memory it attributes to the layers of a
// step (an embedding, two blocks and a head whose forward ops are numbered 10, 20, 21 and 30), and the
// workload written from it.
#include <sstream>

#include "fuzz_input.hpp"
#include "pipesim/trace_import/execution_trace.hpp"
#include "pipesim/trace_import/saved_activations.hpp"
#include "pipesim/trace_import/step_profile.hpp"
#include "pipesim/trace_import/workload_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipesim::trace_import;
  const std::string text = pipesim::fuzz::as_text(data, size);
  return pipesim::fuzz::expect_only_input_errors([&] {
    std::istringstream in(text);
    const ExecutionTrace et = parse_execution_trace(in, "fuzz.et.json");
    StepProfile step;
    step.block_module = "TinyBlock";
    step.layers.resize(4);
    step.layers.front().role = "embedding";
    step.layers[1].role = step.layers[2].role = "block";
    step.layers.back().role = "head";
    for (auto& l : step.layers) l.params = 1000;
    step.layer_of_sequence = {{10, 0}, {20, 1}, {21, 2}, {30, 3}};
    add_saved_activations(et, step);
    WorkloadOptions o;
    o.name = "fuzz";
    o.blocks = 3;
    (void)workload_json(step, o);
  });
}
