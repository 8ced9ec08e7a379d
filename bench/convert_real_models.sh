#!/usr/bin/env bash
# Conversion time and peak RSS on all 11 real models (tests/real_models/models.mjs): kiln's
# converter_lite (FP32, --fp16=on, 8-bit weight quant) against the peer, ONNX Runtime optimize + save
# (bench/ort_optimize.mjs), interleaved model by model in the same run (the machine is shared: read
# the ratios, not the absolute times). Each row is one run measured by convert_memory_check measure
# (the child's own wait4(): wall s, user+sys CPU s, ru_maxrss). The summary gives, per model, the
# median CPU of each kiln step over the peer's median CPU.
#
# Usage: bench/convert_real_models.sh [BUILD_DIR] [NAME...]   (default: all 11)
# Env: NODE_MODULES (default /work/scratch/rm/node_modules), WORK (default /tmp/kiln-convert-real),
#      REPEAT (default 3).
set -euo pipefail
build=$(realpath -m "${1:-build}")
shift || true
here=$(cd "$(dirname "$0")" && pwd)
nm=${NODE_MODULES:-/work/scratch/rm/node_modules}
work=${WORK:-/tmp/kiln-convert-real}
repeat=${REPEAT:-3}
check="$build/tests/memory/convert_memory_check"
conv="$build/tools/converter_lite"
for tool in "$check" "$conv"; do
  [ -x "$tool" ] || { echo "missing $tool: build first" >&2; exit 1; }
done
mkdir -p "$work/models"
printf '[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=8\n' > "$work/wq8.cfg"
# Plain copies of the models (bundles reassembled) and each one's fixed input shapes.
node --input-type=module -e "
import fs from 'node:fs';
import path from 'node:path';
import { models, modelPath } from '$here/../tests/real_models/models.mjs';
const only = process.argv.slice(1);
for (const m of models) {
  if (only.length && !only.includes(m.name)) continue;
  const out = path.join('$work', 'models', m.name + '.onnx');
  const src = modelPath('$nm', m, '$work');
  if (src !== out) fs.copyFileSync(src, out);
  const shape = m.inputs.filter((i) => i.shape.length).map((i) => i.name + ':' + i.shape.join(',')).join(';');
  console.log(m.name + ' ' + shape);
}" "$@" > "$work/models.txt"
echo "kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?'), $repeat rounds"
echo "| model | MB | step | peak RSS MiB | RSS / model | wall s | CPU s |"
echo "|---|---|---|---|---|---|---|"
: > "$work/rows.txt"
row() {
  local name=$1 step=$2 bytes=$3
  shift 3
  local line
  line=$("$check" measure "$bytes" -- "$@" 2>/dev/null | tail -n 1 || true)
  echo "$line" | awk -v n="$name" -v s="$step" -v b="$bytes" '{
    for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] }
    bad = ($0 ~ /FAILED/) ? " (FAILED)" : ""
    printf "| %s | %.1f | %s%s | %s | %s | %s | %s |\n", n, b / 1e6, s, bad, v["peak_rss_mib"], v["ratio"], v["wall_s"], v["cpu_s"] }' |
    tee -a "$work/rows.txt"
}
while read -r name shape; do
  model="$work/models/$name.onnx"
  bytes=$(stat -c %s "$model")
  out="$work/out-$name"
  for _ in $(seq "$repeat"); do
    row "$name" "peer: ONNX Runtime optimize + save" "$bytes" "$(command -v node)" "$here/ort_optimize.mjs" "$nm" "$model" "$out.ort.onnx"
    row "$name" "converter_lite FP32" "$bytes" "$conv" --fmk=ONNX "--modelFile=$model" "--outputFile=$out" "--inputShape=$shape"
    row "$name" "converter_lite --fp16=on" "$bytes" "$conv" --fmk=ONNX "--modelFile=$model" "--outputFile=$out" "--inputShape=$shape" --fp16=on
    row "$name" "converter_lite 8-bit weight quant" "$bytes" "$conv" --fmk=ONNX "--modelFile=$model" "--outputFile=$out" "--inputShape=$shape" "--configFile=$work/wq8.cfg"
  done
  rm -f "$out".*
done < "$work/models.txt"
echo
echo "Median CPU s per model and step; ratio = kiln / peer (below 1: kiln is faster)."
echo "| model | peer CPU s | FP32 CPU s (ratio) | fp16 CPU s (ratio) | 8-bit CPU s (ratio) |"
echo "|---|---|---|---|---|"
awk -F'|' '{
  gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $4); gsub(/^ +| +$/, "", $8)
  key = $2 SUBSEP $4; n[key]++; v[key, n[key]] = $8 + 0
  if (!($2 in seen)) { seen[$2] = 1; order[++m] = $2 }
} END {
  split("peer: ONNX Runtime optimize + save|converter_lite FP32|converter_lite --fp16=on|converter_lite 8-bit weight quant", steps, "|")
  for (i = 1; i <= m; ++i) {
    line = "| " order[i]
    for (s = 1; s <= 4; ++s) {
      key = order[i] SUBSEP steps[s]; c = n[key]
      for (a = 1; a <= c; ++a) for (b = a + 1; b <= c; ++b) if (v[key, b] < v[key, a]) { t = v[key, a]; v[key, a] = v[key, b]; v[key, b] = t }
      med[s] = c ? v[key, int((c + 1) / 2)] : 0
      if (s == 1) line = line sprintf(" | %.2f", med[1])
      else line = line sprintf(" | %.2f (%.2f)", med[s], med[1] > 0 ? med[s] / med[1] : 0)
    }
    print line " |"
  }
}' "$work/rows.txt"
