#!/usr/bin/env bash
# Fuzzes pipesim's loaders with libFuzzer (build first: ./scripts/fuzz.sh --build-only).
#
#   scripts/fuzz.sh [--build DIR] [--target NAME|all] [--runs N | --seconds S] [--build-only] [-- FLAGS]
#
# FLAGS after `--` go to libFuzzer as they are (e.g. `-- -entropic=0`: the classic input scheduler, several
# times more executions per second on targets with many coverage features, such as plan).
# Each target starts from its seed corpus: the shipped files of its kind (models/ and the HuggingFace
# fixtures, hw_profiles/, frameworks/, the workload fixture) plus tests/fuzz/corpus/<target>/, which holds small plans,
# timelines, command lines (one argument per line) and every crasher found so far. Crashers (and slow or leaking inputs) are saved under
# out/fuzz/<target>/; copy each into tests/fuzz/corpus/<target>/ once its cause is fixed. Exit status: 0 when
# no target found anything.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=build-fuzz targets=all runs="" seconds="" build_only=0 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --target) targets=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "fuzz.sh: unknown argument '$1' (see the header of scripts/fuzz.sh)" >&2; exit 2 ;;
  esac
done
[ "$targets" = all ] && targets="model hw_profile workload framework plan timeline saved_result cli_args trace_import execution_trace nccl_tests_output"
if [ ! -x "$build/tests/fuzz/fuzz_model" ] || [ "$build_only" = 1 ]; then
  command -v clang++ > /dev/null || { echo "fuzz.sh: clang++ is missing (scripts/install-deps.sh installs it)" >&2; exit 2; }
  CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DPIPESIM_FUZZ=ON -DPIPESIM_SANITIZE=ON \
    -DPIPESIM_WERROR=ON -DPIPESIM_CUDA=OFF > /dev/null
  cmake --build "$build" -j2
  [ "$build_only" = 1 ] && exit 0
fi
[ -z "$runs" ] && [ -z "$seconds" ] && seconds=60
limit=()
[ -n "$runs" ] && limit+=("-runs=$runs")
[ -n "$seconds" ] && limit+=("-max_total_time=$seconds")

seeds() {
  case "$1" in
    model) echo models tests/fixtures/hf tests/fixtures/tiny_model.json ;;
    hw_profile) echo hw_profiles ;;
    framework) echo frameworks ;;
    workload) echo tests/fixtures/uniform_workload.json ;;
    plan) echo "" ;;
    timeline | saved_result | cli_args | trace_import | execution_trace | nccl_tests_output) echo "" ;;
  esac
}

status=0
for t in $targets; do
  exe="$build/tests/fuzz/fuzz_$t"
  [ -x "$exe" ] || { echo "fuzz.sh: no target '$t' in $build" >&2; exit 2; }
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  for s in $(seeds "$t"); do
    if [ -d "$s" ]; then find "$s" -maxdepth 1 -name '*.json' -exec cp {} "$work/" \; ; elif [ -f "$s" ]; then cp "$s" "$work/"; fi
  done
  if [ -d "tests/fuzz/corpus/$t" ]; then find "tests/fuzz/corpus/$t" -maxdepth 1 -type f -exec cp {} "$work/" \; ; fi
  mkdir -p "out/fuzz/$t"
  # A dictionary of the input's tokens helps the mutator; leaks and slow inputs count as findings.
  dict="$root/tests/fuzz/json.dict"
  [ -f "$root/tests/fuzz/$t.dict" ] && dict="$root/tests/fuzz/$t.dict"
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      "$exe" "${limit[@]}" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -dict="$dict" \
      -artifact_prefix="out/fuzz/$t/" -print_final_stats=1 ${extra[@]+"${extra[@]}"} "$work" > "out/fuzz/$t/log.txt" 2>&1; then
    echo "fuzz_$t: $(grep -E 'stat::number_of_executed_units' "out/fuzz/$t/log.txt" | awk '{print $2}') executions, no finding"
  else
    echo "fuzz_$t: FINDING (see out/fuzz/$t/log.txt and the crash-* file there)"
    tail -40 "out/fuzz/$t/log.txt"
    status=1
  fi
  rm -rf "$work"
done
exit $status
