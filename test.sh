#!/usr/bin/env bash
# Installs what is missing, checks that no folder includes a higher layer, that no file or function grew
# past its size limit (scripts/check-sizes.py) and that every timed GPU buffer holds random operands
# (scripts/check-timed-buffers.py), builds everything with
# AddressSanitizer + UndefinedBehaviorSanitizer and warnings as errors, and runs every test through ctest (unit, CLI, notebook and validation tests); then the Release
# CLI under a low memory limit (AddressSanitizer cannot start under one) and importing a 1 GB trace under one,
# the whole CPU calibration's time,
# and a short run of every libFuzzer
# target over its seed corpus.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/install-deps.sh
python3 scripts/check-layers.py
python3 scripts/check-sizes.py
python3 scripts/check-timed-buffers.py
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Debug -DPIPESIM_SANITIZE=ON -DPIPESIM_WERROR=ON \
  -DPIPESIM_BUILD_TESTS=ON -DPIPESIM_BUILD_BENCH=ON > /dev/null
cmake --build build-test -j2
ctest --test-dir build-test --output-on-failure -j2 "$@"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPIPESIM_WERROR=ON > /dev/null
cmake --build build -j2 --target pipesim
python3 tests/cli/test_memory_limit.py build/cli/pipesim 256
python3 tests/cli/test_memory_limit.py build/cli/pipesim 64
python3 tests/cli/test_calibration_time.py build/cli/pipesim
python3 tests/cli/test_trace_memory.py build/cli/pipesim 1

./scripts/fuzz.sh --build-only
ctest --test-dir build-fuzz --output-on-failure
