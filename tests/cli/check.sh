#!/usr/bin/env bash
# `kiln check`: each shape-spec and op-support problem is reported with its code and fix, all at
# once, with a non-zero exit; a valid spec passes. Usage: tests/cli/check.sh KILN SOURCE_DIR
set -uo pipefail
kiln=$1
models=$2/tests/cli/models
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-check-XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

# expectCheck NAME WANT_STATUS NEEDLE... -- ARGS...: exit status and every needle in stdout.
expectCheck() {
  local name=$1 want=$2
  shift 2
  local needles=()
  while [ "$1" != "--" ]; do needles+=("$1"); shift; done
  shift
  "$kiln" check "$@" >"$work/out" 2>"$work/err"
  local status=$?
  local problem=""
  if [ "$want" = 0 ] && [ $status -ne 0 ]; then problem="exit $status, expected 0"; fi
  if [ "$want" = 1 ] && [ $status -eq 0 ]; then problem="exit 0, expected failure"; fi
  if [ $status -ge 128 ]; then problem="killed by signal $((status - 128))"; fi
  for n in "${needles[@]}"; do
    grep -qF -- "$n" "$work/out" || problem="${problem:+$problem; }output lacks '$n'"
  done
  if [ -z "$problem" ]; then passed=$((passed + 1)); echo "PASS $name"
  else failed=$((failed + 1)); echo "FAIL $name: $problem"; sed 's/^/  | /' "$work/out" "$work/err"; fi
}

img=$models/nchw_image.onnxtxt
expectCheck "valid shape passes" 0 "PASS" -- "$img" --input-shape x:1,3,8,8
expectCheck "NHWC given for NCHW" 1 "K4104 (E10001)" "looks like NHWC but the model input is NCHW" "use 1,3,8,8" \
  -- "$img" --input-shape x:1,8,8,3
expectCheck "unknown input lists real ones" 1 "K4102 (E10016)" "Op name image specified in --input_shape" \
  "the model's inputs are: x" -- "$img" --input-shape image:1,3,8,8
expectCheck "rank mismatch" 1 "K4103 (E10049)" "Dimension count 3" -- "$img" --input-shape x:1,3,8
expectCheck "float dim" 1 "K4101 (E10002)" "The float number is unsupported" -- "$img" --input-shape x:1,3.5,8,8
expectCheck "zero dim" 1 "K4105 (E10011)" "The error value in the shape is 0" -- "$img" --input-shape x:1,3,0,8
expectCheck "converter_lite negative dim" 1 "INPUT ILLEGAL: Unsupported dim < 0." \
  -- "$img" --shape-dialect lite --input-shape x:1,3,-1,8
expectCheck "unsupported op named with its node" 1 "unsupported: node producing 'y'" "com.example::Frobnicate" "1 unsupported" \
  -- "$models/custom_op.onnxtxt"

# Both problems of one model in one report, also as JSON.
cat > "$work/both.onnxtxt" <<'MODEL'
<ir_version: 8, opset_import: ["" : 13, "com.example" : 1]>
both (float[N,3,H,W] x) => (float[N,3,H,W] y) {
  y = com.example.Frobnicate (x)
}
MODEL
expectCheck "shape and op problems together" 1 "looks like NHWC" "unsupported: node" "1 unsupported, 1 other problem(s)" \
  -- "$work/both.onnxtxt" --input-shape x:1,8,8,3 --json "$work/report.json"
if grep -q '"peer_code": "E10001"' "$work/report.json" && grep -q '"result": "failed"' "$work/report.json"; then
  passed=$((passed + 1)); echo "PASS json report"
else
  failed=$((failed + 1)); echo "FAIL json report"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
