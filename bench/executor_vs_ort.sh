#!/usr/bin/env bash
# Builds nothing: runs bench/executor_vs_ort.mjs with the models installed by tests/real_models/run.sh
# (or those in NODE_MODULES, when set).
# Usage: bench/executor_vs_ort.sh [BUILD_DIR] [REPEAT] [MODEL...]   (THREADS, ROUNDS, ARTIFACTS: see the .mjs)
# e.g. ARTIFACTS=ms,om,om_fp32 bench/executor_vs_ort.sh build 5 ppocr_cls  also times the .ms / .om files
# that BUILD_DIR's converter_lite and atc make, with their ratios to the .onnx run and to ONNX Runtime.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
work="$(realpath -m "$build")/real_models"
modules=${NODE_MODULES:-$work/npm/node_modules}
if [ ! -d "$modules" ]; then
  mkdir -p "$work/npm" && cp "$here/../tests/real_models/package."*json "$work/npm/"
  (cd "$work/npm" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
node "$here/executor_vs_ort.mjs" "$(realpath "$build/tools/kiln")" "$modules" "$work/bench" "${2:-10}" "${@:3}"
