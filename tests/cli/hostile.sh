#!/usr/bin/env bash
# Hostile names and values across kiln, atc, converter_lite and benchmark: names that forge log
# lines, carry terminal escapes, are not UTF-8 or are 10 MB long; benchmark flags and model dims
# that used to abort or crash. Each run ends in its tool's framing and one coded line, with the
# model's text escaped and capped, JSON that parses, and no file a kiln reader refuses.
# Usage: tests/cli/hostile.sh KILN ATC CONVERTER_LITE BENCHMARK SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 5 "KILN ATC CONVERTER_LITE BENCHMARK SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
atc=$2
converter=$3
benchmark=$4
src=$5
makeWork kiln-hostile "${6:-}"
cd "$work" || exit 2

# lineIs NAME FILE TEXT: FILE (stdout or stderr) holds TEXT as one of its lines.
lineIs() {
  if grep -qxF -- "$3" "$work/$2"; then pass "$1"; else fail "$1" "$2 lacks the line '$3'"; fi
}

# tidy NAME STATUS: the run exited with STATUS, and neither stream holds an ESC or CR byte, a line
# starting with a forged code, or a line over 5000 bytes.
tidy() {
  local name=$1 want=$2 problem=""
  [ "$status" -eq "$want" ] || problem="exit $status, expected $want"
  if LC_ALL=C grep -q $'[\x1b\r]' "$work/stdout" "$work/stderr"; then
    problem="${problem:+$problem; }ESC or CR reached the terminal"
  fi
  if grep -q '^K0000' "$work/stdout" "$work/stderr"; then
    problem="${problem:+$problem; }a forged K0000 line"
  fi
  local longest
  longest=$(cat "$work/stdout" "$work/stderr" | LC_ALL=C awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }')
  [ "$longest" -le 5000 ] || problem="${problem:+$problem; }a line of $longest bytes"
  if [ -n "$problem" ]; then fail "$name" "$problem"; else pass "$name"; fi
}

# validJson NAME FILE: FILE parses as JSON.
validJson() {
  if python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding="utf-8"))' "$2" 2>/dev/null; then
    pass "$1"
  else
    fail "$1" "$2 is missing or not valid UTF-8 JSON"
  fi
}

model() { python3 "$src/tests/cli/hostile_model.py" "$@"; }
model forged.onnx --name 'a\nK0000: forged\x1b[31m' --op Bogus
model forged_op.onnx --op 'Evil\nK0000: forged'
model not_utf8.onnx --name 'n\xff\xfe'
model not_utf8_input.onnx --input 'x\xff'
model huge.onnx --name huge:10485760:n --op Bogus
soc=(--framework=5 --soc_version=Ascend310P3)
forgedLabel="node 'a\\nK0000: forged\\x1b[31m' (Bogus)"

# --- class 9: names are escaped and capped in every message
run "$converter" --fmk=ONNX --modelFile=forged.onnx --outputFile=forged
tidy "converter_lite: forged node name" 212
lineIs "converter_lite: forged name escaped" stderr "converter_lite: error K7101 (-300): 1 node(s) cannot be lowered to MindSpore Lite ops: $forgedLabel: no lowering for ONNX Bogus. Fix: replace these ops in the exporter (kiln check MODEL --target ms lists them)"
run "$converter" --fmk=ONNX --modelFile=forged_op.onnx --outputFile=forged_op
tidy "converter_lite: forged op type" 212
lineIs "converter_lite: op list escapes the op type" stdout 'FMKTYPE: ONNX, OP TYPE: Evil\nK0000: forged'
run "$atc" "${soc[@]}" --model=forged.onnx --output=forged
tidy "atc: forged node name" 255
lineIs "atc: the block escapes the name" stdout "        $forgedLabel on Ascend310P3: op Bogus has no GraphEngine lowering in kiln"
run "$kiln" check forged.onnx --target ms
tidy "kiln check: forged node name" 1
lineIs "kiln check: the report escapes the name" stdout "unsupported: node 'a\\nK0000: forged\\x1b[31m' (Bogus, opset 17): no lowering for ONNX Bogus"
run "$kiln" run forged.onnx --output-dir run_out
tidy "kiln run: forged node name" 1
lineIs "kiln run: K5001 escapes the name" stderr "kiln: error K5001: no CPU kernel for 1 op type(s) [Bogus], used by 'a\\nK0000: forged\\x1b[31m' (Bogus). Fix: these ops cannot be executed yet"
run "$kiln" inspect forged_op.onnx
tidy "kiln inspect: forged op type" 0
lineIs "kiln inspect: op histogram escapes the op type" stdout '  Evil\nK0000: forged      1'

# Names read from .ms/.om files are escaped in `kiln inspect` too (an OSC title sequence here).
model osc_input.onnx --input 'x\x1b]0;pwned\x07'
"$converter" --fmk=ONNX --modelFile=osc_input.onnx --outputFile=osc_input >/dev/null 2>&1
"$atc" "${soc[@]}" --model=osc_input.onnx --output=osc_input >/dev/null 2>&1
run "$kiln" inspect osc_input.ms
tidy "kiln inspect .ms: escape in an input name" 0
lineIs "kiln inspect .ms: the name is escaped" stdout '  x\x1b]0;pwned\x07 [1,4] dataType 43'
run "$kiln" inspect osc_input.om
tidy "kiln inspect .om: escape in an input name" 0
lineIs "kiln inspect .om: the name is escaped" stdout '    input  x\x1b]0;pwned\x07 DT_FLOAT [1,4]'
readsBack "the .ms and .om with an escape in a name read back" "$kiln" osc_input.ms osc_input.om
judgedByGe "the .om with an escape in a name passes the om judge" "$src" osc_input.om

capped="... (10485760 bytes)"
run "$converter" --fmk=ONNX --modelFile=huge.onnx --outputFile=huge
tidy "converter_lite: 10 MB name is capped" 212
grep -qF -- "$capped" stderr && pass "converter_lite: capped name gives its length" ||
  fail "converter_lite: capped name gives its length" "no '$capped'"
run "$atc" "${soc[@]}" --model=huge.onnx --output=huge
tidy "atc: 10 MB name is capped" 255
run "$kiln" check huge.onnx --target om:Ascend310P3
tidy "kiln check: 10 MB name is capped" 1
run "$kiln" run huge.onnx --output-dir run_out
tidy "kiln run: 10 MB name is capped" 1
lineIs "kiln run: the capped name keeps the rest of the line" stderr "kiln: error K5001: no CPU kernel for 1 op type(s) [Bogus], used by '$(printf 'n%.0s' $(seq 256))$capped' (Bogus). Fix: these ops cannot be executed yet"

# --- atc's stderr carries ATC's code and message, not only stdout's block
printf 'hello\n' >text.onnx
run "$atc" "${soc[@]}" --model=text.onnx --output=text
lineIs "atc: stderr has E10041 and its message" stderr "atc: error K2001 (E10041): Failed to load the model from text.onnx. text.onnx: file is text, not a binary ONNX model. Fix: pass a binary ONNX model (.onnx); ONNX text syntax belongs in a .onnxtxt file"
printf 'garbage' >garbage.om
run "$atc" --mode=1 --om=garbage.om --json=garbage.json
lineIs "atc: stderr has E13005 and its message" stderr "atc: error K8001 (E13005): Failed to parse file garbage.om. garbage.om: at byte 0: file is 7 bytes, shorter than the 256-byte header. Fix: the file is damaged or not an .om model; copy or convert it again"

# --- class 5: names that are not UTF-8 give JSON, not an abort
rm -f check_result.json # mode 0's refusals above write one too
run "$atc" "${soc[@]}" --mode=3 --model=not_utf8.onnx
tidy "atc mode 3: name not UTF-8" 255
validJson "atc mode 3: check_result.json parses" check_result.json
if python3 -c 'import json,sys; d=json.load(open("check_result.json", encoding="utf-8")); op=d["op"][1]
sys.exit(not (d["result"] == "failed" and op["name"] == "n\ufffd\ufffd" and
              "not valid UTF-8" in op["cause"][0]["message"]))' 2>/dev/null; then
  pass "atc mode 3: reports the name mode 0 refuses"
else fail "atc mode 3: reports the name mode 0 refuses" "$(head -c 600 check_result.json)"; fi
run "$kiln" inspect --json not_utf8_input.onnx
tidy "kiln inspect --json: input name not UTF-8" 0
validJson "kiln inspect --json parses" stdout
run "$kiln" check not_utf8.onnx --target om:Ascend310P3 --json check.json
validJson "kiln check --json parses" check.json
run "$atc" --mode=1 --framework=5 --om=not_utf8_input.onnx --json=not_utf8.json
tidy "atc mode 1: name not UTF-8" 0
validJson "atc mode 1: JSON parses" not_utf8.json

# --- class 8: what atc/converter_lite write reads back; what it cannot, they refuse
run "$atc" "${soc[@]}" --model=not_utf8.onnx --output=not_utf8
tidy "atc: name not UTF-8 refused" 255
lineIs "atc: refusal names the node" stderr "atc: error K8101 (EZ3003): No supported Ops kernel and engine are found for [n\\xff\\xfe], optype [Relu]. node 'n\\xff\\xfe' (Relu) on Ascend310P3: its name or op type is not valid UTF-8, which .om string fields require. Fix: replace the ops in the exporter; \`atc --mode=3\` or \`kiln check MODEL --target om:Ascend310P3\` lists them all"
[ ! -e not_utf8.om ] && pass "atc: no .om for a name not UTF-8" ||
  fail "atc: no .om for a name not UTF-8" "not_utf8.om written"
run "$converter" --fmk=ONNX --modelFile=not_utf8.onnx --outputFile=not_utf8
tidy "converter_lite: name not UTF-8" 0
readsBack "converter_lite: the .ms reads back" "$kiln" not_utf8.ms

# --- class 5: benchmark flags and dims that used to abort or crash
affine=$src/tests/cli/models/affine.onnxtxt
mkdir -p folder
run "$benchmark" --modelFile="$affine" --numThreads=100000 --loopCount=1
tidy "benchmark --numThreads=100000" 255
lineIs "benchmark: thread count range" stderr "benchmark: error K4001 (-1): --numThreads=100000: numThreads must be at most 256. Fix: pass --numThreads from 1 to 256"
run "$benchmark" --modelFile="$affine" --inDataFile=folder --loopCount=1
tidy "benchmark --inDataFile=<folder>" 255
lineIs "benchmark: data file must be a regular file" stderr "benchmark: error K1002 (-1): --inDataFile: 'folder' is not a regular file (it is a folder). Fix: pass a regular file"
run "$benchmark" --modelFile="$affine" --inputShape=x:100000000000,100000000000 --loopCount=1
tidy "benchmark: --inputShape past int64" 255
lineIs "benchmark: shape past int64 refused" stderr "benchmark: error K4105 (-1): input 'x': the shape given (100000000000,100000000000) holds more bytes than a tensor can. Fix: give the dims the model is meant to run at"
run "$benchmark" --modelFile="$affine" --inputShape=x:1000000000,1000000000 --loopCount=1
lineIs "benchmark: shape whose bits pass uint64 refused" stderr "benchmark: error K4105 (-1): input 'x': the shape given (1000000000,1000000000) holds more bytes than a tensor can. Fix: give the dims the model is meant to run at"
run "$benchmark" --modelFile="$affine" --inputShape=x:100000000,1000000000 --loopCount=1
tidy "benchmark: shape too large to allocate" 255
# Refused before allocating, against this machine's memory (the byte count differs by machine).
if grep -qE "^benchmark: error K5004 \(-1\): input 'x' \[100000000,1000000000\] needs 400000000000000000 bytes, more than this machine's memory \([0-9]+ bytes\)\. Fix: " stderr; then
  pass "benchmark: too large to allocate is K5004"
else fail "benchmark: too large to allocate is K5004" "stderr lacks the K5004 line"; fi
# A .ms whose input dims say 2147483647: the dims' int32 vector [1,4] patched in place.
"$kiln" convert "$affine" --to onnx -o affine.onnx >/dev/null 2>&1
"$converter" --fmk=ONNX --modelFile=affine.onnx --outputFile=affine >/dev/null 2>&1
python3 - affine.ms big_dims.ms <<'EOF'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
dims = bytes([2, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0])
assert dims in data, "no [1,4] dims vector"
while dims in data:
    at = data.find(dims)
    data[at + 4:at + 12] = b"\xff\xff\xff\x7f" * 2
open(sys.argv[2], "wb").write(data)
EOF
run "$benchmark" --modelFile=big_dims.ms --loopCount=1
tidy "benchmark: .ms with int32-max dims" 255
lineIs "benchmark: int32-max dims refused" stderr "benchmark: error K7001 (-1): big_dims.ms: tensor 'x': 4611686014132420609 elements of f32 overflow the byte size. Fix: pass a complete .ms file written by converter_lite or kiln"

finish
