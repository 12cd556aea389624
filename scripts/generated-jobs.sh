#!/usr/bin/env bash
# The long run of the differential tests over generated jobs (docs/invariants.md): JOBS seeded jobs (default
# 10,000) from SEED (default 1) in process on a Release build, then a tenth as many (at most 300) through the
# command line and the Python module. A failure prints the seed and the command that reproduces it.
#   ./scripts/generated-jobs.sh [JOBS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-10000}
seed=${2:-1}
./scripts/install-deps.sh
cmake -S . -B build-property -DCMAKE_BUILD_TYPE=Release -DPIPESIM_BUILD_TESTS=ON -DPIPESIM_BUILD_BENCH=OFF > /dev/null
cmake --build build-property -j2 --target pipesim_generated_jobs pipesim pipesim_python
time build-property/tests/pipesim_generated_jobs --jobs "$jobs" --seed "$seed"
cli_jobs=$((jobs / 10 < 300 ? jobs / 10 : 300))
PYTHONPATH=build-property/python PIPESIM_BIN=build-property/cli/pipesim \
  python3 tests/property/cli_and_module.py --jobs "$cli_jobs" --seed "$seed"
