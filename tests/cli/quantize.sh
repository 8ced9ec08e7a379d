#!/usr/bin/env bash
# kiln quantize: the sample CNN calibrated on 20 seeded samples (made by `kiln tensor make`) becomes
# a QDQ model with the expected QuantizeLinear/DequantizeLinear counts that runs in kiln's executor
# within cosine 0.99 of the float model, for every method; the output does not depend on the
# thread count; --target-cosine keeps the fewest nodes float; --exclude, int8 activations, the flat folder layout and an opset-9 model (raised to
# 13) work; bad folders and models are one coded line, exit 1 and no output file.
# Usage: tests/cli/quantize.sh KILN SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 2 "KILN SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
src=$2
makeWork kiln-quantize "${3:-}"
cd "$work" || exit 2
model=$src/samples/tiny_cnn.onnxtxt

# 20 samples, one subfolder each, holding image.npy; and the same data as flat .pb files.
for i in $(seq 1 20); do
  d=calibration/s$(printf %02d "$i")
  mkdir -p "$d" flat
  "$kiln" tensor make --random --seed "$i" --shape 1,1,8,8 --name image -o "$d/image.npy" >/dev/null
  "$kiln" tensor make --random --seed "$i" --shape 1,1,8,8 --name image \
    -o "flat/s$(printf %02d "$i").pb" >/dev/null
done

# opCount FILE OP: the count `kiln inspect` gives for OP (0 when absent).
opCount() {
  "$kiln" inspect "$1" | awk -v op="$2" '$1 == op { n = $2 } END { print n + 0 }'
}
# cosineOf REF MODEL: the output cosine `kiln compare` prints for `probabilities`.
cosineOf() {
  "$kiln" compare "$1" "$2" 2>/dev/null | awk '$1 == "probabilities" { print $2 }'
}
atLeast() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

# quantizes NAME WANT_Q WANT_DQ ARGS...: exit 0, the counts, kiln runs it, cosine >= 0.99.
quantizes() {
  local name=$1 wantQ=$2 wantDq=$3
  shift 3
  rm -f q.onnx
  run "$kiln" quantize "$model" -o q.onnx "$@"
  if [ "$status" -ne 0 ]; then
    fail "$name" "exit $status"
    return
  fi
  local q dq cosine
  q=$(opCount q.onnx QuantizeLinear)
  dq=$(opCount q.onnx DequantizeLinear)
  cosine=$(cosineOf "$model" q.onnx)
  if [ "$q" != "$wantQ" ] || [ "$dq" != "$wantDq" ]; then
    fail "$name" "QuantizeLinear $q, DequantizeLinear $dq; expected $wantQ, $wantDq"
  elif [ -z "$cosine" ] || ! atLeast "$cosine" 0.99; then
    fail "$name" "cosine '$cosine' vs the float model, expected >= 0.99"
  elif ! "$kiln" run q.onnx --input image=flat/s01.pb --output-dir out >"$work/stdout" 2>"$work/stderr"; then
    fail "$name" "kiln run of the QDQ model failed"
  else pass "$name (cosine $cosine)"; fi
}

# Conv and Gemm: 2 activation pairs; DequantizeLinear also for both weights and both biases.
quantizes "minmax: QDQ around Conv and Gemm" 2 6 --calibration calibration
cp q.onnx minmax.onnx
quantizes "percentile" 2 6 --calibration calibration --method percentile --percentile 99.9
quantizes "entropy" 2 6 --calibration calibration --method entropy
quantizes "flat layout" 2 6 --calibration flat
if cmp -s q.onnx minmax.onnx; then pass "flat layout gives the same model as subfolders"
else fail "flat layout gives the same model as subfolders" "q.onnx differs from minmax.onnx"; fi
quantizes "float bias: no bias DequantizeLinear" 2 4 --calibration calibration --float-bias
quantizes "--exclude the Gemm (unnamed: by its output)" 1 3 --calibration calibration --exclude logits
quantizes "--exclude OpType::Conv" 1 3 --calibration calibration --exclude OpType::Conv
quantizes "--calibration-size 5" 2 6 --calibration calibration --calibration-size 5
# Full-integer form: the Relu after the Conv and the Gemm's logits get their own pair as well.
quantizes "--quantize-outputs: pairs on the Relu and Gemm outputs too" 4 8 --calibration calibration --quantize-outputs
ir=$("$kiln" inspect --ir q.onnx)
if grep -q 'QuantizeLinear(%act,' <<<"$ir" && grep -q 'QuantizeLinear(%logits,' <<<"$ir"; then
  pass "--quantize-outputs quantizes the Relu's output (act) and the logits"
else fail "--quantize-outputs quantizes the Relu's output (act) and the logits" "$(grep QuantizeLinear <<<"$ir")"; fi

# Accuracy-aware: a reachable target keeps nothing float; an unreachable one keeps both nodes.
quantizes "--target-cosine 0.99 keeps nothing float" 2 6 --calibration calibration --target-cosine 0.99
run "$kiln" quantize "$model" -o reach.onnx --calibration calibration --target-cosine 0.99
if grep -q "^target cosine >= 0.99: 0 node(s) kept float" "$work/stdout"; then pass "--target-cosine 0.99 says so"
else fail "--target-cosine 0.99 says so" "no target line"; fi
run "$kiln" quantize "$model" -o keep.onnx --calibration calibration --target-cosine 0.9999999
if [ "$status" -eq 0 ] && [ "$(opCount keep.onnx QuantizeLinear)" = 0 ] &&
  grep -Eq "^target cosine >= 0.9999999: 2 node\(s\) kept float.*: (logits, conv|conv, logits)$" "$work/stdout"; then
  pass "--target-cosine 0.9999999 keeps the Gemm and the Conv float"
else fail "--target-cosine 0.9999999 keeps the Gemm and the Conv float" "exit $status"; fi

# Same bytes whatever the thread count.
run "$kiln" quantize "$model" --calibration calibration -o t2.onnx --method entropy --threads 2
"$kiln" quantize "$model" --calibration calibration -o t1.onnx --method entropy >/dev/null 2>&1
if [ "$status" -eq 0 ] && cmp -s t1.onnx t2.onnx; then pass "--threads 2 writes the same bytes"
else fail "--threads 2 writes the same bytes" "exit $status or the files differ"; fi

# int8 symmetric activations: the zero points are int8.
run "$kiln" quantize "$model" --calibration calibration -o s8.onnx --activation-type int8
if [ "$status" -eq 0 ] && "$kiln" inspect --ir s8.onnx | grep -q 'image_zero_point.*i8' &&
  atLeast "$(cosineOf "$model" s8.onnx)" 0.99; then pass "--activation-type int8"
else fail "--activation-type int8" "exit $status, or no int8 zero point, or cosine < 0.99"; fi

# An opset-9 model (Clip with attributes, Softmax at axis 1 of a 2-D tensor) is raised to 13.
cat >old.onnxtxt <<'EOF'
<ir_version: 4, opset_import: ["" : 9]>
old (float[1,1,8,8] image) => (float[1,3] probabilities)
<float[2,1,3,3] w = {0.3, -0.2, 0.1, 0.5, -0.4, 0.2, 0.1, 0.1, -0.3, -0.1, 0.2, 0.4, -0.5, 0.3, 0.1, 0.2, -0.2, 0.1},
 float[128,3] fc = {
EOF
seq 0 383 | awk '{ printf "%s%.3f", (NR > 1 ? ", " : ""), ((($1 * 7) % 19) - 9) / 100 } END { print "}>" }' >>old.onnxtxt
cat >>old.onnxtxt <<'EOF'
{
  c = Conv <pads = [1, 1, 1, 1]> (image, w)
  r = Clip <min = 0.0, max = 6.0> (c)
  f = Flatten (r)
  logits = MatMul (f, fc)
  probabilities = Softmax (logits)
}
EOF
model=old.onnxtxt
quantizes "opset 9 raised to 13" 2 4 --calibration calibration
if "$kiln" inspect q.onnx | grep -q 'ai.onnx:13' && "$kiln" inspect q.onnx | grep -q 'ir_version 7'; then
  pass "the raised model says opset 13 and IR version 7"
else fail "the raised model says opset 13 and IR version 7" "$("$kiln" inspect q.onnx | grep -E 'opsets|format')"; fi
model=$src/samples/tiny_cnn.onnxtxt

# refuses NAME CODE ARGS...: exit 1, one coded line on stderr, no out.onnx left.
refuses() {
  local name=$1 code=$2
  shift 2
  rm -f out.onnx
  run "$kiln" quantize "$@" -o out.onnx
  if [ "$status" -ne 1 ]; then
    fail "$name" "exit $status, expected 1"
  elif ! grep -q "^kiln: error $code: .*Fix: " "$work/stderr" || [ "$(wc -l <"$work/stderr")" -ne 1 ]; then
    fail "$name" "stderr is not one $code line"
  elif compgen -G 'out.onnx' >/dev/null || compgen -G '.out.onnx*' >/dev/null; then
    fail "$name" "an output file was left"
  else pass "$name"; fi
}
mkdir -p empty nofile/s1
refuses "missing calibration folder" K1001 "$model" --calibration absent
refuses "calibration is a file" K1002 "$model" --calibration calibration/s01/image.npy
refuses "folder without samples" K4001 "$model" --calibration empty
refuses "sample without the input's file" K4001 "$model" --calibration nofile
refuses "unknown method" K4001 "$model" --calibration calibration --method kl
refuses "target cosine out of range" K4001 "$model" --calibration calibration --target-cosine 1.5
refuses "percentile out of range" K4001 "$model" --calibration calibration --method percentile --percentile 0
cat >upsample.onnxtxt <<'EOF'
<ir_version: 4, opset_import: ["" : 9]>
up (float[1,1,4,4] image) => (float[1,1,8,8] y)
<float[1,1,1,1] w = {0.5}, float[4] scales = {1.0, 1.0, 2.0, 2.0}>
{
  c = Conv (image, w)
  y = Upsample (c, scales)
}
EOF
mkdir -p up/s1
"$kiln" tensor make --random --seed 1 --shape 1,1,4,4 --name image -o up/s1/image.npy >/dev/null
refuses "opset 9 with an op kiln cannot raise" K4002 upsample.onnxtxt --calibration up
if grep -q "Upsample" "$work/stderr"; then pass "the refusal names Upsample"
else fail "the refusal names Upsample" "not named"; fi

finish
