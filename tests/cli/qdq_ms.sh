#!/usr/bin/env bash
# Quantized ONNX stays int8 in .ms: a hand-made QDQ model (Conv → Relu → depthwise Conv → Relu →
# strided Conv, then a MatMul with per-column weights; tests/cli/models/qdq_cnn.onnxtxt, written
# by gen_qdq_cnn.py) converted by converter_lite holds QUANT_ALL Conv2DFusion/MatMulFusion between
# QuantDTypeCast nodes; kiln reads them back as QLinearConv/QLinearMatMul (int8 arithmetic in its
# executor), which matches the QDQ source run in kiln's executor (cosine >= 0.999) and the real
# MindSpore Lite runtime (../shared/judges/mslite, or $KILN_JUDGES; cosine >= 0.999 and the same
# int8 codes, bit for bit; skipped, saying so, when absent).
# Usage: tests/cli/qdq_ms.sh KILN CONVERTER_LITE SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 3 "KILN CONVERTER_LITE SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
converter=$2
src=$3
makeWork kiln-qdq-ms "${4:-}"
cd "$work" || exit 2

atLeast() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
# cosine A.bin B.bin: the cosine similarity of two raw float32 files.
cosine() {
  python3 - "$1" "$2" <<'PY'
import math, struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
x = struct.unpack("<%df" % (len(a) // 4), a)
y = struct.unpack("<%df" % (len(b) // 4), b)
if len(x) != len(y) or not x:
    print("nan")
else:
    d = sum(p * q for p, q in zip(x, y))
    n = math.sqrt(sum(p * p for p in x) * sum(q * q for q in y))
    print(d / n if n else (1.0 if x == y else 0.0))
PY
}

"$kiln" convert "$src/tests/cli/models/qdq_cnn.onnxtxt" --to onnx -o qdq.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert qdq_cnn"; exit 1; }
run "$converter" --fmk=ONNX --modelFile=qdq.onnx --outputFile=qdq
if [ "$status" -eq 0 ] && grep -q "CONVERT RESULT SUCCESS:0" "$work/stdout"; then
  pass "converter_lite converts the QDQ model"
else fail "converter_lite converts the QDQ model" "exit $status"; fi

# The .ms: three Conv2DFusion and a MatMulFusion, QuantDTypeCast at the float borders, and (read
# back) QLinearConv / QLinearMatMul over int8 codes, no float Conv or MatMul left.
opCount() { awk -v op="$2" '$1 == op { n = $2 } END { print n + 0 }' "$1"; }
"$kiln" inspect qdq.ms >inspect.txt 2>&1
"$kiln" inspect --ir qdq.ms >ir.txt 2>&1
conv=$(opCount inspect.txt Conv2DFusion)
matmul=$(opCount inspect.txt MatMulFusion)
casts=$(opCount inspect.txt QuantDTypeCast)
qconv=$(grep -c "= QLinearConv(" ir.txt)
qmatmul=$(grep -c "= QLinearMatMul(" ir.txt)
float=$(grep -cE "= (Conv|MatMul|Gemm)\(" ir.txt)
if [ "$conv" = 3 ] && [ "$matmul" = 1 ] && [ "$casts" -ge 2 ] && [ "$qconv" = 3 ] &&
  [ "$qmatmul" = 1 ] && [ "$float" = 0 ]; then
  pass "int8 Conv2DFusion x3, MatMulFusion, $casts QuantDTypeCast; read back as QLinear ops"
else
  fail "int8 .ms ops" "Conv2DFusion $conv, MatMulFusion $matmul, QuantDTypeCast $casts, QLinearConv $qconv, QLinearMatMul $qmatmul, float Conv/MatMul/Gemm $float"
fi
if grep -q "i8 \[" <("$kiln" lower qdq.onnx --target ms 2>&1) &&
  [ "$("$kiln" lower qdq.onnx --target ms 2>&1 | grep -c QUANT_ALL)" = 4 ]; then
  pass "four QUANT_ALL nodes over int8 tensors"
else fail "four QUANT_ALL nodes over int8 tensors" "$("$kiln" lower qdq.onnx --target ms 2>&1 | grep -c QUANT_ALL)"; fi

# kiln's executor: the .ms (int8 kernels) against the QDQ source, on 3 seeded inputs.
for seed in 1 2 3; do
  "$kiln" tensor make --random --seed "$seed" --shape 1,3,8,8 --name x -o "x$seed.pb" >/dev/null
  "$kiln" tensor make --random --seed "$seed" --shape 1,3,8,8 --name x -o "x$seed.bin" >/dev/null
done
worst=$("$kiln" compare qdq.onnx qdq.ms --input x=x1.pb 2>/dev/null |
  awk '$1 == "y" || $1 == "z" { if (min == "" || $2 < min) min = $2 } END { print min }')
if [ -n "$worst" ] && atLeast "$worst" 0.999; then pass "kiln: .ms vs the QDQ source, cosine $worst"
else fail "kiln: .ms vs the QDQ source" "cosine '$worst', expected >= 0.999"; fi

# QuantizeLinear → DequantizeLinear with scale 1 and zero point 0 is quantization all the same
# (rounding half to even, saturation), not the plain int8 cast the data-type pass writes with the
# same unit parameter: read back as QuantizeLinear, it gives the ONNX numbers.
printf '<ir_version: 8, opset_import: ["" : 13]>\nunit (float[2,8] x) => (float[2,8] y) <float s = {1.0}, int8 z = {0}> {\n  q = QuantizeLinear (x, s, z)\n  y = DequantizeLinear (q, s, z)\n}\n' >unit.onnxtxt
"$kiln" convert unit.onnxtxt --to onnx -o unit.onnx >/dev/null 2>&1
"$converter" --fmk=ONNX --modelFile=unit.onnx --outputFile=unit >/dev/null 2>&1
"$kiln" tensor make --random --seed 3 --range -3,3 --shape 2,8 --name x -o u.pb >/dev/null
unit=$("$kiln" compare unit.onnx unit.ms --input x=u.pb 2>/dev/null | awk '$1 == "y" { print $3 }')
if [ "$unit" = "0.000e+00" ] && grep -q "= QuantizeLinear(" <("$kiln" inspect --ir unit.ms 2>&1); then
  pass "unit-scale QuantizeLinear stays quantization (exact)"
else fail "unit-scale QuantizeLinear stays quantization" "mean relative error '$unit'"; fi

judge="${KILN_JUDGES:-$src/../shared/judges}/mslite/run-msrun.sh"
if [ ! -f "$judge" ]; then
  echo "SKIP MindSpore Lite runtime: $judge is absent (the judges live in ../shared/judges)"
else
  differing=0
  for seed in 1 2 3; do
    mkdir -p "ms$seed" "k$seed"
    run bash "$judge" qdq.ms "ms$seed" "x$seed.bin"
    if [ "$status" -ne 0 ]; then
      fail "MindSpore Lite runs the int8 .ms (seed $seed)" "msrun exit $status"
      continue
    fi
    "$kiln" run qdq.ms --input "x=x$seed.pb" --output-dir "k$seed" >/dev/null 2>&1
    low=""
    for k in 0 1; do
      name=$(awk -v k="$k" '$1 == k { print $2 }' "ms$seed/outputs.txt")
      "$kiln" tensor make "k$seed/$name.pb" -o "k$seed/$name.bin" >/dev/null 2>&1
      c=$(cosine "ms$seed/$k.bin" "k$seed/$name.bin")
      if [ -z "$low" ] || ! atLeast "$c" "$low"; then low=$c; fi
      # Both outputs are dequantized int8 codes: equal codes give identical bytes.
      differing=$((differing + $(cmp -l "ms$seed/$k.bin" "k$seed/$name.bin" 2>/dev/null |
        awk '{ print int(($1 - 1) / 4) }' | sort -u | wc -l)))
      [ -s "k$seed/$name.bin" ] || differing=$((differing + 1000))
    done
    if atLeast "$low" 0.999; then pass "MindSpore Lite agrees with kiln's .ms run (seed $seed, cosine $low)"
    else fail "MindSpore Lite agrees with kiln's .ms run (seed $seed)" "cosine $low, expected >= 0.999"; fi
  done
  # kiln requantizes the .ms's int8 Conv/MatMul in the runtime's fixed point and rounds its
  # QuantDTypeCast as the runtime does, so every code is the runtime's (float requantization gave
  # 2-4 of 74 codes off by one per input).
  if [ "$differing" -eq 0 ]; then pass "MindSpore Lite and kiln's .ms run give the same int8 codes"
  else fail "MindSpore Lite and kiln's .ms run give the same int8 codes" "$differing of 222 values differ"; fi
fi
finish
