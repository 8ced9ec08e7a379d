#!/usr/bin/env bash
# End-to-end runs of the `atc` drop-in: ATC's framing lines and exit status, each invalid flag
# value of om.md §3.4 with ATC's code and message, the unknown-soc list, the mode-3 report with
# both an unsupported op and a bad shape, mode 0 writing a byte-identical .om and leaving nothing
# on failure, modes 1 and 6.
# Usage: tests/cli/atc.sh ATC KILN SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 3 "ATC KILN SOURCE_DIR [WORKDIR]" "$@"
atc=$1
kiln=$2
src=$3
makeWork kiln-atc "${4:-}"
cd "$work" || exit 2

run() {
  "$atc" "$@" >"$work/stdout" 2>"$work/stderr"
  status=$?
}

# failsWith NAME ECODE MESSAGE ARGS...: exit 255; stdout starts with ATC's start line, then
# "...", the failure line and an error block whose first line is "[PID: n] <time>
# Title(ECODE): ..." containing MESSAGE; stderr has the kiln code.
failsWith() {
  local name=$1 code=$2 text=$3
  shift 3
  run "$@"
  local problem=""
  [ "$status" -eq 255 ] || problem="exit $status, expected 255"
  [ "$(head -n1 stdout)" = "ATC start working now, please wait for a moment." ] ||
    problem="${problem:+$problem; }no start line"
  grep -qxF "ATC run failed, Please check the detail log, Try 'atc --help' for more information" \
    stdout || problem="${problem:+$problem; }no failure line"
  grep -qE "^\[PID: [0-9]+\] [0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9:]{8}\.[0-9]{3}\.[0-9]{3} [A-Za-z_]+\($code\): " \
    stdout || problem="${problem:+$problem; }no $code block line"
  grep -qF -- "$text" stdout || problem="${problem:+$problem; }stdout lacks '$text'"
  grep -qE "^atc: error K[0-9]{4} \($code\)" stderr ||
    grep -qE "^atc: error K[0-9]{4}" stderr || problem="${problem:+$problem; }no kiln code on stderr"
  grep -qF "ATC run success" stdout && problem="${problem:+$problem; }success line printed"
  if [ -n "$problem" ]; then fail "$name" "$problem"; else pass "$name"; fi
}

# Models: binary ONNX made from the text samples.
models=$src/tests/cli/models
"$kiln" convert "$src/samples/tiny_cnn.onnxtxt" --to onnx -o tiny.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert tiny_cnn"; exit 1; }
"$kiln" convert "$models/custom_op.onnxtxt" --to onnx -o custom.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert custom_op"; exit 1; }
"$kiln" convert "$models/nchw_image.onnxtxt" --to onnx -o dyn.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert nchw_image"; exit 1; }
"$kiln" convert "$models/any_channels.onnxtxt" --to onnx -o any_channels.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert any_channels"; exit 1; }
ok=(--framework=5 --model=tiny.onnx --soc_version=Ascend310P3)

# --- command-line parsing (om.md §2.1) ---
run --bogus=1 stray
if [ "$status" -eq 255 ] && grep -qxF "ERROR: unknown command line flag 'bogus'" stderr &&
  grep -qxF "ERROR: Non-option parameter: stray" stderr &&
  grep -qxF "ATC run failed, Please check the detail log, Try 'atc --help' for more information" stdout; then
  pass "unknown flag and positional argument"
else fail "unknown flag and positional argument" "status $status"; fi
run --output
if [ "$status" -eq 255 ] && grep -qF "ERROR: flag '--output' is missing its argument" stderr; then
  pass "missing argument"
else fail "missing argument" "status $status"; fi
run --help
if [ "$status" -eq 0 ] && grep -qF "usage: atc <args>" stdout &&
  grep -qF "===== Basic Functionality =====" stdout && grep -qF "[Operator Tuning]" stdout &&
  ! grep -qF "ATC run success" stdout; then
  pass "--help"
else fail "--help" "status $status"; fi
failsWith "mode 00" E10001 "Value 00 for parameter --mode is invalid. Reason: The value is not within the range of values. The valid range is [0] [1] [30] [3] [5] [6] [7] ." --mode=00
failsWith "sparsity 2" E10006 "Value 2 for parameter --sparsity is invalid. The value must be either 1 or 0." --sparsity=2 "${ok[@]}"
failsWith "log level" E10010 "Value loud for parameter --log is invalid." --log=loud "${ok[@]}"
failsWith "framework 2" E10007 "--framework is required. The value must be 0(Caffe) or 1(MindSpore) or 3(TensorFlow) or 5(Onnx)." --framework=2
failsWith "precision_mode value" E10001 "Value fp8 for parameter --precision_mode is invalid. Reason: The value is not within the range of values. The valid range is [allow_fp32_to_bf16]" --precision_mode=fp8 "${ok[@]}"

# --- om.md §3.4 scenarios ---
failsWith "soc_version missing" E10054 "The required parameter --soc_version for ATC is empty. Another possible reason is that the values of some parameters are not enclosed by quotation marks (\"\")." --framework=5 --model=tiny.onnx --output=o/tiny
failsWith "soc_version unknown" E20101 "Value [Foo] for parameter [--soc_version] is invalid. Reason: The corresponding platform configuration file cannot be found based on the configured soc_version" --framework=5 --model=tiny.onnx --output=o/tiny --soc_version=Foo
for soc in Ascend310 Ascend310P3 Ascend910B1 Ascend910_9392 MC62; do
  if grep -qF "$soc" stdout; then pass "unknown soc lists $soc"; else fail "unknown soc lists $soc" "missing"; fi
done
failsWith "soc and mode 30" E10055 "The operation is not supported. Reason: Option soc_version Ascend035 Ascend035A Ascend035B  and mode 30 must be set together." --framework=5 --model=tiny.onnx --output=o/tiny --soc_version=Ascend035
failsWith "framework missing" E10007 "--framework is required. The value must be 0(Caffe) or 1(MindSpore) or 3(TensorFlow) or 5(Onnx)." --model=tiny.onnx --output=o/tiny --soc_version=Ascend310P3
failsWith "model file missing" E10001 "Value ./x.onnx for parameter --model is invalid. Reason: [Errno 2] No such file or directory" --framework=5 --model=./x.onnx --output=o/tiny --soc_version=Ascend310P3
mkdir -p "at@sign" && cp tiny.onnx "at@sign/tiny.onnx"
failsWith "model path characters" E10001 "Reason: The path can only contain 'a-z' 'A-Z' '0-9' '-' '.' '_' and Chinese characters." --framework=5 "--model=at@sign/tiny.onnx" --output=o/tiny --soc_version=Ascend310P3
printf 'not a model' >garbage.onnx
failsWith "model unparsable" E10041 "Failed to load the model from garbage.onnx." --framework=5 --model=garbage.onnx --output=o/g --soc_version=Ascend310P3
failsWith "input_shape unknown name" E10016 "Op name foo specified in --input_shape is not found in the model. Confirm whether this node name exists, or whether the node is not split with the specified delimiter ';'." "${ok[@]}" --output=o/tiny "--input_shape=foo:1,1,8,8"
failsWith "input_shape names a non-Data node" E10017 "Input Op act specified in --input_shape is invalid. The Op type must be Data." "${ok[@]}" --output=o/tiny "--input_shape=act:1,4,8,8"
failsWith "input_shape without colon" E10002 "Reason: The shape must contain two parts: name and value." "${ok[@]}" --output=o/tiny "--input_shape=image:1,1,8,8;other"
failsWith "input_shape float" E10002 "Reason: The float number is unsupported. The value must be formatted as \"input_name1:1,3,224,224\"." "${ok[@]}" --output=o/tiny "--input_shape=image:1,1,8.5,8"
failsWith "input_shape letters" E10002 "Reason: It is not a digit." "${ok[@]}" --output=o/tiny "--input_shape=image:1,1,a,8"
failsWith "input_shape zero dim" E10011 "Value image:0,1,8,8 for parameter --input_shape is invalid. Shape values must be positive integers. The error value in the shape is 0." "${ok[@]}" --output=o/tiny "--input_shape=image:0,1,8,8"
failsWith "dynamic model without input_shape" E10001 "Value NULL for parameter --input_shape is invalid. Reason: The shapes of inputs contain -1 in the model. You may need to set input shape to specify its shape." --framework=5 --model=dyn.onnx --output=o/dyn --soc_version=Ascend310P3
failsWith "dynamic_dims without -1" E10001 "Value 0 for parameter --input_shape's dynamic dim num is invalid. Reason: At least one dim should be -1 when dynamic_dims is set." --framework=5 --model=dyn.onnx --output=o/dyn --soc_version=Ascend310P3 "--input_shape=x:1,3,8,8" "--dynamic_dims=1;2" --input_format=ND
failsWith "dynamic_dims count" E10003 "Value 1,2;3 for parameter --dynamic_dims is invalid. Reason: Each setting needs to be consistent with the number of -1 in the input shape." --framework=5 --model=dyn.onnx --output=o/dyn --soc_version=Ascend310P3 "--input_shape=x:-1,3,-1,8" "--dynamic_dims=1,2;3" --input_format=ND
failsWith "two gear flags" E10009 "--dynamic_batch_size, --dynamic_image_size, --input_shape_range, and --dynamic_dims are mutually exclusive." --framework=5 --model=dyn.onnx --output=o/dyn --soc_version=Ascend310P3 "--input_shape=x:-1,3,8,8" "--dynamic_batch_size=1,2" "--dynamic_dims=1;2"
failsWith "one gear profile" E10035 "has 1 profiles, which is less than the minimum 2." --framework=5 --model=dyn.onnx --output=o/dyn --soc_version=Ascend310P3 "--input_shape=x:-1,3,8,8" "--dynamic_batch_size=4"
failsWith "unsupported op" E16002 "No ONNX parser is registered for optype Frobnicate." --framework=5 --model=custom.onnx --output=o/custom --soc_version=Ascend310P3
if [ ! -e o/custom.om ]; then pass "unsupported op leaves no .om"; else fail "unsupported op leaves no .om" "o/custom.om exists"; fi
printf 'aipp_op {\n  aipp_mode: static\n  input_format: \n' >bad_syntax.cfg
failsWith "AIPP syntax" E13018 "bad_syntax.cfg" "${ok[@]}" --output=o/aipp --insert_op_conf=bad_syntax.cfg
printf 'aipp_op {\n  input_format: RGB888_U8\n}\n' >no_mode.cfg
failsWith "AIPP semantic" E10052 "AIPP configuration is invalid. Reason:" "${ok[@]}" --output=o/aipp --insert_op_conf=no_mode.cfg
# Running as root, a permission error cannot be provoked; a file where the folder should be can.
printf 'x' >not_a_dir
failsWith "output folder invalid" E10001 "for parameter --output is invalid. Reason: [Errno" "${ok[@]}" --output=not_a_dir/tiny
failsWith "output without file name" E10022 "Path o/ for parameter --output does not include the file name." "${ok[@]}" --output=o/
failsWith "auto_tune_mode" E10001 "Value GA for parameter --auto_tune_mode is invalid. Reason: The Auto Tune function has been deprecated. Please use the AOE tool for tuning." "${ok[@]}" --output=o/tiny --auto_tune_mode=GA
failsWith "input_format for ONNX" E10001 "Value NHWC for parameter --input_format is invalid. Reason: The value must be NCHW, ND or NCDHW in ONNX model." "${ok[@]}" --output=o/tiny --input_format=NHWC
failsWith "both precision flags" E10056 "Cannot configure both parameters --precision_mode and --precision_mode_v2 simultaneously." "${ok[@]}" --output=o/tiny --precision_mode=force_fp16 --precision_mode_v2=fp16
failsWith "output_type value" E10001 "Value INT64 for parameter --output_type is invalid. Reason: The current value is not within the valid range. Only support FP32, FP16, UINT8, INT8, HIF8, FP8E5M2, FP8E4M3FN." "${ok[@]}" --output=o/tiny --output_type=INT64
failsWith "mode 1 without --om" E10004 "Value for --om is empty." --mode=1 --json=x.json
failsWith "mode 6 with framework" E10057 "--om and --mode can only be used together." --mode=6 --om=x.om --framework=5
failsWith "rejected flag" E10055 "--out_nodes=conv:0 is not supported by kiln's atc" "${ok[@]}" --output=o/tiny --out_nodes=conv:0
if ls o/*.om >/dev/null 2>&1; then fail "failures leave no .om" "$(ls o)"; else pass "failures leave no .om"; fi

# --- mode 3: one report with the unsupported op and the bad shape ---
run --mode=3 --framework=5 --model=custom.onnx --soc_version=Ascend310P3 "--input_shape=x:1,3,5,5" --check_report=report.json
if [ "$status" -eq 255 ] && [ -s report.json ] &&
  python3 - report.json <<'EOF'; then pass "mode 3 report lists the op and the shape"; else fail "mode 3 report lists the op and the shape" "status $status: $(cat report.json 2>/dev/null)"; fi
import json, sys
r = json.load(open(sys.argv[1]))
assert set(r) == {"name", "result", "total", "pass", "fail", "op"}, r.keys()
assert r["result"] == "failed" and r["total"] == len(r["op"]) and r["pass"] + r["fail"] == r["total"]
ops = {o["type"]: o for o in r["op"]}
data = [o for o in r["op"] if o["type"] == "Data" and o["name"] == "x"][0]
assert data["result"] == "failed" and data["cause"][0]["code"] == 2, data
frob = ops["Frobnicate"]
assert frob["result"] == "failed" and frob["cause"][0]["code"] == 1, frob
assert ops["Relu"]["result"] == "success"
assert r["fail"] == 2, r["fail"]
EOF
# A channel count the Conv's weight contradicts: the Conv node fails with a parameter cause, mode 0
# writes no .om, and ATC's inner-error block carries the message.
run --mode=3 --framework=5 --model=any_channels.onnx --soc_version=Ascend310P3 "--input_shape=x:1,1,8,8" --check_report=conflict.json
if [ "$status" -eq 255 ] && grep -qx "E19999: Inner Error!" stdout && grep -qF "has 1 channels" stdout &&
  python3 - conflict.json <<'EOF'; then pass "mode 3 reports a shape conflict at the node"; else fail "mode 3 reports a shape conflict at the node" "status $status: $(cat conflict.json 2>/dev/null)"; fi
import json, sys
r = json.load(open(sys.argv[1]))
conv = [o for o in r["op"] if o["type"] == "Conv"][0]
assert conv["result"] == "failed" and conv["cause"][0]["code"] == 2, conv
assert "expects 3" in conv["cause"][0]["message"], conv
assert [o for o in r["op"] if o["type"] == "Data"][0]["result"] == "success"
EOF
run --framework=5 --model=any_channels.onnx --soc_version=Ascend310P3 "--input_shape=x:1,1,8,8" --output=o/conflict
if [ "$status" -eq 255 ] && grep -qE "^atc: error K3002 \(E19999\)" stderr && [ ! -e o/conflict.om ]; then pass "mode 0 refuses a shape conflict"; else fail "mode 0 refuses a shape conflict" "status $status"; fi
run --framework=5 --model=any_channels.onnx --soc_version=Ascend310P3 "--input_shape=x:1,3,8,8" --output=o/channels3
if [ "$status" -eq 0 ] && [ -s o/channels3.om ]; then pass "the right channel count converts"; else fail "the right channel count converts" "status $status"; fi
run --mode=3 --framework=5 --model=tiny.onnx --soc_version=Ascend310P3 --check_report=ok_report.json
if [ "$status" -eq 0 ] && grep -qF '"result": "success"' ok_report.json; then pass "mode 3 passes a good model"; else fail "mode 3 passes a good model" "status $status"; fi

# --- mode 0: convert, repeat byte-identically, modes 1 and 6 on the result ---
run "${ok[@]}" --output=out/tiny
if [ "$status" -eq 0 ] && [ -s out/tiny.om ] && grep -qxF "ATC run success, welcome to the next use." stdout &&
  [ "$(sed -n 2p stdout)" = "..." ]; then pass "mode 0 writes out/tiny.om"; else fail "mode 0 writes out/tiny.om" "status $status"; fi
cp out/tiny.om first.om
run "${ok[@]}" --output=out/tiny
if cmp -s first.om out/tiny.om; then pass "mode 0 repeats byte-identically"; else fail "mode 0 repeats byte-identically" "files differ"; fi
run "${ok[@]}" --output=out/named.om
if [ -s out/named.om.om ]; then pass "--output=x.om gives x.om.om"; else fail "--output=x.om gives x.om.om" "$(ls out)"; fi
run "${ok[@]}" --output=out/warned --op_debug_level=2
if [ "$status" -eq 0 ] && grep -qF -- "--op_debug_level=2 is accepted and ignored" stderr; then pass "ignored flag warns"; else fail "ignored flag warns" "status $status"; fi
run --mode=6 --om=out/tiny.om
if [ "$status" -eq 0 ] && grep -qF "============ Display Model Info start ============" stdout &&
  grep -qF "soc_version[Ascend310P3]" stdout; then pass "mode 6"; else fail "mode 6" "status $status"; fi
run --mode=1 --om=out/tiny.om --json=tiny_om.json
if [ "$status" -eq 0 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert "graph" in d' tiny_om.json; then
  pass "mode 1 on .om"
else fail "mode 1 on .om" "status $status"; fi
# The sample's Conv is written in ATC's heavy formats: FRACTAL_Z weights, NC1HWC0 maps, TransData in and out.
formats=$(python3 "$src/scripts/om_formats_count.py" tiny_om.json 2>&1)
if [ "$formats" = "1 of 1 Conv2D FRACTAL_Z, 2 TransData" ]; then pass "heavy formats in the dump"
else fail "heavy formats in the dump" "$formats"; fi
# A damaged ModelDef (0xFF inside a name string): ATC's parse error and kiln's code, and none of
# protobuf's own log lines beside them.
cp out/tiny.om damaged.om
offset=$(grep -obUa "probabilities" damaged.om | sed -n 2p | cut -d: -f1)
printf '\xff' | dd of=damaged.om bs=1 seek="$offset" conv=notrunc 2>/dev/null
failsWith "damaged ModelDef" E13005 "Failed to parse file damaged.om." --mode=1 --om=damaged.om --json=damaged.json
if grep -q "libprotobuf" stderr stdout; then fail "no protobuf log lines" "$(grep libprotobuf stderr stdout | head -n 1)"; else pass "no protobuf log lines"; fi
[ ! -e damaged.json ] && pass "no JSON for a damaged .om" || fail "no JSON for a damaged .om" "damaged.json written"
run --mode=1 --framework=5 --om=tiny.onnx --json=tiny_onnx.json
if [ "$status" -eq 0 ] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["graph"]["node"][0]["op_type"] == "Conv"' tiny_onnx.json; then
  pass "mode 1 on ONNX"
else fail "mode 1 on ONNX" "status $status"; fi
printf 'aipp_op {\n  aipp_mode: static\n  input_format: RGB888_U8\n  src_image_size_w: 8\n  src_image_size_h: 8\n  mean_chn_0: 10\n}\n' >aipp.cfg
run --framework=5 --model=dyn.onnx --soc_version=Ascend310P3 --output=out/aipp "--input_shape=x:1,3,8,8" --insert_op_conf=aipp.cfg
if [ "$status" -eq 0 ] && "$kiln" inspect out/aipp.om >inspect.txt 2>&1 && grep -qF "input  x DT_UINT8 [1,8,8,3]" inspect.txt; then
  pass "AIPP input becomes UINT8 NHWC"
else fail "AIPP input becomes UINT8 NHWC" "status $status: $(cat inspect.txt 2>/dev/null)"; fi
printf 'conv\n' >keep.txt
run --framework=5 --model=dyn.onnx --soc_version=Ascend310P3 --output=out/keep "--input_shape=x:1,3,8,8" --keep_dtype=keep.txt
run2=$status
run --framework=5 --model=dyn.onnx --soc_version=Ascend310P3 --output=out/nokeep "--input_shape=x:1,3,8,8"
if [ "$run2" -eq 0 ] && [ "$status" -eq 0 ] && ! cmp -s out/keep.om out/nokeep.om; then
  pass "--keep_dtype changes the model"
else fail "--keep_dtype changes the model" "status $run2/$status or identical files"; fi
failsWith "op without a kernel for this use" EZ3003 "No supported Ops kernel and engine are found for [y], optype [Reshape]." --framework=5 --model=dyn.onnx --output=o/dyn --soc_version=Ascend310P3 "--input_shape=x:-1,3,8,8"
if "$kiln" compare tiny.onnx out/tiny.om >compare.txt 2>&1; then pass "kiln compare tiny.onnx tiny.om"; else fail "kiln compare tiny.onnx tiny.om" "$(cat compare.txt)"; fi
# Every .om this script had atc write reads back with kiln's own reader.
readsBack "every .om written reads back" "$kiln" o/*.om out/*.om
judgedByGe "every .om written passes the om judge" "$src" o/*.om out/*.om

finish
