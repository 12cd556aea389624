#!/usr/bin/env bash
# Installs what is missing, builds pipesim (Release) and runs the main job on the embedded defaults:
# every applicable schedule for llama3-8b on rtx4090-8x (pp=8), a table, and Chrome traces under out/.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPIPESIM_BUILD_TESTS=OFF -DPIPESIM_BUILD_BENCH=OFF > /dev/null
cmake --build build -j2 --target pipesim pipesim_python
./build/cli/pipesim simulate "$@"
