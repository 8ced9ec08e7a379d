#!/usr/bin/env bash
# ATC / converter_lite parity (issue 29): AIPP on an opset-9 model, kiln compare of an AIPP .om on
# a uint8 image, each tool's rule for a missing output folder, atc --version / --help without
# conversion framing, kiln inspect of a gear .om (gear table, real inputs once).
# Usage: tests/cli/parity.sh KILN ATC CONVERTER_LITE SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 4 "KILN ATC CONVERTER_LITE SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
atc=$2
lite=$3
src=$4
makeWork kiln-parity "${5:-}"
cd "$work" || exit 2
here=$(pwd -P)
models=$src/tests/cli/models

"$kiln" convert "$src/samples/tiny_cnn.onnxtxt" --to onnx -o tiny.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert tiny_cnn"; exit 1; }

# linesAre NAME FILE EXPECTED: FILE (in $work) holds exactly EXPECTED, all lines.
linesAre() {
  if [ "$(cat "$work/$2")" = "$3" ]; then pass "$1"; else
    fail "$1" "$2 is not exactly (status $status):
$3"
  fi
}
# stampless FILE: ATC's error block with its "[PID: n] <time> " prefix written as "[PID] ".
stampless() {
  sed -E 's/^\[PID: [0-9]+\] [0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9:]{8}\.[0-9]{3}\.[0-9]{3} /[PID] /' "$1"
}
deviceNote="kiln: note: the .om files kiln writes are not device-runnable: they hold the graph and weights as ATC lays them out but no device kernels, task lists or memory plan; run them in kiln's executor (kiln run X.om) or build the device model with CANN's atc"

# --- AIPP on an opset-9 model: up-converted to opset 11, not refused ---
"$kiln" convert "$models/opset9_image.onnxtxt" --to onnx -o opset9.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert opset9_image"; exit 1; }
cat >camera.cfg <<'CFG'
# A uint8 RGB camera frame, normalized per channel: (pixel - mean) * var_reci.
aipp_op {
  aipp_mode: static
  input_format: RGB888_U8
  src_image_size_w: 8
  src_image_size_h: 8
  mean_chn_0: 124
  mean_chn_1: 116
  mean_chn_2: 104
  var_reci_chn_0: 0.0171
  var_reci_chn_1: 0.0175
  var_reci_chn_2: 0.0174
}
CFG
aippArgs=(--framework=5 --model=opset9.onnx --soc_version=Ascend310P3 --insert_op_conf=camera.cfg)
run "$atc" "${aippArgs[@]}" --output=out/opset9_aipp --precision_mode=force_fp32
if [ "$status" -eq 0 ] && [ "$(cat stdout)" = "ATC start working now, please wait for a moment.
...
ATC run success, welcome to the next use.
$deviceNote" ] && [ -z "$(cat stderr)" ]; then
  pass "atc --insert_op_conf on an opset-9 model converts"
else fail "atc --insert_op_conf on an opset-9 model converts" "exit $status"; fi
run "$kiln" inspect out/opset9_aipp.om
if [ "$status" -eq 0 ] && [ "$(sed -n '4,$p' stdout)" = "  graph 'opset9_aipp': 26 ops (Cast 1, ClipByValue 1, Const 13, Conv2D 1, Data 1, Mul 1, NetOutput 1, PadV3 1, StridedSliceV2 1, Sub 2, TransData 2, Transpose 1)
    input  x DT_UINT8 [1,8,8,3]
    output y DT_FLOAT [1,4,8,8]
  aipp (camera.cfg): x is a uint8 NHWC image; the model's NCHW input was [1,3,8,8]" ]; then
  pass "the opset-9 AIPP .om takes a uint8 NHWC image"
else fail "the opset-9 AIPP .om takes a uint8 NHWC image" "exit $status"; fi
# The default fp16 conversion too (the precision guard may warn about this tiny model; the .om
# is what is judged).
run "$atc" "${aippArgs[@]}" --output=out/opset9_aipp_fp16
if [ "$status" -eq 0 ]; then pass "atc AIPP on opset 9, default precision"; else
  fail "atc AIPP on opset 9, default precision" "exit $status"; fi
readsBack "opset-9 AIPP .om files read back" "$kiln" out/opset9_aipp.om out/opset9_aipp_fp16.om
judgedByGe "opset-9 AIPP .om files pass the om judge" "$src" out/opset9_aipp.om out/opset9_aipp_fp16.om

# --- kiln compare ONNX X_aipp.om: the .om gets the uint8 NHWC image, the ONNX model the float
# NCHW tensor AIPP makes of it (the recorded configuration run in float32) ---
"$kiln" tensor make --random --dtype uint8 --shape 1,8,8,3 --seed 7 --name x -o image.pb >/dev/null ||
  { echo "FAIL setup: kiln tensor make image.pb"; exit 1; }
aippLine="kiln: out/opset9_aipp.om has AIPP (camera.cfg): the reference takes the same uint8 NHWC image and runs the AIPP preprocessing in float32 before the model's NCHW input (x:1,3,8,8)"
run "$kiln" compare opset9.onnx out/opset9_aipp.om --input x=image.pb
if [ "$status" -eq 0 ] && [ "$(cat stderr)" = "$aippLine" ] && [ "$(cat stdout)" = "output                                 cosine   mean_rel_err    max_abs_err    sqnr_db
y                                  1.00000000      0.000e+00      0.000e+00        inf" ]; then
  pass "kiln compare ONNX AIPP.om --input x=uint8 image: identical in fp32"
else fail "kiln compare ONNX AIPP.om --input x=uint8 image: identical in fp32" "exit $status"; fi
run "$kiln" compare opset9.onnx out/opset9_aipp.om
if [ "$status" -eq 0 ] && [ "$(cat stderr)" = "$aippLine" ] &&
  [ "$(sed -n 2p stdout)" = "y                                  1.00000000      0.000e+00      0.000e+00        inf" ]; then
  pass "kiln compare ONNX AIPP.om without --input: a generated uint8 image"
else fail "kiln compare ONNX AIPP.om without --input: a generated uint8 image" "exit $status"; fi
run "$kiln" compare opset9.onnx out/opset9_aipp_fp16.om --input x=image.pb
if [ "$status" -eq 0 ] && [ "$(cat stderr)" = "${aippLine//opset9_aipp.om/opset9_aipp_fp16.om}" ] &&
  awk 'NR == 2 && $1 == "y" && $2 >= 0.9999 && $2 < 1 { found = 1 } END { exit !found }' stdout; then
  pass "kiln compare ONNX AIPP fp16 .om: cosine >= 0.9999 (fp16 differences measured)"
else fail "kiln compare ONNX AIPP fp16 .om: cosine >= 0.9999 (fp16 differences measured)" "exit $status"; fi
run "$kiln" compare opset9.onnx out/opset9_aipp_fp16.om --input x=image.pb --per-tensor
if [ "$status" -eq 0 ] && [ "$(awk 'NR > 1 && NF == 5 { print $1 }' stdout | tr '\n' ' ')" = "aipp0_to_float aipp0_sub_mean aipp0_sub_min aipp0_mul_var_reci aipp0_to_nchw conv act padded y " ]; then
  pass "kiln compare --per-tensor of an AIPP .om compares the preprocessing tensors too"
else fail "kiln compare --per-tensor of an AIPP .om compares the preprocessing tensors too" "exit $status"; fi

# --- Output folders: each tool's own rule ---
# GraphEngine's atc creates the missing folders of --output (CheckOutputPathValid makes the
# prefix path); MindSpore Lite's converter resolves the --outputFile folder with realpath and
# fails when it is missing. docs/atc.md and docs/converter_lite.md say so.
tinyAtc=(--framework=5 --model=tiny.onnx --soc_version=Ascend310P3 --precision_mode=force_fp32)
run "$atc" "${tinyAtc[@]}" --output=made/on/demand/tiny
if [ "$status" -eq 0 ] && [ -f made/on/demand/tiny.om ] && [ "$(cat stdout)" = "ATC start working now, please wait for a moment.
...
ATC run success, welcome to the next use.
$deviceNote" ]; then
  pass "atc creates the missing folders of --output"
else fail "atc creates the missing folders of --output" "exit $status"; fi
readsBack "atc's .om in created folders reads back" "$kiln" made/on/demand/tiny.om
run "$atc" "${tinyAtc[@]}" --output=tiny.onnx/sub/tiny
if [ "$status" -eq 255 ] && [ "$(stampless stdout)" = "ATC start working now, please wait for a moment.
...
ATC run failed, Please check the detail log, Try 'atc --help' for more information
[PID] Invalid_Argument(E10001): Value tiny.onnx/sub/tiny for parameter --output is invalid. Reason: [Errno 20] Not a directory" ] &&
  [ "$(cat stderr)" = "atc: error K8202 (E10001): Value tiny.onnx/sub/tiny for parameter --output is invalid. Reason: [Errno 20] Not a directory. Fix: '$here/tiny.onnx/sub' must be a folder kiln can create and write" ]; then
  pass "atc names a folder it cannot create"
else fail "atc names a folder it cannot create" "exit $status"; fi
run "$atc" --mode=3 --framework=5 --model=tiny.onnx --soc_version=Ascend310P3 --check_report=reports/new/check.json
if [ "$status" -eq 0 ] && grep -qF '"result": "success"' reports/new/check.json; then
  pass "atc --mode=3 creates the missing folders of --check_report"
else fail "atc --mode=3 creates the missing folders of --check_report" "exit $status"; fi

run "$lite" --fmk=ONNX --modelFile=tiny.onnx --outputFile=missing/folder/tiny
if [ "$status" -eq 255 ] && [ "$(cat stdout)" = "CONVERT RESULT FAILED:-1 Common error code." ] &&
  [ "$(cat stderr)" = "converter_lite: error K1003 (-1): cannot create a file in 'missing/folder': No such file or directory. Fix: check that the output folder exists and is writable" ] &&
  [ ! -e missing ]; then
  pass "converter_lite refuses a missing --outputFile folder and creates nothing"
else fail "converter_lite refuses a missing --outputFile folder and creates nothing" "exit $status"; fi
mkdir -p present
run "$lite" --fmk=ONNX --modelFile=tiny.onnx --outputFile=present/tiny
if [ "$status" -eq 0 ] && [ "$(cat stdout)" = "CONVERT RESULT SUCCESS:0" ] && [ -f present/tiny.ms ]; then
  pass "converter_lite writes into an existing folder"
else fail "converter_lite writes into an existing folder" "exit $status"; fi

# --- atc --version / --help: no conversion framing ---
run "$atc" --version
if [ "$status" -eq 0 ] && [ -z "$(cat stderr)" ] &&
  [ "$(sed -n 2p stdout)" = "$deviceNote" ] && [ "$(wc -l <stdout)" -eq 2 ] &&
  grep -qxE "atc \(kiln\) [0-9]+\.[0-9]+\.[0-9]+" <(head -1 stdout); then
  pass "atc --version: the version and the device note only"
else fail "atc --version: the version and the device note only" "exit $status"; fi
run "$atc" --help
if [ "$status" -eq 0 ] && [ -z "$(cat stderr)" ] && [ "$(head -2 stdout)" = "usage: atc <args>
$deviceNote" ] && ! grep -qE "^ATC (start working|run success|run failed)" stdout; then
  pass "atc --help: usage without conversion framing"
else fail "atc --help: usage without conversion framing" "exit $status"; fi

# --- kiln inspect of a gear .om: the real inputs once and a gear table, not every shared
# constant as a Data input of every gear ---
"$kiln" convert "$models/nchw_image.onnxtxt" --to onnx -o dyn.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert nchw_image"; exit 1; }
run "$atc" --framework=5 --model=dyn.onnx --soc_version=Ascend310P3 --precision_mode=force_fp32 \
  --output=out/gears "--input_shape=x:-1,3,8,8" --dynamic_batch_size=1,2,4
run "$kiln" inspect out/gears.om
if [ "$status" -eq 0 ] && [ "$(sed -n '3,$p' stdout)" = "model 'gears' for Ascend310P3: 4 graph(s)
  graph 'gears': 7 ops (Case 1, Const 2, Data 2, MapIndex 1, NetOutput 1)
    input  x DT_FLOAT [4,3,8,8]
    input  ascend_mbatch_shape_data DT_INT32 [1] (gear selector)
    output y DT_FLOAT [4,512]
  gears: 3, one graph each; the 1 constant(s) of 'gears' are shared (each gear reads them as Data inputs)
    gear 0: x [1,3,8,8] -> y [1,512]  ('gears_ascend_mbatch_batch_0', 10 ops)
    gear 1: x [2,3,8,8] -> y [2,512]  ('gears_ascend_mbatch_batch_1', 10 ops)
    gear 2: x [4,3,8,8] -> y [4,512]  ('gears_ascend_mbatch_batch_2', 10 ops)" ]; then
  pass "kiln inspect of a gear .om: real inputs once and the gear table"
else fail "kiln inspect of a gear .om: real inputs once and the gear table" "exit $status"; fi

finish
