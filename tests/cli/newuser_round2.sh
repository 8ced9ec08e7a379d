#!/usr/bin/env bash
# What a new user meets, round two (issue 29): ATC's rules between flags mirrored by kiln's atc,
# precision modes that are what they say, CANN's log flag and environment, a shape range on a
# model kiln cannot make dynamic, "did you mean" for mistyped flags and values, and help text
# that names the tool and the model kinds it takes.
# Usage: tests/cli/newuser_round2.sh KILN ATC CONVERTER_LITE BENCHMARK SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 5 "KILN ATC CONVERTER_LITE BENCHMARK SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
atc=$2
lite=$3
bench=$4
src=$5
makeWork kiln-newuser2 "${6:-}"
cd "$work" || exit 2
models=$src/tests/cli/models

"$kiln" convert "$models/nchw_image.onnxtxt" --to onnx -o dyn.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert nchw_image"; exit 1; }
"$kiln" convert "$src/samples/tiny_cnn.onnxtxt" --to onnx -o tiny.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert tiny_cnn"; exit 1; }

# atcFails NAME BLOCK ERR ARGS...: atc exits 255 with ATC's framing, the error block line BLOCK
# (after "[PID: n] <time> ") as the only other stdout line, ERR as the whole stderr, and no .om.
atcFails() {
  local name=$1 block=$2 err=$3
  shift 3
  rm -rf out
  run "$atc" "$@"
  local got want
  got=$(sed -E 's/^\[PID: [0-9]+\] [0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9:]{8}\.[0-9]{3}\.[0-9]{3} /[PID] /' stdout)
  want="ATC start working now, please wait for a moment.
...
ATC run failed, Please check the detail log, Try 'atc --help' for more information
[PID] $block"
  if [ "$status" -eq 255 ] && [ "$got" = "$want" ] && [ "$(cat stderr)" = "$err" ] &&
    [ -z "$(ls out 2>/dev/null)" ]; then
    pass "$name"
  else fail "$name" "exit $status; expected stdout:
$want
expected stderr:
$err"; fi
}
# linesAre NAME FILE EXPECTED: FILE holds exactly EXPECTED (all lines).
linesAre() {
  if [ "$(cat "$work/$2")" = "$3" ]; then pass "$1"; else
    fail "$1" "$2 is not exactly (status $status):
$3"
  fi
}

# --- 1. ATC's rules between flags ---
common=(--framework=5 --model=dyn.onnx --soc_version=Ascend310P3 --output=out/m)
atcFails "dynamic_dims with --input_format=NCHW" \
  "Invalid_Argument(E10001): Value NCHW for parameter --input_format is invalid. Reason: --dynamic_dims needs --input_format=ND." \
  "atc: error K4106 (E10001): Value NCHW for parameter --input_format is invalid. Reason: --dynamic_dims needs --input_format=ND. Fix: add --input_format=ND (CANN's atc refuses --dynamic_dims without it)" \
  "${common[@]}" "--input_shape=x:-1,3,-1,8" "--dynamic_dims=1,8;2,16" --input_format=NCHW
atcFails "dynamic_dims without --input_format" \
  "Invalid_Argument(E10001): --dynamic_dims needs --input_format=ND; --input_format is not set (NCHW by default)." \
  "atc: error K4106 (E10001): --dynamic_dims needs --input_format=ND; --input_format is not set (NCHW by default). Fix: add --input_format=ND (CANN's atc refuses --dynamic_dims without it)" \
  "${common[@]}" "--input_shape=x:-1,3,-1,8" "--dynamic_dims=1,8;2,16"
run "$atc" "${common[@]}" "--input_shape=x:-1,3,-1,8" "--dynamic_dims=1,8;2,16" --input_format=ND
if [ "$status" -eq 0 ] && [ -s out/m.om ]; then pass "dynamic_dims with --input_format=ND converts"
else fail "dynamic_dims with --input_format=ND converts" "exit $status"; fi
atcFails "dynamic_dims on a 5-D input" \
  "Invalid_Argument(E10001): Value -1,3,8,8,1 for parameter --input_shape is invalid. Reason: with --dynamic_dims an input has at most 4 dims; this one has 5." \
  "atc: error K4106 (E10001): Value -1,3,8,8,1 for parameter --input_shape is invalid. Reason: with --dynamic_dims an input has at most 4 dims; this one has 5. Fix: reshape the input to at most 4 dims in the model, or use a static shape" \
  "${common[@]}" "--input_shape=x:-1,3,8,8,1" --input_format=ND "--dynamic_dims=1;2"
atcFails "dynamic_dims over 100 profiles" \
  "Invalid_Argument_Tensor_Dynamic_Shape(E10036): --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims has 101 profiles, which is greater than the maximum 100." \
  "atc: error K4106 (E10036): --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims has 101 profiles, which is greater than the maximum 100. Fix: see atc --help for the dynamic gear flags" \
  "${common[@]}" "--input_shape=x:-1,3,8,8" --input_format=ND "--dynamic_dims=$(seq -s';' 1 101)"
atcFails "dynamic_image_size on a 3-D input" \
  "Invalid_Argument_Tensor_Input_Shape(E10019): When --dynamic_image_size is included, only the height and width axes can be -1 in --input_shape." \
  "atc: error K4106 (E10019): When --dynamic_image_size is included, only the height and width axes can be -1 in --input_shape. Fix: input x (1,-1,-1): give -1 only on the height and width of a 4-D NCHW input" \
  "${common[@]}" "--input_shape=x:1,-1,-1" "--dynamic_image_size=8,8;16,16"
atcFails "dynamic_image_size without a -1" \
  "Invalid_Argument_Tensor_Input_Shape(E10019): When --dynamic_image_size is included, only the height and width axes can be -1 in --input_shape." \
  "atc: error K4106 (E10019): When --dynamic_image_size is included, only the height and width axes can be -1 in --input_shape. Fix: set the height and width of the image input to -1 in --input_shape" \
  "${common[@]}" "--input_shape=x:1,3,8,8" "--dynamic_image_size=8,8;16,16"
atcFails "input_hint_shape with gears" \
  "Invalid_Argument(E10001): Value 0:[1,3,8,8] for parameter --input_hint_shape is invalid. Reason: --input_hint_shape cannot be combined with --dynamic_batch_size, --dynamic_image_size or --dynamic_dims." \
  "atc: error K8202 (E10001): Value 0:[1,3,8,8] for parameter --input_hint_shape is invalid. Reason: --input_hint_shape cannot be combined with --dynamic_batch_size, --dynamic_image_size or --dynamic_dims. Fix: drop --input_hint_shape: the gears fix every shape" \
  "${common[@]}" "--input_shape=x:-1,3,8,8" --dynamic_batch_size=1,2 "--input_hint_shape=0:[1,3,8,8]"
atcFails "shape_generalized with gears" \
  "Invalid_Argument(E10001): Value shape_generalized for parameter --shape_generalized_build_mode is invalid. Reason: shape_generalized builds cannot be combined with dynamic gears or shape ranges." \
  "atc: error K8202 (E10001): Value shape_generalized for parameter --shape_generalized_build_mode is invalid. Reason: shape_generalized builds cannot be combined with dynamic gears or shape ranges. Fix: drop --shape_generalized_build_mode (it is deprecated)" \
  "${common[@]}" "--input_shape=x:-1,3,8,8" --dynamic_batch_size=1,2 --shape_generalized_build_mode=shape_generalized
atcFails "out_nodes mixing node:index and names" \
  "Invalid_Argument(E10001): Value conv:0;y for parameter --out_nodes is invalid. Reason: Only one of index, top_name and output_name can be used." \
  "atc: error K8202 (E10001): Value conv:0;y for parameter --out_nodes is invalid. Reason: Only one of index, top_name and output_name can be used. Fix: give every entry as node:index, or every entry as an output name" \
  "${common[@]}" "--out_nodes=conv:0;y"
atcFails "out_nodes index not a number" \
  "Invalid_Argument(E10001): Value conv:a for parameter --out_nodes is invalid. Reason: The index is not a positive integer." \
  "atc: error K8202 (E10001): Value conv:a for parameter --out_nodes is invalid. Reason: The index is not a positive integer. Fix: 'conv:a' needs a number after the last ':'" \
  "${common[@]}" --out_nodes=conv:a
atcFails "singleop with --framework" \
  "Invalid_Argument(E10001): Value op.json for parameter --singleop is invalid. Reason: --singleop takes none of --display_model_info=1, --framework, --insert_op_conf or a --mode other than 0." \
  "atc: error K8202 (E10001): Value op.json for parameter --singleop is invalid. Reason: --singleop takes none of --display_model_info=1, --framework, --insert_op_conf or a --mode other than 0. Fix: drop those flags from a --singleop run" \
  --singleop=op.json --framework=5 --output=out/m --soc_version=Ascend310P3

# --- 2. cube_fp16in_fp32out is refused, not built as another mode ---
for flag in precision_mode precision_mode_v2; do
  atcFails "--$flag=cube_fp16in_fp32out refused" \
    "Not_Supported(E10055): The operation is not supported. Reason: --$flag=cube_fp16in_fp32out is not supported by kiln's atc: Conv, ConvTranspose, MatMul and Gemm with fp16 inputs and fp32 outputs have no form in kiln's graph." \
    "atc: error K8202 (E10055): The operation is not supported. Reason: --$flag=cube_fp16in_fp32out is not supported by kiln's atc: Conv, ConvTranspose, MatMul and Gemm with fp16 inputs and fp32 outputs have no form in kiln's graph. Fix: use allow_fp32_to_fp16 (those ops wholly in fp16) or force_fp32, or build with CANN's atc (--cann_atc)" \
    --framework=5 --model=tiny.onnx --soc_version=Ascend310P3 --output=out/t --$flag=cube_fp16in_fp32out
done

# --- 3. --log in any case; CANN's log environment when --log is not given ---
# logLines FILE: the log lines of FILE without their time stamps.
logLines() { sed -nE 's/^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+\] //p' "$work/$1"; }
tinyArgs=(--framework=5 --model=tiny.onnx --soc_version=Ascend310P3 --output=out/t)
run "$atc" "${tinyArgs[@]}" --log=INFO
if [ "$status" -eq 0 ] && [ "$(logLines stderr | head -1)" = "[atc] [info] loaded tiny.onnx: 6 nodes, opset 13, 1 input(s)" ]; then
  pass "--log=INFO is --log=info"
else fail "--log=INFO is --log=info" "exit $status"; fi
run env KILN_PRECISION_GUARD=off ASCEND_GLOBAL_LOG_LEVEL=1 ASCEND_SLOG_PRINT_TO_STDOUT=1 "$atc" "${tinyArgs[@]}"
if [ "$status" -eq 0 ] && [ "$(logLines stdout | head -1)" = "[atc] [info] loaded tiny.onnx: 6 nodes, opset 13, 1 input(s)" ] &&
  [ ! -s stderr ] && [ "$(head -1 stdout)" = "ATC start working now, please wait for a moment." ]; then
  pass "ASCEND_GLOBAL_LOG_LEVEL=1 with ASCEND_SLOG_PRINT_TO_STDOUT=1 logs info to stdout"
else fail "ASCEND_GLOBAL_LOG_LEVEL=1 with ASCEND_SLOG_PRINT_TO_STDOUT=1 logs info to stdout" "exit $status"; fi
run env ASCEND_GLOBAL_LOG_LEVEL=1 "$atc" "${tinyArgs[@]}" --log=error
if [ "$status" -eq 0 ] && [ -z "$(logLines stdout; logLines stderr)" ]; then pass "--log wins over ASCEND_GLOBAL_LOG_LEVEL"
else fail "--log wins over ASCEND_GLOBAL_LOG_LEVEL" "exit $status"; fi
run env KILN_PRECISION_GUARD=off ASCEND_GLOBAL_LOG_LEVEL=9 "$atc" "${tinyArgs[@]}"
linesAre "ASCEND_GLOBAL_LOG_LEVEL outside 0..4 is said and ignored" stderr \
  "atc: warning: ASCEND_GLOBAL_LOG_LEVEL=9 is not one of 0 (debug), 1 (info), 2 (warning), 3 (error), 4 (null); ignored"
run "$atc" "${tinyArgs[@]}" --log=VERBOSE
sed -i -E 's/^\[PID: [0-9]+\] [0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9:]{8}\.[0-9]{3}\.[0-9]{3} /[PID] /' stdout
[ "$status" -eq 255 ] || echo "ATC exit status $status, expected 255" >>stdout
linesAre "--log=VERBOSE is still refused" stdout "ATC start working now, please wait for a moment.
ATC run failed, Please check the detail log, Try 'atc --help' for more information
[PID] Invalid_Argument(E10010): Value VERBOSE for parameter --log is invalid.
        Solution: Select the value from debug, info, warning, error, and null."

# --- 4. a shape range on ConvTranspose: the fix is a static shape or gears, both of which convert ---
"$kiln" convert "$models/deconv_dynamic.onnxtxt" --to onnx -o deconv.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert deconv_dynamic"; exit 1; }
deconv=(--framework=5 --model=deconv.onnx --soc_version=Ascend310P3 --output=out/d)
atcFails "ConvTranspose with a shape range suggests a static shape or image gears" \
  "Not_Supported_Operator(EZ3003): No supported Ops kernel and engine are found for [y], optype [ConvTranspose].
TraceBack (most recent call last):
        node producing 'y' (ConvTranspose) on Ascend310P3: ConvTranspose with dynamic shapes" \
  "atc: error K8101 (EZ3003): No supported Ops kernel and engine are found for [y], optype [ConvTranspose]. node producing 'y' (ConvTranspose) on Ascend310P3: ConvTranspose with dynamic shapes. Fix: these ops take static shapes only, and a range or -1 in --input_shape makes the model dynamic: give a static shape (--input_shape=\"x:1,3,640,640\") or gears (--input_shape=\"x:1,3,-1,-1\" --dynamic_image_size=\"224,224;640,640\", adding the sizes between that you need)" \
  "${deconv[@]}" "--input_shape=x:1,3,224~640,224~640"
run "$atc" "${deconv[@]}" "--input_shape=x:1,3,640,640"
if [ "$status" -eq 0 ]; then pass "the suggested static shape converts"; else fail "the suggested static shape converts" "exit $status"; fi
run "$atc" "${deconv[@]}" "--input_shape=x:1,3,-1,-1" "--dynamic_image_size=224,224;640,640"
if [ "$status" -eq 0 ]; then pass "the suggested image gears convert"; else fail "the suggested image gears convert" "exit $status"; fi
run "$atc" "${deconv[@]}" "--input_shape=x:1,3,224~640,224"
if [ "$status" -eq 255 ] && grep -qF 'gears (--input_shape="x:1,3,-1,224" --input_format=ND --dynamic_dims="224;640",' stderr; then
  pass "a range on H alone suggests dims gears"
else fail "a range on H alone suggests dims gears" "exit $status"; fi
run "$atc" "${deconv[@]}" "--input_shape=x:1,3,-1,224" --input_format=ND "--dynamic_dims=224;640"
if [ "$status" -eq 0 ]; then pass "the suggested dims gears convert"; else fail "the suggested dims gears convert" "exit $status"; fi

# --- 5. did you mean: unknown flags and values get the nearest spelling ---
# atc: the gflags-style line on stderr, then kiln's coded line with the fix.
atcUnknownFlag() {
  local name=$1 flag=$2 fix=$3
  run "$atc" "--$flag=1" --framework=5
  linesAre "$name" stderr "ERROR: unknown command line flag '$flag'
atc: error K4001: unknown command line flag '$flag'. Fix: $fix"
  [ "$status" -eq 255 ] || fail "$name exits 255" "exit $status"
}
atcUnknownFlag "atc --input-shap suggests --input_shape" input_shap "did you mean --input_shape? (see \`atc --help\`)"
atcUnknownFlag "atc --graph_optimize_mode is not an ATC flag" graph_optimize_mode \
  "--graph_optimize_mode is not an ATC flag (CANN's atc refuses it too); \`atc --help\` lists ATC's flags"
atcUnknownFlag "atc --insert_batchnorm_mode is not an ATC flag" insert_batchnorm_mode \
  "--insert_batchnorm_mode is not an ATC flag (CANN's atc refuses it too); \`atc --help\` lists ATC's flags"
run "$atc" "${tinyArgs[@]}" --soc_version=ascend310p3
if [ "$status" -eq 255 ] && grep -qE "^atc: error K8201 \(E20101\): Value \[ascend310p3\] for parameter \[--soc_version\] is invalid\. .* Fix: did you mean --soc_version=Ascend310P3\? \(names are case-sensitive\)$" stderr; then
  pass "--soc_version=ascend310p3 suggests Ascend310P3"
else fail "--soc_version=ascend310p3 suggests Ascend310P3" "exit $status"; fi
run "$lite" --fmk=ONNX --modelFile=tiny.onnx --outputFile=t --inputshape=image:1,1,8,8
linesAre "converter_lite --inputshape suggests --inputShape" stderr \
  "converter_lite: error K4001 (-600): unknown flag --inputshape; did you mean --inputShape? Fix: converter_lite flags: --fmk, --modelFile, --outputFile, --weightFile, --configFile, --fp16, --inputShape, --inputDataFormat, --outputDataFormat, --inputDataType, --outputDataType, --saveType, --optimize, --optimizeTransformer, --device, --infer, --trainModel, --decryptKey, --decryptMode, --encryptKey, --encryption (see --help)"
run "$bench" --modelFil=x.ms
linesAre "benchmark --modelFil suggests --modelFile" stderr \
  "benchmark: error K4001 (-1): unknown flag --modelFil; did you mean --modelFile? Fix: see benchmark --help for the flags"
run "$kiln" compare tiny.onnx tiny.onnx --input_shape image:1,1,8,8
linesAre "kiln compare --input_shape points to --input-shape" stderr \
  "kiln: error K4001: unknown flag --input_shape for kiln compare; did you mean --input-shape? Fix: run 'kiln compare --help' for its flags"
[ "$status" -ne 0 ] || fail "kiln compare --input_shape fails" "exit 0"
run "$kiln" tensor make --shpe 1,2 -o t.pb
linesAre "kiln tensor make --shpe suggests --shape" stderr \
  "kiln: error K4001: unknown flag --shpe for kiln tensor make; did you mean --shape? Fix: run 'kiln tensor make --help' for its flags"
run "$kiln" convert tiny.onnx --frobnicate -o x.onnx
linesAre "kiln convert names an unknown flag rather than a missing one" stderr \
  "kiln: error K4001: unknown flag --frobnicate for kiln convert. Fix: run 'kiln convert --help' for its flags"

# --- 6. help names the tool (not the path it was run by) and the model kinds each verb takes ---
run "$kiln" convert --help
if [ "$status" -eq 0 ] && [ "$(sed -n 2p stdout)" = "Usage: kiln convert [OPTIONS] model" ] &&
  grep -qE "^  model TEXT REQUIRED +input model \(\.onnx, \.onnxtxt, \.ms, \.om\)$" stdout; then
  pass "kiln convert --help: usage says kiln, inputs list .ms and .om"
else fail "kiln convert --help: usage says kiln, inputs list .ms and .om" "exit $status"; fi
run "$kiln" check --help
if [ "$status" -eq 0 ] && [ "$(sed -n 2p stdout)" = "Usage: kiln check [OPTIONS] model" ] &&
  grep -qE "^  --target TEXT +target to check against: ms\|om\[:SOC\] \(default: cpu, kiln's executor\)$" stdout; then
  pass "kiln check --help lists ms|om[:SOC]"
else fail "kiln check --help lists ms|om[:SOC]" "exit $status"; fi
run "$bench" --help
if [ "$status" -eq 0 ] && [ "$(head -2 stdout)" = "usage: benchmark --modelFile=MODEL [options]
Runs a model (.ms, .om or .onnx) on kiln's CPU executor, as MindSpore Lite's benchmark does." ]; then
  pass "benchmark --help lists .om"
else fail "benchmark --help lists .om" "exit $status"; fi
run "$atc" --help
if [ "$status" -eq 0 ] && [ "$(head -1 stdout)" = "usage: atc <args>" ] &&
  ! grep -qE "^ATC (start working|run)" stdout && [ ! -s stderr ]; then
  pass "atc --help prints the usage without conversion framing"
else fail "atc --help prints the usage without conversion framing" "exit $status"; fi
run "$atc" --version
if [ "$status" -eq 0 ] && grep -qE "^atc \(kiln\) [0-9]" stdout && [ "$(wc -l <stdout)" -eq 2 ] &&
  ! grep -qE "^ATC (start working|run)" stdout; then
  pass "atc --version prints the version and the .om note only"
else fail "atc --version prints the version and the .om note only" "exit $status"; fi

finish
