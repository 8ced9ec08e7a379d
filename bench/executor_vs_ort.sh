#!/usr/bin/env bash
# Builds nothing: runs bench/executor_vs_ort.mjs with the models installed by tests/real_models/run.sh
# (or those in NODE_MODULES, when set).
# Usage: bench/executor_vs_ort.sh [BUILD_DIR] [REPEAT] [MODEL...]   (THREADS, ROUNDS, ARTIFACTS: see the .mjs;
# CPUS: below)
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
# The vCPUs of a cloud machine differ by up to ~30%: unpinned, ONNX Runtime and kiln may land on
# different ones from round to round. CPUS (default: the first THREADS of `nproc`) pins node, ONNX
# Runtime's threads and every kiln run it starts to the same CPUs; CPUS=all leaves them unpinned.
threads=${THREADS:-1}
cpus=${CPUS:-0-$((threads - 1))}
pin=()
if [ "$cpus" != all ] && command -v taskset >/dev/null; then pin=(taskset -c "$cpus"); fi
echo "bench: THREADS=$threads, pinned to CPUs ${cpus} ($(nproc) online)" >&2
"${pin[@]}" node "$here/executor_vs_ort.mjs" "$(realpath "$build/tools/kiln")" "$modules" "$work/bench" "${2:-10}" "${@:3}"
