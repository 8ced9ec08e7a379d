#!/usr/bin/env bash
# kiln compare --per-tensor on the FP32 .ms and .om that tests/real_models writes for each real model
# must exit 0: no false first divergence across layouts (.ms NHWC twins), fused nodes or batches.
# PP-OCR cls also as an NHWC .ms and a gear .om, whose inputs are checked at the door: exact K5002 lines
# (exit 1, no output folder) for data of the wrong shape, NCHW data for the NHWC .ms, a batch no gear has.
# The two 1024x1024 isnet models take minutes each
# (hundreds of large tensors captured in batches): they run with KILN_PER_TENSOR_ALL=1.
# Usage: per_tensor.sh BUILD_DIR REAL_MODELS_OUT. Exits 77 (skipped) without the models.
set -uo pipefail
build=$1
out=$2
kiln=$build/tools/kiln
[ -d "$out/models" ] || { echo "SKIP: $out/models is absent (ctest -R real_models installs the models)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

# compareAll NAME ONNX ARTIFACT INPUT_FILES...: --per-tensor with each input under its own name.
compareAll() {
  local label=$1 onnx=$2 artifact=$3
  shift 3
  local args=() file name
  for file in "$@"; do
    name=$("$kiln" tensor show "$file" | sed -n 's/^name: //p')
    args+=(--input "$name=$file")
  done
  if "$kiln" compare "$onnx" "$artifact" --per-tensor "${args[@]}" >"$work/out" 2>"$work/err"; then
    echo "PASS $label: $(tail -n 1 "$work/out")"
    passed=$((passed + 1))
  else
    echo "FAIL $label: exit $?"
    tail -n 3 "$work/out" "$work/err" | sed 's/^/  /'
    failed=$((failed + 1))
  fi
}

for onnx in "$out"/models/*.onnx; do
  model=$(basename "$onnx" .onnx)
  case $model in isnet_*) [ "${KILN_PER_TENSOR_ALL:-0}" = 1 ] || { echo "SKIP $model (KILN_PER_TENSOR_ALL=1 runs it)"; continue; } ;; esac
  inputs=("$out/$model"/input.*.pb)
  for artifact in "$out/$model/$model.ms" "$out/$model/${model}_310p3.om"; do
    [ -f "$artifact" ] || { echo "FAIL $model: $artifact is missing"; failed=$((failed + 1)); continue; }
    compareAll "$(basename "$artifact")" "$onnx" "$artifact" "${inputs[@]}"
  done
done

# PP-OCR cls: an NHWC .ms (fed the NCHW data transposed) and a gear .om (batch 1 and 2).
cls=$out/models/ppocr_cls.onnx
"$build/tools/converter_lite" --fmk=ONNX --modelFile="$cls" --outputFile="$work/cls_nhwc" \
  --inputShape=x:1,3,48,192 --inputDataFormat=NHWC >/dev/null 2>&1 || { echo "FAIL cls NHWC conversion"; failed=$((failed + 1)); }
"$build/tools/atc" --framework=5 --model="$cls" --output="$work/cls_gears" --soc_version=Ascend310P3 \
  --input_shape=x:-1,3,48,192 --dynamic_batch_size=1,2 >/dev/null 2>&1 || { echo "FAIL cls gear conversion"; failed=$((failed + 1)); }
compareAll "ppocr_cls NHWC .ms" "$cls" "$work/cls_nhwc.ms" "$out/ppocr_cls/input.x.pb"
compareAll "ppocr_cls gear .om" "$cls" "$work/cls_gears.om" "$out/ppocr_cls/input.x.pb"

# expectLine LABEL LINE COMMAND...: exit 1, stderr exactly LINE, no output folder left.
fix="Fix: feed data of the model's type and shape (kiln inspect MODEL lists them)"
expectLine() {
  local label=$1 line=$2
  shift 2
  rm -rf "$work/o"
  "$@" >"$work/out" 2>"$work/err"
  local status=$?
  if [ "$status" -eq 1 ] && [ "$(cat "$work/err")" = "$line" ] && [ ! -e "$work/o" ]; then
    echo "PASS $label"
    passed=$((passed + 1))
  else
    echo "FAIL $label: exit $status: $(cat "$work/err")"
    failed=$((failed + 1))
  fi
}
"$kiln" tensor make --random --shape 1,3,640,640 --name x -o "$work/big.pb" >/dev/null
"$kiln" tensor make --random --shape 3,3,48,192 --name x -o "$work/batch3.pb" >/dev/null
expectLine "ppocr_cls .om: a [1,3,640,640] input for a [1,3,48,192] model" \
  "kiln: error K5002: input 'x': the model takes f32[1,3,48,192], the data is f32[1,3,640,640]. $fix" \
  "$kiln" run "$out/ppocr_cls/ppocr_cls_310p3.om" --input x="$work/big.pb" --output-dir "$work/o"
expectLine "ppocr_cls: kiln compare checks the .om's input (the ONNX model is dynamic)" \
  "kiln: error K5002: input 'x': the model takes f32[1,3,48,192], the data is f32[1,3,640,640]. $fix" \
  "$kiln" compare "$cls" "$out/ppocr_cls/ppocr_cls_310p3.om" --input x="$work/big.pb"
expectLine "ppocr_cls NHWC .ms: NCHW data names the transpose" \
  "kiln: error K5002: input 'x': the model takes f32[1,48,192,3], the data is f32[1,3,48,192]; the data looks NCHW and the model takes NHWC: transpose it (0,2,3,1). $fix" \
  "$kiln" run "$work/cls_nhwc.ms" --input x="$out/ppocr_cls/input.x.pb" --output-dir "$work/o"
expectLine "ppocr_cls gear .om: a batch no gear has" \
  "kiln: error K5002: input shape x:3,3,48,192 matches none of the model's 2 gears: x:1,3,48,192 | x:2,3,48,192. Fix: feed inputs of one gear's shape, or convert the model again with this shape among the gears (atc --dynamic_batch_size / --dynamic_image_size / --dynamic_dims)" \
  "$kiln" run "$work/cls_gears.om" --input x="$work/batch3.pb" --output-dir "$work/o"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
