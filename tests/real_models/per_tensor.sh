#!/usr/bin/env bash
# kiln compare --per-tensor on the FP32 .ms and .om that tests/real_models writes for each real model
# must exit 0: no false first divergence across layouts (.ms NHWC twins), fused nodes or batches.
# PP-OCR cls also as an NHWC .ms and a gear .om. The two 1024x1024 isnet models take minutes each
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
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
