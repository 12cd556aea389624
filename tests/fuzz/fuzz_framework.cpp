// Framework files (pipesim-framework): parsed, then applied to a job and resolved into a schedule input,
// since a setting that loads but the cost model refuses is bad input too.
#include "fuzz_input.hpp"
#include "pipesim/sim/job/framework.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/schedules/schedule.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipesim::sim;
  return pipesim::fuzz::expect_only_input_errors([&] {
    JobOptions j;
    j.loaded_framework =
        std::make_shared<const Framework>(parse_framework(pipesim::fuzz::as_text(data, size), "fuzz.json"));
    j.model = "qwen3-1.7b";
    j.hw = "h100-sxm-8x";
    j.pp = 2;
    j.tp = 2;
    (void)make_schedule_input(j, find_schedule("1f1b"));
  });
}
