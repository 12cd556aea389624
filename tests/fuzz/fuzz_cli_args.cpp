// The command line's argument handling: the input is split into arguments at newlines and parsed by the same
// application pipesim runs. A parsed `simulate` then has its job validated and its plan built (under a small
// memory budget, so every execution stays fast); nothing is simulated or written, and no other subcommand
// runs (they measure the machine or search for minutes). The application is built once per process (building
// it is most of an execution's time) and reset before each parse: its options' parse state by CLI11's
// clear(), the values they write by a copy of what they held right after registration.
#include <string>
#include <vector>

#include "cli_app.hpp"
#include "fuzz_input.hpp"
#include "pipesim/sim/job/job.hpp"
#include "pipesim/sim/schedules/plan_builder.hpp"
#include "pipesim/sim/schedules/schedule.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pipesim;
  std::vector<std::string> args{"pipesim"};
  std::string current;
  for (char ch : fuzz::as_text(data, size)) {
    if (ch != '\n') {
      current += ch;
      continue;
    }
    args.push_back(current);
    current.clear();
    if (args.size() > 64) return 0;
  }
  args.push_back(current);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());

  static CLI::App app{"pipesim"};
  static cli::Commands c;
  static const cli::Commands pristine = [] {
    cli::add_commands(app, c);
    return c;
  }();
  c = pristine;
  app.clear();
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {  // help, version, and every malformed command line
    return 0;
  }
  if (!c.sim->parsed() || !c.simulate.plan_file.empty()) return 0;
  return fuzz::expect_only_input_errors([&] {
    sim::JobOptions job = c.simulate.job;
    // About 4,000 ops per plan: `--schedule all` builds every schedule with every data-parallel mode (16
    // plans), which at 20,000 ops each took over 10 s under the sanitizers (a timeout, not a hang).
    job.max_memory_gib = 0.004;
    job.explicit_replicas = c.replicas == "explicit";
    sim::check_schedule_options(job);
    if (c.simulate.schedule == "all") {
      (void)sim::plans_of_all_schedules(job);
    } else {
      const auto& s = sim::find_schedule(c.simulate.schedule);
      (void)sim::build_plan(s, sim::make_schedule_input(job, s));
    }
  });
}
