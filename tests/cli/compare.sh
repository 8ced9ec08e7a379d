#!/usr/bin/env bash
# `kiln compare`: identical models match on every tensor; a model with one deliberately broken weight
# is caught, and --per-tensor names the node that uses it first. Usage: compare.sh KILN SOURCE_DIR
set -uo pipefail
kiln=$1
sample=$2/samples/tiny_cnn.onnxtxt
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-compare-XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
result() { if [ "$1" = ok ]; then passed=$((passed + 1)); echo "PASS $2"; else failed=$((failed + 1)); echo "FAIL $2"; sed 's/^/  | /' "$work/out"; fi; }

# Break the Gemm weights only: negate every value of fc_w.
awk '/float\[64,10\] fc_w/ { gsub(/-/, "@"); gsub(/ 0\./, " -0."); gsub(/\{0\./, "{-0."); gsub(/@/, ""); } { print }' \
  "$sample" > "$work/broken.onnxtxt"
cmp -s "$sample" "$work/broken.onnxtxt" && { echo "FAIL could not build the broken model"; exit 1; }

"$kiln" compare "$sample" "$sample" --per-tensor >"$work/out" 2>&1
st=$?
[ $st -eq 0 ] && grep -q "no tensor diverges" "$work/out" && result ok "identical models agree on every tensor" \
  || result bad "identical models agree on every tensor"

"$kiln" compare "$sample" "$work/broken.onnxtxt" --per-tensor >"$work/out" 2>&1
st=$?
if [ $st -eq 1 ] && grep -q "first divergent tensor: 'logits'" "$work/out" && grep -q "(Gemm)" "$work/out" &&
   grep -qE "^act +Relu +1\.00000000" "$work/out"; then
  result ok "broken Gemm weight: the Gemm is named, earlier tensors still match"
else
  result bad "broken Gemm weight: the Gemm is named, earlier tensors still match"
fi

"$kiln" compare "$sample" "$work/broken.onnxtxt" --json >"$work/out" 2>&1
if grep -q '"output": "probabilities"' "$work/out" && ! grep -q '"cosine": 1.0' "$work/out"; then
  result ok "output metrics show the damage"
else
  result bad "output metrics show the damage"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
