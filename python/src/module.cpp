// The native part of the Python module: pipesim's command line, run in-process. The Python package turns
// keyword arguments into the command's arguments, so every default, every check and every error message is
// the command line's own; this file only runs it with the GIL released and hands back what it printed.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <csignal>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli_app.hpp"
#include "flag_spelling.hpp"

namespace py = pybind11;

namespace {

// std::cout and std::cerr are redirected while a command runs, so commands run one at a time.
std::mutex g_command;

/// Points `stream` at `buffer` for its lifetime.
class Redirect {
 public:
  Redirect(std::ostream& stream, std::streambuf* buffer) : stream_(stream), saved_(stream.rdbuf(buffer)) {}
  ~Redirect() { stream_.rdbuf(saved_); }
  Redirect(const Redirect&) = delete;
  Redirect& operator=(const Redirect&) = delete;

 private:
  std::ostream& stream_;
  std::streambuf* saved_;
};

/// Keeps the interpreter's SIGINT and SIGTERM handlers: the library installs its own (which remove output
/// temporaries and kill the process) the first time it writes a file, and Python must keep raising
/// KeyboardInterrupt. Outputs are still written whole: an interrupt is seen by Python once the command ends.
class KeepSignalHandlers {
 public:
  KeepSignalHandlers() {
    sigaction(SIGINT, nullptr, &int_);
    sigaction(SIGTERM, nullptr, &term_);
  }
  ~KeepSignalHandlers() {
    sigaction(SIGINT, &int_, nullptr);
    sigaction(SIGTERM, &term_, nullptr);
  }
  KeepSignalHandlers(const KeepSignalHandlers&) = delete;
  KeepSignalHandlers& operator=(const KeepSignalHandlers&) = delete;

 private:
  struct sigaction int_ {};
  struct sigaction term_ {};
};

/// Runs `pipesim ARGS...`; returns (exit code, standard output, standard error).
std::tuple<int, std::string, std::string> run(const std::vector<std::string>& args) {
  std::vector<std::string> owned{"pipesim"};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : owned) argv.push_back(a.data());
  std::ostringstream out, err;
  int code = 0;
  {
    py::gil_scoped_release released;
    std::lock_guard<std::mutex> lock(g_command);
    KeepSignalHandlers keep;
    Redirect to_out(std::cout, out.rdbuf()), to_err(std::cerr, err.rdbuf());
    code = pipesim::cli::run_cli(static_cast<int>(argv.size()), argv.data());
  }
  return {code, out.str(), err.str()};
}

/// The long option names of a subcommand and whether each is a flag (takes no value).
std::vector<std::pair<std::string, bool>> options(const std::string& subcommand) {
  CLI::App app;
  pipesim::cli::Commands commands;
  pipesim::cli::add_commands(app, commands);
  CLI::App* sub = nullptr;
  try {
    sub = app.get_subcommand(subcommand);
  } catch (const CLI::OptionNotFound&) {
    throw py::value_error("no pipesim command '" + subcommand + "'");
  }
  std::vector<std::pair<std::string, bool>> out;
  for (const CLI::Option* o : sub->get_options()) {
    if (o->get_lnames().empty() || o->get_lnames().front() == "help") continue;
    out.emplace_back("--" + o->get_lnames().front(), o->get_expected_min() == 0);
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_pipesim, m) {
  pipesim::cli::spell_options_as_flags();  // before the schedule registry is first read
  m.doc() = "pipesim's command line, run in-process (use the `pipesim` package, not this module)";
  m.def("run", &run, py::arg("args"),
        "Runs `pipesim ARGS...` in this process; returns (exit code, stdout, stderr). The GIL is released.");
  m.def("options", &options, py::arg("subcommand"),
        "The long options of a subcommand: (name, is_flag) pairs, as the command line defines them.");
}
