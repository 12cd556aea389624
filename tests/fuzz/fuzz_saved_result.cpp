// Saved results, as `pipesim check` reads them (simulate's JSON, or a timeline): any bytes are either read
// and held to the invariants, or refused as bad input. A result that breaks an invariant is the expected
// outcome of a doctored file, not a finding; anything else escaping is.
#include "fuzz_input.hpp"
#include "pipesim/sim/report/saved_result.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipesim;
  return fuzz::expect_only_input_errors([&] {
    for (const sim::SavedResult& r :
         sim::parse_saved_results(fuzz::as_text(data, size), "fuzz.result.json")) {
      try {
        sim::check_saved_result(r, nullptr);
      } catch (const sim::InvariantError&) {
      }
    }
  });
}
