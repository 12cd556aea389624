// Whole-process figures of the speed table: each iteration starts the built `pipesim` binary, waits for it
// and reads its peak resident memory from the kernel, so start-up, file loading, output and exit count as a
// user sees them. Output goes to /dev/null.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <string>
#include <vector>

extern char** environ;

namespace {

/// Runs `pipesim args...` once; returns its peak RSS in MB, or a negative value when it did not exit 0.
double run_pipesim(const std::vector<std::string>& args) {
  std::vector<std::string> words{PIPESIM_BINARY};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, words[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

void run(benchmark::State& state, const std::vector<std::string>& args) {
  double rss = 0;
  for (auto _ : state) {
    rss = run_pipesim(args);
    if (rss < 0) {
      state.SkipWithError("pipesim did not run or did not exit 0");
      return;
    }
  }
  state.counters["peak_rss_MB"] = rss;
}

/// gpt-40b, 1F1B, pp 8 x dp N with every GPU instantiated (the scaling curve's job).
std::vector<std::string> pipelines(int dp) {
  return {"simulate",
          "--model",
          "gpt-40b",
          "--hw",
          "h100-sxm-8x",
          "--pp",
          "8",
          "--dp",
          std::to_string(dp),
          "--global-batch",
          std::to_string(16 * dp),
          "--schedule",
          "1f1b",
          "--replicas",
          "explicit",
          "--format",
          "json"};
}

void BM_ProcessHw(benchmark::State& state) {
  run(state, {"hw"});
}
BENCHMARK(BM_ProcessHw)->Unit(benchmark::kMillisecond);

void BM_ProcessPipelines1024Gpus(benchmark::State& state) {
  run(state, pipelines(128));
}
BENCHMARK(BM_ProcessPipelines1024Gpus)->Unit(benchmark::kMillisecond);

void BM_ProcessPipelines8192Gpus(benchmark::State& state) {
  run(state, pipelines(1024));
}
// One run per repetition, reported as mean, median and spread: on a VM the first run of a batch can pay
// several times the others for fresh memory, and a mean of a few runs hides how the rest went.
BENCHMARK(BM_ProcessPipelines8192Gpus)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(9)
    ->ReportAggregatesOnly(true);

void BM_ProcessTp8Pp16Dp64(benchmark::State& state) {
  run(state,
      {"simulate", "--model", "gpt-40b", "--hw",       "h100-sxm-8x",    "--pp",       "16",
       "--tp",     "8",       "--dp",    "64",         "--global-batch", "1024",       "--microbatch-size",
       "1",        "--seq",   "2048",    "--schedule", "1f1b",           "--replicas", "explicit",
       "--format", "json"});
}
BENCHMARK(BM_ProcessTp8Pp16Dp64)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->Repetitions(9)
    ->ReportAggregatesOnly(true);

void BM_ProcessPlanLlama3_70bOn1024(benchmark::State& state) {
  run(state, {"plan", "--model", "llama3-70b", "--hw", "h100-sxm-8x", "--gpus", "1024", "--global-batch",
              "1024", "--seq", "4096"});
}
BENCHMARK(BM_ProcessPlanLlama3_70bOn1024)->Unit(benchmark::kSecond)->Iterations(1);

void BM_ProcessPlanGpt3_175bOn8192(benchmark::State& state) {
  run(state, {"plan", "--model", "gpt3-175b", "--hw", "h100-sxm-8x", "--gpus", "8192", "--global-batch",
              "1536", "--seq", "2048"});
}
BENCHMARK(BM_ProcessPlanGpt3_175bOn8192)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
