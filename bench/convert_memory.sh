#!/usr/bin/env bash
# Peak RSS and time of conversion against model size (issue 16): synthetic external-data models
# (a chain of f32[K,K] MatMuls, streamed to disk by tests/memory/convert_memory_check), converted by
# converter_lite (FP32, --fp16=on, 8-bit weight quant) and atc (default precision); then the real
# isnet_fp16 model against ONNX Runtime optimize + save (bench/ort_optimize.mjs) in the same run,
# interleaved. Peak RSS is the child's own wait4() ru_maxrss; ratio = peak RSS / model bytes.
#
# Usage: bench/convert_memory.sh [BUILD_DIR] [SIZE_MIB...]   (default sizes: 200 1600 6144; - for none)
# A size is skipped when the work folder's disk cannot hold the model and its largest output.
# Env: WORK (default /tmp/kiln-convert-memory), NODE_MODULES (onnxruntime-node and the real models,
# default /work/scratch/rm/node_modules), ISNET (default /work/scratch/npm/m/medium.onnx), REPEAT (3).
set -euo pipefail
build=$(realpath -m "${1:-build}")
shift || true
sizes=("$@")
if [ ${#sizes[@]} -eq 0 ]; then sizes=(200 1600 6144); fi
here=$(cd "$(dirname "$0")" && pwd)
check="$build/tests/memory/convert_memory_check"
conv="$build/tools/converter_lite"
atc="$build/tools/atc"
for tool in "$check" "$conv" "$atc"; do
  [ -x "$tool" ] || { echo "missing $tool: build first" >&2; exit 1; }
done
work=${WORK:-/tmp/kiln-convert-memory}
nm=${NODE_MODULES:-/work/scratch/rm/node_modules}
isnet=${ISNET:-/work/scratch/npm/m/medium.onnx}
repeat=${REPEAT:-3}
mkdir -p "$work"
printf '[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=8\n' > "$work/wq8.cfg"
echo "kernel $(uname -r), $(nproc) CPUs, $(free -g | awk '/Mem:/ {print $2}') GiB, commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "| model | step | peak RSS MiB | RSS / model | wall s | CPU s |"
echo "|---|---|---|---|---|---|"
# row LABEL STEP MODEL_BYTES CMD... : one measured run as a table row
row() {
  local label=$1 step=$2 bytes=$3
  shift 3
  local line
  line=$("$check" measure "$bytes" -- "$@" || true)
  echo "$line" | awk -v l="$label" -v s="$step" '{
    for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] }
    bad = ($0 ~ /FAILED/) ? " (FAILED)" : ""
    printf "| %s | %s%s | %s | %s | %s | %s |\n", l, s, bad, v["peak_rss_mib"], v["ratio"], v["wall_s"], v["cpu_s"] }'
}
for size in "${sizes[@]}"; do
  [ "$size" = "-" ] && continue # "-": the real model only
  avail_mib=$(df -Pm "$work" | awk 'NR == 2 {print $4}')
  if [ "$avail_mib" -lt $((size * 2 + 1024)) ]; then
    echo "| ${size} MiB | skipped: ${avail_mib} MiB free in $work, needs $((size * 2 + 1024)) | | | | |"
    continue
  fi
  dir="$work/synthetic-$size"
  "$check" generate "$dir" --size-mb "$size"
  bytes=$(( $(stat -c %s "$dir/model.onnx") + $(stat -c %s "$dir/model.onnx.data") ))
  label="synthetic $((bytes >> 20)) MiB"
  out="$work/out-$size"
  row "$label" "converter_lite FP32" "$bytes" "$conv" --fmk=ONNX "--modelFile=$dir/model.onnx" "--outputFile=$out"
  rm -f "$out".ms*
  row "$label" "converter_lite --fp16=on" "$bytes" "$conv" --fmk=ONNX "--modelFile=$dir/model.onnx" "--outputFile=$out" --fp16=on
  rm -f "$out".ms*
  row "$label" "converter_lite 8-bit weight quant" "$bytes" "$conv" --fmk=ONNX "--modelFile=$dir/model.onnx" "--outputFile=$out" "--configFile=$work/wq8.cfg"
  rm -f "$out".ms*
  row "$label" "atc (default precision: fp16 weights)" "$bytes" "$atc" --framework=5 "--model=$dir/model.onnx" "--output=$out" --soc_version=Ascend310P3
  rm -f "$out".om
  rm -rf "$dir"
done
# The real model against the peer, interleaved, REPEAT rounds (each row is one run).
if [ -f "$isnet" ] && [ -d "$nm/onnxruntime-node" ]; then
  model="$work/isnet_fp16.onnx"
  cp "$isnet" "$model"
  bytes=$(stat -c %s "$model")
  for round in $(seq "$repeat"); do
    row "isnet_fp16 #$round" "peer: ONNX Runtime optimize + save" "$bytes" "$(command -v node)" "$here/ort_optimize.mjs" "$nm" "$model" "$work/isnet.ort.onnx"
    row "isnet_fp16 #$round" "converter_lite FP32" "$bytes" "$conv" --fmk=ONNX "--modelFile=$model" "--outputFile=$work/isnet"
    row "isnet_fp16 #$round" "converter_lite --fp16=on" "$bytes" "$conv" --fmk=ONNX "--modelFile=$model" "--outputFile=$work/isnet" --fp16=on
    row "isnet_fp16 #$round" "converter_lite 8-bit weight quant" "$bytes" "$conv" --fmk=ONNX "--modelFile=$model" "--outputFile=$work/isnet" "--configFile=$work/wq8.cfg"
    row "isnet_fp16 #$round" "atc" "$bytes" "$atc" --framework=5 "--model=$model" "--output=$work/isnet" --soc_version=Ascend310P3
  done
  rm -f "$work"/isnet*
fi
