// Model files (pipesim-model presets and HuggingFace config.json): parsed, then priced, since shapes that
// load but overflow the cost model's arithmetic are bad input too.
#include "fuzz_input.hpp"
#include "pipesim/sim/workload/cost_model.hpp"
#include "pipesim/sim/workload/model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipesim::sim;
  return pipesim::fuzz::expect_only_input_errors([&] {
    ModelSpec m = parse_model(pipesim::fuzz::as_text(data, size), "fuzz-model.json");
    CostOptions o{2, 4096, 1, Recompute::kFull};
    o.grad_accumulation = GradAccumulation::kMainGrad;
    (void)model_layer_costs(m, o);
  });
}
