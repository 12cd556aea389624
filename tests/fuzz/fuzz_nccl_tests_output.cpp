// nccl-tests outputs (calibrate --from-nccl-tests): parsed, set into a profile's network at their largest
// common size, and the profile written back and parsed again.
#include "fuzz_input.hpp"
#include "pipesim/calibrate/nccl_tests_output.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipesim;
  static const sim::HardwareProfile base = sim::load_hardware_profile("h100-p5-8x");
  return fuzz::expect_only_input_errors([&] {
    const calibrate::NcclTestsRun run =
        calibrate::parse_nccl_tests_output(fuzz::as_text(data, size), "fuzz.txt");
    const sim::HardwareProfile hw = calibrate::with_nccl_tests(base, {run}, 0);
    (void)sim::parse_hardware_profile(sim::hardware_profile_to_json(hw), "fuzz-hw-roundtrip.json");
  });
}
