#!/usr/bin/env bash
# Builds nothing: runs bench/executor_vs_ort.mjs with the models installed by tests/real_models/run.sh.
# Usage: bench/executor_vs_ort.sh [BUILD_DIR] [REPEAT]
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
work="$(realpath -m "$build")/real_models"
if [ ! -d "$work/npm/node_modules" ]; then
  mkdir -p "$work/npm" && cp "$here/../tests/real_models/package."*json "$work/npm/"
  (cd "$work/npm" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
node "$here/executor_vs_ort.mjs" "$(realpath "$build/tools/kiln")" "$work/npm/node_modules" "$work/bench" "${2:-10}"
