#!/usr/bin/env bash
# End-to-end runs of the `converter_lite` drop-in: flags, status codes and closing lines, output
# naming, no output on failure, byte-identical repeats, --fp16, config-file errors and a
# WEIGHT_QUANT run; the .ms written is checked with `kiln inspect` and run with `benchmark`.
# Usage: tests/cli/converter_lite.sh CONVERTER_LITE KILN BENCHMARK SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 4 "CONVERTER_LITE KILN BENCHMARK SOURCE_DIR [WORKDIR]" "$@"
converter=$1
kiln=$2
benchmark=$3
src=$4
makeWork kiln-converter "${5:-}"
mkdir -p "$work/out"

run() {
  "$converter" "$@" >"$work/stdout" 2>"$work/stderr"
  status=$?
}

has() {
  if grep -qF -- "$3" "$work/$2"; then pass "$1"; else fail "$1" "$2 lacks '$3'"; fi
}

# converts NAME ARGS...: exit 0 and the success line.
converts() {
  local name=$1
  shift
  run "$@"
  if [ "$status" -ne 0 ]; then
    fail "$name" "exit $status, expected 0"
  elif ! grep -qx "CONVERT RESULT SUCCESS:0" "$work/stdout"; then
    fail "$name" "no 'CONVERT RESULT SUCCESS:0' line"
  else
    pass "$name"
  fi
}

# failsWith NAME CODE KCODE TEXT ARGS...: exit status CODE (mod 256), the line
# "CONVERT RESULT FAILED:CODE <description>" on stdout, a "converter_lite: error KCODE (CODE): " line on
# stderr that holds TEXT and a fix hint.
failsWith() {
  local name=$1 code=$2 kcode=$3 text=$4
  shift 4
  run "$@"
  if [ "$status" -ne $(((code % 256 + 256) % 256)) ]; then
    fail "$name" "exit $status, expected $(((code % 256 + 256) % 256)) ($code)"
  elif ! grep -Eq "^CONVERT RESULT FAILED:$code [A-Z]" "$work/stdout"; then
    fail "$name" "stdout lacks 'CONVERT RESULT FAILED:$code ...'"
  elif ! grep -Eq "^converter_lite: error ${kcode}[0-9]* \($code\): " "$work/stderr"; then
    fail "$name" "stderr lacks 'converter_lite: error $kcode ($code): '"
  elif ! grep -qF -- "$text" "$work/stderr"; then
    fail "$name" "stderr lacks '$text'"
  elif ! grep -q "Fix: " "$work/stderr"; then
    fail "$name" "no fix hint"
  else
    pass "$name"
  fi
}

# noOutput NAME FILE: neither FILE nor a temp file of the atomic writer exists.
noOutput() {
  local dir base
  dir=$(dirname "$2")
  base=$(basename "$2")
  if [ -e "$2" ]; then
    fail "$1" "$2 was written"
  elif [ -n "$(find "$dir" -maxdepth 1 -name ".$base.tmp-*")" ]; then
    fail "$1" "temp file left in $dir"
  else
    pass "$1"
  fi
}

"$kiln" convert "$src/samples/tiny_cnn.onnxtxt" --to onnx -o "$work/tiny.onnx" >/dev/null
model="$work/tiny.onnx"
out="$work/out"

# --- flags
run --help
if [ "$status" -eq 0 ] && grep -q -- "--fmk=ONNX" "$work/stdout"; then pass "help"; else fail "help" "exit $status"; fi
failsWith "no flags" -600 K4001 "fmk/modelFile/outputFile flags are necessary"
failsWith "missing outputFile" -600 K4001 "Flag missing" --fmk=ONNX --modelFile="$model"
failsWith "bad fmk" -600 K4001 "INPUT ILLEGAL: fmk must be TF|TFLITE|CAFFE|MINDIR|ONNX" \
  --fmk=KERAS --modelFile="$model" --outputFile="$out/a"
failsWith "fmk TF is not read" -7 K4002 "reads ONNX models only" \
  --fmk=TF --modelFile="$model" --outputFile="$out/a"
failsWith "flag with a space" -600 K4001 "flag --modelFile has no value" \
  --fmk=ONNX --modelFile "$model" --outputFile="$out/a"
failsWith "unknown flag" -600 K4001 "unknown flag --modelfile" \
  --fmk=ONNX --modelfile="$model" --outputFile="$out/a"
failsWith "repeated flag" -600 K4001 "--fmk is given twice" \
  --fmk=ONNX --fmk=ONNX --modelFile="$model" --outputFile="$out/a"
failsWith "bad fp16" -600 K4001 "INPUT ILLEGAL: fp16 must be on|off" \
  --fmk=ONNX --modelFile="$model" --outputFile="$out/a" --fp16=true
failsWith "bad optimize" -600 K4001 "INPUT ILLEGAL: optimize must be none|general" \
  --fmk=ONNX --modelFile="$model" --outputFile="$out/a" --optimize=fast
failsWith "saveType MINDIR" -7 K4001 "--saveType=MINDIR" \
  --fmk=ONNX --modelFile="$model" --outputFile="$out/a" --saveType=MINDIR
failsWith "negative dim" -600 K4101 "INPUT ILLEGAL: Unsupported dim < 0." \
  --fmk=ONNX --modelFile="$model" --outputFile="$out/a" --inputShape="image:1,1,-8,8"
failsWith "unknown input" -600 K4102 "image2" \
  --fmk=ONNX --modelFile="$model" --outputFile="$out/a" --inputShape="image2:1,1,8,8"
failsWith "missing model" -600 K1001 "$work/absent.onnx" \
  --fmk=ONNX --modelFile="$work/absent.onnx" --outputFile="$out/a"
printf 'not a model' >"$work/readme.onnx"
failsWith "not an ONNX file" -200 K2001 "$work/readme.onnx" \
  --fmk=ONNX --modelFile="$work/readme.onnx" --outputFile="$out/a"
noOutput "failed runs write nothing" "$out/a.ms"

# --- conversions and output naming
converts "FP32" --fmk=ONNX --modelFile="$model" --outputFile="$out/tiny"
if [ -s "$out/tiny.ms" ]; then pass ".ms appended"; else fail ".ms appended" "$out/tiny.ms missing"; fi
converts "FP32 again, .ms given" --fmk=ONNX --modelFile="$model" --outputFile="$out/again.ms"
if [ -s "$out/again.ms" ] && [ ! -e "$out/again.ms.ms" ]; then pass "trailing .ms kept once"; else fail "trailing .ms kept once" "again.ms missing or again.ms.ms written"; fi
if cmp -s "$out/tiny.ms" "$out/again.ms"; then pass "repeat is byte-identical"; else fail "repeat is byte-identical" "cmp differs"; fi
if "$kiln" inspect "$out/tiny.ms" >"$work/stdout" 2>"$work/stderr"; then pass "kiln inspect verifies the .ms"; else fail "kiln inspect verifies the .ms" "exit $?"; fi
converts "optimize none" --fmk=ONNX --modelFile="$model" --outputFile="$out/none" --optimize=none
converts "inputShape" --fmk=ONNX --modelFile="$model" --outputFile="$out/shaped" --inputShape="image:1,1,8,8"
converts "infer" --fmk=ONNX --modelFile="$model" --outputFile="$out/infer" --infer=true
dynamic="$src/tests/cli/models/nchw_image.onnxtxt"
converts "dynamic model with --inputShape" --fmk=ONNX --modelFile="$dynamic" --outputFile="$out/dyn" --inputShape="x:1,3,16,16"
"$kiln" inspect "$out/dyn.ms" >"$work/stdout" 2>"$work/stderr"
if grep -q "x \[1,3,16,16\]" "$work/stdout"; then pass "fixed input shape is in the .ms"; else fail "fixed input shape is in the .ms" "no x [1,3,16,16]"; fi
converts "NHWC input" --fmk=ONNX --modelFile="$model" --outputFile="$out/nhwc" --inputDataFormat=NHWC
printf '<ir_version: 8, opset_import: ["" : 13]>\ng (float[1,3,4,4] x) => (float[1,3,4,4] y) {\n  y = Relu (x)\n}\n' >"$work/relu.onnxtxt"
converts "NHWC input and output" --fmk=ONNX --modelFile="$work/relu.onnxtxt" --outputFile="$out/relu" \
  --inputDataFormat=NHWC --outputDataFormat=NHWC
"$kiln" inspect "$out/relu.ms" >"$work/stdout" 2>"$work/stderr"
if grep -q "x \[1,4,4,3\]" "$work/stdout" && grep -q "y \[1,4,4,3\]" "$work/stdout"; then
  pass "NHWC graph input and output keep their names"
else
  fail "NHWC graph input and output keep their names" "no x/y [1,4,4,3]"
fi
converts "fp16" --fmk=ONNX --modelFile="$model" --outputFile="$out/fp16" --fp16=on
fp32Size=$(stat -c %s "$out/tiny.ms")
fp16Size=$(stat -c %s "$out/fp16.ms")
if [ "$fp16Size" -lt "$fp32Size" ]; then pass "fp16 is smaller ($fp16Size < $fp32Size bytes)"; else fail "fp16 is smaller" "$fp16Size vs $fp32Size"; fi

# --- config files
cat >"$work/wq.cfg" <<CFG
[common_quant_param]
quant_type=WEIGHT_QUANT
bit_num=8
min_quant_weight_size=0
min_quant_weight_channel=0
CFG
converts "WEIGHT_QUANT" --fmk=ONNX --modelFile="$model" --outputFile="$out/wq" --configFile="$work/wq.cfg"
wqSize=$(stat -c %s "$out/wq.ms")
if [ "$wqSize" -lt "$fp16Size" ]; then pass "int8 is smaller than fp16 ($wqSize < $fp16Size bytes)"; else fail "int8 is smaller than fp16" "$wqSize vs $fp16Size"; fi
converts "WEIGHT_QUANT again" --fmk=ONNX --modelFile="$model" --outputFile="$out/wq2" --configFile="$work/wq.cfg"
if cmp -s "$out/wq.ms" "$out/wq2.ms"; then pass "WEIGHT_QUANT repeat is byte-identical"; else fail "WEIGHT_QUANT repeat is byte-identical" "cmp differs"; fi

printf '[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_nums=8\n' >"$work/key.cfg"
failsWith "config: unknown key" -600 K7201 "key.cfg:3: INPUT ILLEGAL: \`bit_nums\` is not supported in [common_quant_param]" \
  --fmk=ONNX --modelFile="$model" --outputFile="$out/cfg" --configFile="$work/key.cfg"
printf '[common_quantize_param]\nquant_type=WEIGHT_QUANT\n' >"$work/section.cfg"
failsWith "config: unknown section" -600 K7201 "section [common_quantize_param] is not supported" \
  --fmk=ONNX --modelFile="$model" --outputFile="$out/cfg" --configFile="$work/section.cfg"
has "config: section hint" stderr "did you mean [common_quant_param]"
printf '[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=17\n' >"$work/range.cfg"
failsWith "config: out of range" -600 K7201 "bit_num should be in [0, 16]" \
  --fmk=ONNX --modelFile="$model" --outputFile="$out/cfg" --configFile="$work/range.cfg"
printf '[common_quant_param]\nquant_type=FULL_QUANT\n' >"$work/full.cfg"
failsWith "config: FULL_QUANT without calibration data" -600 K7201 "full.cfg:2: INPUT ILLEGAL: [common_quant_param] quant_type=FULL_QUANT needs calibration data: [data_preprocess_param] calibrate_path is not set" \
  --fmk=ONNX --modelFile="$model" --outputFile="$out/cfg" --configFile="$work/full.cfg"
failsWith "config: missing file" -600 K1001 "$work/absent.cfg" \
  --fmk=ONNX --modelFile="$model" --outputFile="$out/cfg" --configFile="$work/absent.cfg"
noOutput "config errors write nothing" "$out/cfg.ms"
printf '[ascend_context]\nprovider=ge\n' >"$work/ignored.cfg"
converts "config: ignored section" --fmk=ONNX --modelFile="$model" --outputFile="$out/ignored" --configFile="$work/ignored.cfg"
has "config: ignored entry is noted" stderr "ignored.cfg:2: [ascend_context] provider=ge is accepted but ignored"

# --- unsupported ops: every op listed, -300, nothing written
failsWith "unsupported op" -300 K7101 "Frobnicate" \
  --fmk=ONNX --modelFile="$src/tests/cli/models/custom_op.onnxtxt" --outputFile="$out/custom"
has "UNSUPPORTED OP LIST" stdout "UNSUPPORTED OP LIST:"
has "op list names the op" stdout "FMKTYPE: ONNX, OP TYPE: Frobnicate"
has "failure description" stdout "CONVERT RESULT FAILED:-300 Failed to find operator."
noOutput "unsupported op writes nothing" "$out/custom.ms"
printf 'keep me' >"$out/kept.ms"
run --fmk=ONNX --modelFile="$src/tests/cli/models/custom_op.onnxtxt" --outputFile="$out/kept"
if [ "$(cat "$out/kept.ms")" = "keep me" ]; then pass "failed run leaves an existing file untouched"; else fail "failed run leaves an existing file untouched" "content changed"; fi

# --- each .ms reads back and runs in kiln's executor with the ONNX model's outputs
# sameOutputs NAME MS MIN_COSINE: kiln compare (ONNX vs .ms, deterministic inputs) gives every
# output a cosine of at least MIN_COSINE.
sameOutputs() {
  "$kiln" compare "$model" "$2" --json >"$work/stdout" 2>"$work/stderr"
  local st=$? cosines
  cosines=$(grep -o '"cosine": [-0-9.e]*' "$work/stdout" | awk '{print $2}')
  if [ "$st" -ne 0 ] || [ -z "$cosines" ]; then
    fail "$1" "kiln compare exit $st"
  elif echo "$cosines" | awk -v m="$3" '$1 < m { bad = 1 } END { exit !bad }'; then
    fail "$1" "cosine below $3: $cosines"
  else
    pass "$1 (cosine $(echo $cosines))"
  fi
}
sameOutputs "FP32 .ms matches ONNX" "$out/tiny.ms" 0.999999
sameOutputs "optimize=none .ms matches ONNX" "$out/none.ms" 0.999999
sameOutputs "fp16 .ms close to ONNX" "$out/fp16.ms" 0.999
sameOutputs "WEIGHT_QUANT .ms close to ONNX" "$out/wq.ms" 0.99
"$benchmark" --modelFile="$out/tiny.ms" --loopCount=1 --warmUpLoopCount=0 >"$work/stdout" 2>"$work/stderr"
if [ $? -eq 0 ] && grep -q "Run Benchmark tiny.ms Success." "$work/stdout"; then pass "benchmark runs the .ms"; else fail "benchmark runs the .ms" "no success"; fi
# Accuracy mode on the .ms: expected data from benchmark's run of the ONNX model (same generated
# inputs; values printed to 6 digits, inside benchmark's 1e-5 relative tolerance).
printf 'probabilities 2 1 10\n0 0 0 0 0 0 0 0 0 0\n' >"$work/bogus.out"
"$benchmark" --modelFile="$model" --benchmarkDataFile="$work/bogus.out" >"$work/stdout" 2>"$work/stderr"
values=$(sed -n 's/^Data of node probabilities : //p' "$work/stdout")
printf 'probabilities 2 1 10\n%s\n' "$values" >"$work/tiny.out"
"$benchmark" --modelFile="$out/tiny.ms" --benchmarkDataFile="$work/tiny.out" --cosineDistanceThreshold=0.9999 \
  >"$work/stdout" 2>"$work/stderr"
if [ $? -eq 0 ] && [ "$(echo "$values" | wc -w)" -eq 10 ] &&
  grep -q "Mean bias of all nodes/tensors: 0.000000%" "$work/stdout"; then
  pass "benchmark accuracy mode: .ms matches the ONNX model's outputs"
else
  fail "benchmark accuracy mode: .ms matches the ONNX model's outputs" "values: $values"
fi
"$benchmark" --modelFile="$out/wq.ms" --benchmarkDataFile="$work/tiny.out" --accuracyThreshold=5 \
  --cosineDistanceThreshold=0.999 >"$work/stdout" 2>"$work/stderr"
if [ $? -eq 0 ]; then pass "benchmark accuracy mode: WEIGHT_QUANT .ms within 5%"; else fail "benchmark accuracy mode: WEIGHT_QUANT .ms within 5%" "failed"; fi
# NHWC input: the .ms takes [1,8,8,1].
"$kiln" inspect "$out/nhwc.ms" >"$work/stdout" 2>"$work/stderr"
if grep -q "1,8,8,1" "$work/stdout"; then pass "NHWC input shape"; else fail "NHWC input shape" "no [1,8,8,1] input"; fi
# Every .ms this script had converter_lite write reads back with kiln's own reader (kept.ms is the
# text a failed run must leave alone).
written=()
for f in "$out"/*.ms; do [ "$f" = "$out/kept.ms" ] || written+=("$f"); done
readsBack "every .ms written reads back" "$kiln" "${written[@]}"

finish
