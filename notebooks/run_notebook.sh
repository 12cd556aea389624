#!/usr/bin/env bash
# Executes a notebook headless with Debian's Jupyter (kernel: /usr/bin/python3); fails when any cell fails.
# Usage: run_notebook.sh NOTEBOOK PIPESIM_BINARY
set -euo pipefail
nb="$1"
export PIPESIM_BIN="$2"
export PYDEVD_DISABLE_FILE_VALIDATION=1
export PIPESIM_SOURCE_DIR="$(cd "$(dirname "$0")/.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cd "$(dirname "$nb")"
/usr/bin/python3 -m nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
  --ExecutePreprocessor.kernel_name=python3 --output-dir "$out" "$(basename "$nb")"
