#!/usr/bin/env bash
# kiln conformance on real-model folders (model.onnx + test_data_set_0, as the ONNX model zoo lays
# them out): inputs made by `kiln tensor make`, expected outputs by `kiln run` of the ONNX model.
# Outside the ONNX backend test suites the outputs are compared at their scale (atol 1e-4, fp16
# 1e-2, of the largest expected value), so float rounding in another summation order passes via ms
# and om while an expected output scaled by 1.01 (fp16: 1.05) fails naming that tolerance.
# Usage: tests/cli/conformance_real.sh KILN SOURCE_DIR [WORKDIR [REAL_MODELS_DIR]]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 2 "KILN SOURCE_DIR [WORKDIR [REAL_MODELS_DIR]]" "$@"
kiln=$1
src=$2
makeWork kiln-conformance-real "${3:-}"
realModels=${4:-}
cd "$work" || exit 2

# expectRun NAME EXIT COMMAND...: the exit status, and stdout's lines exactly as the LINES variable.
expectRun() {
  local name=$1 code=$2
  shift 2
  run "$@"
  if [ "$status" -eq "$code" ] && [ "$(cat "$work/stdout")" = "$lines" ]; then pass "$name"
  else fail "$name" "exit $status (expected $code); expected stdout: $lines"; fi
}

# makeCase FOLDER MODEL INPUT_NAME SHAPE: FOLDER/model.onnx and FOLDER/test_data_set_0 with one
# random input (seed 3) and the outputs `kiln run` gives; FOLDER-1.01 and FOLDER-1.05 hold the
# same case with every expected output scaled by that factor (a Mul model run by kiln).
makeCase() {
  local folder=$1 model=$2 input=$3 shape=$4 factor out k
  mkdir -p "$folder/test_data_set_0"
  case "$model" in
  *.onnxtxt) "$kiln" convert "$model" --to onnx -o "$folder/model.onnx" >/dev/null ;;
  *) cp "$model" "$folder/model.onnx" ;;
  esac
  "$kiln" tensor make --random --seed 3 --shape "$shape" --name "$input" \
    -o "$folder/test_data_set_0/input_0.pb" >/dev/null
  rm -rf run_out && mkdir run_out
  "$kiln" run "$folder/model.onnx" --input "$input=$folder/test_data_set_0/input_0.pb" \
    --output-dir run_out >/dev/null
  out=$(ls run_out/*.pb)
  cp "$out" "$folder/test_data_set_0/output_0.pb"
  for factor in 1.01 1.05; do
    mkdir -p "$folder-$factor/test_data_set_0"
    cp "$folder/model.onnx" "$folder-$factor/"
    cp "$folder/test_data_set_0/input_0.pb" "$folder-$factor/test_data_set_0/"
    k=$("$kiln" tensor show "$out" | sed -n 's/^shape: \[\(.*\)\]$/\1/p')
    printf '<ir_version: 8, opset_import: ["" : 13]>\nscale (float[%s] x) => (float[%s] y)\n<float[1] factor = {%s}> {\n  y = Mul (x, factor)\n}\n' \
      "$k" "$k" "$factor" >scale.onnxtxt
    rm -rf scaled && mkdir scaled
    "$kiln" run scale.onnxtxt --input "x=$out" --output-dir scaled >/dev/null
    cp scaled/y.pb "$folder-$factor/test_data_set_0/output_0.pb"
  done
}

makeCase real/conv_bn_head "$src/tests/cli/models/conv_bn_head.onnxtxt" image 1,3,96,96
for via in ms om; do
  lines="1 passed, 0 failed, 0 skipped"
  expectRun "conv_bn_head via $via: passes at the real-model tolerance" 0 \
    "$kiln" conformance -q --via "$via" --pipeline default real/conv_bn_head
  expectRun "conv_bn_head via $via --precision fp16: passes at the fp16 real-model tolerance" 0 \
    "$kiln" conformance -q --via "$via" --pipeline default --precision fp16 real/conv_bn_head
  # The node tests' tolerance (atol 1e-7) is what such a folder met before: values near 0 miss it.
  run "$kiln" conformance -q --via "$via" --pipeline default --atol 1e-7 real/conv_bn_head
  if [ "$status" -eq 1 ] && grep -qx "0 passed, 1 failed, 0 skipped" stdout &&
    grep -qE "^FAIL real/conv_bn_head: test_data_set_0 output 'logits': element [0-9]+: .*; real-model tolerance with --atol: atol 1e-07 \+ rtol 0.001 × \|expected\|\)$" stdout; then
    pass "conv_bn_head via $via: --atol 1e-7 (the node tests' atol) fails near zero"
  else fail "conv_bn_head via $via: --atol 1e-7 (the node tests' atol) fails near zero" "unexpected result"; fi
  lines="FAIL real/conv_bn_head-1.01: test_data_set_0 output 'logits': element 0: -2.8062479496002197 expected, got -2.7784628868103027 (abs err 0.0278; real-model tolerance: atol 0.00102 (0.0001 × max|expected| 10.18) + rtol 0.001 × |expected|)
0 passed, 1 failed, 0 skipped"
  expectRun "conv_bn_head via $via: expected outputs scaled by 1.01 fail, naming the tolerance" 1 \
    "$kiln" conformance -q --via "$via" --pipeline default real/conv_bn_head-1.01
  run "$kiln" conformance -q --via "$via" --pipeline default --precision fp16 real/conv_bn_head-1.05
  if [ "$status" -eq 1 ] && grep -qx "0 passed, 1 failed, 0 skipped" stdout &&
    grep -qE "^FAIL real/conv_bn_head-1.05: test_data_set_0 output 'logits': element 0: .*; fp16 real-model tolerance: atol 0.106 \(0.01 × max\|expected\| 10.59\) \+ rtol 0.01 × \|expected\|\)$" stdout; then
    pass "conv_bn_head via $via --precision fp16: scaled by 1.05 fails, naming the fp16 tolerance"
  else fail "conv_bn_head via $via --precision fp16: scaled by 1.05 fails, naming the fp16 tolerance" "unexpected result"; fi
done

# PP-OCR's direction classifier, when tests/real_models has installed it (dynamic input: the data's
# shape fixes it).
cls="${realModels:-/nonexistent}/ppocr_cls.onnx"
if [ -f "$cls" ]; then
  makeCase real/ppocr_cls "$cls" x 1,3,48,192
  for via in ms om; do
    for precision in fp32 fp16; do
      lines="1 passed, 0 failed, 0 skipped"
      expectRun "ppocr_cls via $via --precision $precision: passes" 0 \
        "$kiln" conformance -q --via "$via" --pipeline default --precision "$precision" \
        --input-shape-from-data real/ppocr_cls
    done
    run "$kiln" conformance -q --via "$via" --pipeline default --input-shape-from-data real/ppocr_cls-1.01
    if [ "$status" -eq 1 ] && grep -qx "0 passed, 1 failed, 0 skipped" stdout &&
      grep -qE "^FAIL real/ppocr_cls-1.01: test_data_set_0 output 'softmax_0.tmp_0': element 0: .*; real-model tolerance: atol [0-9.e-]+ \(0.0001 × max\|expected\| [0-9.]+\) \+ rtol 0.001 × \|expected\|\)$" stdout; then
      pass "ppocr_cls via $via: expected outputs scaled by 1.01 fail, naming the tolerance"
    else fail "ppocr_cls via $via: expected outputs scaled by 1.01 fail, naming the tolerance" "unexpected result"; fi
  done
else
  echo "SKIP: $cls is absent (the real_models test installs it): 6 checks not run"
fi

finish
