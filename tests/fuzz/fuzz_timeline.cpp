// Timelines (simulated or measured by replay), as `compare` and `calibrate --from-replay` read them; a
// timeline is compared with itself, which must give zero error whatever it holds.
#include "fuzz_input.hpp"
#include "pipesim/replay/compare.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipesim;
  return fuzz::expect_only_input_errors([&] {
    replay::TimelineFile t = replay::parse_timeline(fuzz::as_text(data, size), "fuzz.timeline.json");
    const replay::Comparison c = replay::compare_timelines(t, t, 5);
    (void)replay::comparison_table(c);
    (void)replay::comparison_json(c);
  });
}
