#!/usr/bin/env bash
# Dynamic shapes in .ms: converter_lite without --inputShape converts a model with dynamic input
# dims (run-time Reshape targets, a whole-scale Resize, an Expand to a computed shape, a 1-D Conv);
# the .ms keeps -1 for those dims and runs, read back by kiln and by the benchmark drop-in, at two
# different shapes, matching the ONNX model. A size that only fixed input shapes settle is refused
# with K7104 and an --inputShape hint naming the dynamic dims.
# Usage: dynamic_shapes.sh CONVERTER_LITE KILN BENCHMARK SOURCE_DIR WORK_DIR
set -uo pipefail
converter=$1
kiln=$2
benchmark=$3
src=$4
work=$5
rm -rf "$work"
mkdir -p "$work"
source "$src/tests/cli/lib.sh"
model=$src/tests/cli/models/dynamic_shapes.onnxtxt

"$converter" --fmk=ONNX --modelFile="$model" --outputFile="$work/dyn" >"$work/stdout" 2>"$work/stderr"
st=$?
if [ $st -eq 0 ] && grep -q "CONVERT RESULT SUCCESS:0" "$work/stdout" && [ -s "$work/dyn.ms" ]; then
  pass "converts without --inputShape"
else
  fail "converts without --inputShape" "exit $st"
fi

# The .ms keeps the dynamic dims as -1 (kiln inspect reads the .ms inputs).
"$kiln" inspect "$work/dyn.ms" >"$work/stdout" 2>"$work/stderr"
if grep -qE "x .*\[-1, ?3, ?-1, ?-1\]|x: f32\[-1,3,-1,-1\]|x .*-1x3x-1x-1" "$work/stdout" &&
   grep -qE "a .*\[-1, ?-1\]|a: f32\[-1,-1\]|a .*-1x-1" "$work/stdout"; then
  pass "the .ms inputs keep -1 for the dynamic dims"
else
  fail "the .ms inputs keep -1 for the dynamic dims" "inspect output"
fi

# Runs at two shapes and matches the ONNX model (fp32: mean relative error <= 1e-4 per output).
for shapes in "x:1,3,8,8;a:1,64" "x:2,3,6,10;a:3,100"; do
  "$kiln" compare "$model" "$work/dyn.ms" --input-shape "$shapes" >"$work/stdout" 2>"$work/stderr"
  st=$?
  outputs=$(awk '$1 ~ /^(flat|mean|biased|spec)$/ && $3 + 0 <= 1e-4 && $2 + 0 > 0.9999 { n++ } END { print n + 0 }' "$work/stdout")
  if [ $st -eq 0 ] && [ "$outputs" = 4 ]; then
    pass "kiln compare at $shapes: 4 outputs match"
  else
    fail "kiln compare at $shapes: 4 outputs match" "exit $st, $outputs outputs within 1e-4"
  fi
done

# The benchmark drop-in resizes the .ms to the shapes given (positional and named forms).
"$benchmark" --modelFile="$work/dyn.ms" --inputShapes=1,3,8,8:1,64 --loopCount=1 --warmUpLoopCount=0 \
  >"$work/stdout" 2>"$work/stderr"
st=$?
if [ $st -eq 0 ] && grep -q "Success" "$work/stdout"; then
  pass "benchmark --inputShapes runs the dynamic .ms"
else
  fail "benchmark --inputShapes runs the dynamic .ms" "exit $st"
fi
"$benchmark" --modelFile="$work/dyn.ms" --inputShape="x:2,3,6,10;a:3,100" --loopCount=1 \
  --warmUpLoopCount=0 >"$work/stdout" 2>"$work/stderr"
st=$?
if [ $st -eq 0 ] && grep -q "Success" "$work/stdout"; then
  pass "benchmark --inputShape runs the dynamic .ms at a second shape"
else
  fail "benchmark --inputShape runs the dynamic .ms at a second shape" "exit $st"
fi

# Ranks only run time knows (tests/cli/models/rank_through_if.onnxtxt, the silero VAD pattern: Ifs
# whose branches differ in rank feed an Unsqueeze with an axis counted from the end, a 1-D Conv, a
# ReduceMean and Slices counted from the end of an unknown dim): converts without --inputShape and
# matches ONNX on both branches (batch 1 squeezes the batch axis, batch 3 keeps it).
rank_model=$src/tests/cli/models/rank_through_if.onnxtxt
"$converter" --fmk=ONNX --modelFile="$rank_model" --outputFile="$work/rank" >"$work/stdout" 2>"$work/stderr"
st=$?
if [ $st -eq 0 ] && grep -q "CONVERT RESULT SUCCESS:0" "$work/stdout" && [ -s "$work/rank.ms" ]; then
  pass "ranks through If branches: converts without --inputShape"
else
  fail "ranks through If branches: converts without --inputShape" "exit $st"
fi
for shape in 1,10 3,12; do
  "$kiln" tensor make --random --seed 1 --shape "$shape" --name x -o "$work/x.pb" >/dev/null 2>&1
  "$kiln" compare "$rank_model" "$work/rank.ms" --input x="$work/x.pb" >"$work/stdout" 2>"$work/stderr"
  st=$?
  outputs=$(awk '$1 ~ /^(y|m)$/ && $3 + 0 <= 1e-5 && $2 + 0 > 0.99999 { n++ } END { print n + 0 }' "$work/stdout")
  if [ $st -eq 0 ] && [ "$outputs" = 2 ]; then
    pass "ranks through If branches: kiln compare at x:$shape, 2 outputs match"
  else
    fail "ranks through If branches: kiln compare at x:$shape, 2 outputs match" "exit $st, $outputs outputs within 1e-5"
  fi
done

# A fractional Resize scale over a dynamic height needs fixed shapes: K7104 names the fix.
cat >"$work/frac.onnxtxt" <<'EOF'
<ir_version: 8, opset_import: ["" : 13]>
frac (float[N,1,H,W] x) => (float[N,1,P,Q] y) <float[4] scales = {1, 1, 1.5, 1.5}> {
  y = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (x, , scales)
}
EOF
"$converter" --fmk=ONNX --modelFile="$work/frac.onnxtxt" --outputFile="$work/frac" >"$work/stdout" 2>"$work/stderr"
st=$?
if [ $st -ne 0 ] && grep -q "K7104 (-500)" "$work/stderr" && grep -q "Resize scale 1.5 over a dynamic size" "$work/stderr" &&
   grep -qF -- '--inputShape="x:<N>,1,<H>,<W>"' "$work/stderr" && [ ! -e "$work/frac.ms" ]; then
  pass "a fractional scale over a dynamic size: K7104 with the --inputShape fix, no output"
else
  fail "a fractional scale over a dynamic size: K7104 with the --inputShape fix, no output" "exit $st"
fi
# ... and converts once the input shape is fixed.
"$converter" --fmk=ONNX --modelFile="$work/frac.onnxtxt" --outputFile="$work/frac" \
  --inputShape="x:1,1,4,4" >"$work/stdout" 2>"$work/stderr"
st=$?
if [ $st -eq 0 ] && [ -s "$work/frac.ms" ]; then
  pass "the same model converts with --inputShape"
else
  fail "the same model converts with --inputShape" "exit $st"
fi
finish
