#!/usr/bin/env bash
# Installs what is missing, builds everything with AddressSanitizer + UndefinedBehaviorSanitizer and warnings
# as errors, and runs every test through ctest (unit, CLI and notebook tests).
set -euo pipefail
cd "$(dirname "$0")"
./scripts/install-deps.sh
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=Debug -DPIPESIM_SANITIZE=ON -DPIPESIM_WERROR=ON \
  -DPIPESIM_BUILD_TESTS=ON -DPIPESIM_BUILD_BENCH=ON > /dev/null
cmake --build build-test -j2
ctest --test-dir build-test --output-on-failure -j2 "$@"
