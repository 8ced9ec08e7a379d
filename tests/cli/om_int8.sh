#!/usr/bin/env bash
# Quantized ONNX kept int8 in .om: atc converts hand-written QLinearConv / QLinearMatMul /
# QuantizeLinear / DequantizeLinear models into AscendQuant → int8 Conv2D / MatMulV2 (int32 out) →
# AscendDequant (deq_scale as uint64 holding the float32 x_scale * w_scale bits) → AscendQuant; the
# .om computes the ONNX model's numbers in kiln's executor (kiln compare, three seeds, cosine >= 0.999,
# the largest difference reported) and GraphEngine's loader and CANN's public IR accept it.
# Usage: tests/cli/om_int8.sh ATC KILN SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 3 "ATC KILN SOURCE_DIR [WORKDIR]" "$@"
atc=$1
kiln=$2
src=$3
makeWork kiln-om-int8 "${4:-}"
cd "$work" || exit 2
model=$src/tests/cli/models/qlinear_int8.onnxtxt

run "$atc" --framework=5 --model="$model" --output=q --soc_version=Ascend310P3
if [ "$status" -eq 0 ] && [ -s q.om ]; then pass "atc converts the quantized model"
else fail "atc converts the quantized model" "exit $status"; fi

# The int8 structure, read from atc's own JSON dump of the .om (mode 1).
run "$atc" --mode=1 --om=q.om --json=q.json
if structure=$(python3 - q.json <<'PY'
import json, sys
graph = json.load(open(sys.argv[1]))["graph"][0]
ops = {op["name"]: op for op in graph["op"]}
def producer(src): return ops[src.rsplit(":", 1)[0]]
def consumers(name):
    return [op for op in graph["op"] if any(i.split(":")[0] == name for i in op.get("input", []))]
problems, cube = [], [op for op in graph["op"] if op["type"] in ("Conv2D", "MatMulV2")]
for op in cube:
    dt = [d["dtype"] for d in op["input_desc"]]
    if dt[:3] != ["DT_INT8", "DT_INT8", "DT_INT32"] or op["output_desc"][0]["dtype"] != "DT_INT32":
        problems.append(f"{op['name']}: dtypes {dt} -> {op['output_desc'][0]['dtype']}")
    if producer(op["input"][0])["type"] != "AscendQuant":
        problems.append(f"{op['name']}: input from {producer(op['input'][0])['type']}")
    if [c["type"] for c in consumers(op["name"])] != ["AscendDequant"]:
        problems.append(f"{op['name']}: read by {[c['type'] for c in consumers(op['name'])]}")
types = [op["type"] for op in graph["op"]]
print(f"{types.count('Conv2D')} Conv2D, {types.count('MatMulV2')} MatMulV2, "
      f"{types.count('AscendQuant')} AscendQuant, {types.count('AscendDequant')} AscendDequant, "
      f"{types.count('AscendAntiQuant')} AscendAntiQuant")
if len(cube) != 3 or problems: print("; ".join(problems) or "expected 3 int8 cube ops"); sys.exit(1)
PY
); then pass "AscendQuant → int8 Conv2D / MatMulV2 → AscendDequant ($structure)"
else fail "AscendQuant → int8 Conv2D / MatMulV2 → AscendDequant" "$structure"; fi

# deq_scale of the first QLinearConv: x_scale 0.02 times each per-channel w_scale, as float32 bits in
# the low half of a little-endian uint64 (high half zero), found in the file's bytes.
if python3 - q.om <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
ws = [0.004, 0.0035, 0.005, 0.0042, 0.0031, 0.0047, 0.0039, 0.0044]
xs = struct.unpack("<f", struct.pack("<f", 0.02))[0]
packed = b"".join(struct.pack("<fI", struct.unpack("<f", struct.pack("<f", xs))[0] *
                              struct.unpack("<f", struct.pack("<f", w))[0], 0) for w in ws)
sys.exit(0 if packed in data else 1)
PY
then pass "deq_scale holds x_scale * w_scale as uint64 (float32 bits low)"
else fail "deq_scale holds x_scale * w_scale as uint64 (float32 bits low)" "bytes not found"; fi

# kiln's executor: the .om against the ONNX model on three seeds.
worst=1 maxerr=0 compared=0
for seed in 1 2 3; do
  "$kiln" compare "$model" q.om --seed "$seed" >"compare$seed.txt" 2>&1 || continue
  compared=$((compared + 1))
  read -r c e < <(awk 'NR > 1 && NF >= 4 { if (min == "" || $2 < min) min = $2; if ($4 > m) m = $4 }
                       END { print (min == "" ? 0 : min), m + 0 }' "compare$seed.txt")
  worst=$(awk -v a="$worst" -v b="$c" 'BEGIN { print (b < a ? b : a) }')
  maxerr=$(awk -v a="$maxerr" -v b="$e" 'BEGIN { print (b > a ? b : a) }')
done
if [ "$compared" -eq 3 ] && awk -v c="$worst" 'BEGIN { exit !(c >= 0.999) }'; then
  pass "kiln compare ONNX vs .om: lowest cosine $worst, max abs error $maxerr over 3 seeds"
else fail "kiln compare ONNX vs .om" "$compared of 3 ran, lowest cosine $worst: $(cat compare*.txt | head -8)"; fi

# kiln run of the .om gives the uint8 codes output with its ONNX type.
"$kiln" tensor make --random --seed 4 --shape 1,3,12,12 --name x -o x.pb >/dev/null
"$kiln" tensor make --random --seed 5 --shape 4,32 --name a -o a.pb >/dev/null
run "$kiln" run q.om --input x=x.pb --input a=a.pb --output-dir out
if [ "$status" -eq 0 ] && "$kiln" tensor show out/codes.pb 2>/dev/null | grep -q uint8; then
  pass "kiln run of the .om writes uint8 codes"
else fail "kiln run of the .om writes uint8 codes" "exit $status"; fi

judgedByGe "om judge passes the int8 .om" "$src" q.om
finish
