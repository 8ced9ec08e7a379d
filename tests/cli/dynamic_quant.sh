#!/usr/bin/env bash
# converter_lite quant_type=DYNAMIC_QUANT on BERT-like encoders (tests/cli/models, hidden 64 and
# 256): every MatMul with a constant weight becomes a DynamicQuant (activations to int8 at run
# time) and an int8 MatMulFusion of quantType QUANT_DYNAMIC with int8 weights and QuantParams, for
# both [dynamic_quant_param] strategies (ALWC: activation per layer, weight per channel; ACWL:
# activation per row, weight per layer). kiln's run of the .ms (DynamicQuant raised to int8 codes,
# the product to MatMulInteger and a scale Mul) must stay within cosine 0.999 of the float ONNX
# model yet differ from it (the int8 rounding shows), the hidden-256 .ms must be at most 30% of
# the float .ms, and MindSpore Lite's own runtime (../shared/judges/mslite, when present) must
# load and run the .ms and agree with kiln's run (cosine >= 0.999).
# Usage: tests/cli/dynamic_quant.sh KILN CONVERTER_LITE SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 3 "KILN CONVERTER_LITE SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
converter=$2
src=$3
makeWork kiln-dynamic-quant "${4:-}"
cd "$work" || exit 2
models=$src/tests/cli/models
# The judges live beside the checkout (../shared), or beside a worktree's folder (../../shared).
msrun=$src/../shared/judges/mslite/run-msrun.sh
[ -x "$msrun" ] || msrun=$src/../../shared/judges/mslite/run-msrun.sh

# cosine A.bin B.bin: the cosine of two raw float32 files (pure Python: no numpy in the image).
cosine() {
  python3 - "$1" "$2" <<'PY'
import math, struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
if len(a) != len(b) or not a:
    print(f"sizes {len(a)} and {len(b)}"); sys.exit()
x = struct.unpack(f"<{len(a) // 4}f", a); y = struct.unpack(f"<{len(b) // 4}f", b)
dot = sum(p * q for p, q in zip(x, y)); nx = math.sqrt(sum(p * p for p in x)); ny = math.sqrt(sum(q * q for q in y))
print(f"{dot / (nx * ny):.7f}" if nx and ny else "0")
PY
}

# at_least VALUE BAR: VALUE is a number >= BAR.
at_least() { python3 -c "import sys; sys.exit(0 if float('$1') >= float('$2') else 1)" 2>/dev/null; }

for strategy in ALWC ACWL; do
  printf '[common_quant_param]\nquant_type=DYNAMIC_QUANT\nbit_num=8\n\n[dynamic_quant_param]\nquant_strategy=%s\n' \
    "$strategy" >"$strategy.cfg"
done

for m in bert_encoder bert_encoder_256; do
  hidden=${m#bert_encoder}
  hidden=${hidden#_}
  hidden=${hidden:-64}
  if ! "$converter" --fmk=ONNX --modelFile="$models/$m.onnxtxt" --outputFile="${m}_fp32" \
    >"$work/stdout" 2>"$work/stderr"; then
    fail "$m: float conversion" "$(cat "$work/stderr")"
    continue
  fi
  fp32Bytes=$(stat -c %s "${m}_fp32.ms")
  "$kiln" tensor make --random --seed 7 --shape "1,8,$hidden" --name x -o "${m}_x.pb" >/dev/null
  "$kiln" tensor make "${m}_x.pb" -o "${m}_x.bin" >/dev/null
  "$kiln" tensor make --fill 1 --shape 1,8 --name mask -o "${m}_mask.pb" >/dev/null
  "$kiln" tensor make "${m}_mask.pb" -o "${m}_mask.bin" >/dev/null
  "$kiln" run "$models/$m.onnxtxt" --input "x=${m}_x.pb" --input "mask=${m}_mask.pb" \
    --output-dir "${m}_ref" >/dev/null 2>&1
  "$kiln" tensor make "${m}_ref/y.pb" -o "${m}_ref.bin" >/dev/null

  for strategy in ALWC ACWL; do
    out=${m}_$strategy
    name="$m $strategy"
    if ! "$converter" --fmk=ONNX --modelFile="$models/$m.onnxtxt" --outputFile="$out" \
      --configFile="$strategy.cfg" >"$work/stdout" 2>"$work/stderr"; then
      fail "$name: converter_lite converts" "$(tail -3 "$work/stderr")"
      continue
    fi
    pass "$name: converter_lite converts"
    # The .ms: 12 DynamicQuant nodes, one before each weighted MatMul, all QUANT_DYNAMIC.
    "$kiln" inspect "$out.ms" --json >"$work/inspect.json" 2>/dev/null
    nodes=$(python3 - "$work/inspect.json" <<'PY'
import collections, json, sys
count = collections.Counter()
for n in json.load(open(sys.argv[1]))["nodes"]:
    count[(n.get("type"), n.get("quantType"))] += 1
print(count[("DynamicQuant", "QUANT_DYNAMIC")], count[("MatMulFusion", "QUANT_DYNAMIC")])
PY
)
    if [ "$nodes" = "12 12" ]; then pass "$name: 12 DynamicQuant + 12 QUANT_DYNAMIC MatMulFusion"
    else fail "$name: 12 DynamicQuant + 12 QUANT_DYNAMIC MatMulFusion" "got '$nodes'"; fi
    # kiln reads it back in integers: kiln.ms::DynamicQuant and MatMulInteger, not float MatMuls.
    "$kiln" inspect --ir "$out.ms" >"$work/ir.txt" 2>&1
    raised="$(grep -c 'kiln.ms::DynamicQuant(' "$work/ir.txt") $(grep -c '= MatMulInteger(' "$work/ir.txt")"
    if [ "$raised" = "12 12" ]; then pass "$name: read back as 12 DynamicQuant + 12 MatMulInteger"
    else fail "$name: read back as 12 DynamicQuant + 12 MatMulInteger" "got '$raised'"; fi
    bytes=$(stat -c %s "$out.ms")
    pct=$((100 * bytes / fp32Bytes))
    echo "INFO $name: $bytes bytes, $pct% of the float .ms ($fp32Bytes bytes)"
    if [ "$hidden" = 256 ]; then
      if [ $((100 * bytes)) -le $((30 * fp32Bytes)) ]; then pass "$name: .ms <= 30% of float"
      else fail "$name: .ms <= 30% of float" "$bytes of $fp32Bytes bytes ($pct%)"; fi
    fi

    # kiln's run of the .ms against the float model: close, but not float.
    if ! "$kiln" run "$out.ms" --input "x=${m}_x.pb" --input "mask=${m}_mask.pb" \
      --output-dir "${out}_kiln" >"$work/stdout" 2>"$work/stderr"; then
      fail "$name: kiln runs the .ms" "$(tail -2 "$work/stderr")"
      continue
    fi
    "$kiln" tensor make "${out}_kiln/y.pb" -o "${out}_kiln.bin" >/dev/null
    c=$(cosine "${m}_ref.bin" "${out}_kiln.bin")
    echo "INFO $name: kiln .ms vs float ONNX cosine $c"
    if at_least "$c" 0.999; then pass "$name: kiln .ms within cosine 0.999 of float"
    else fail "$name: kiln .ms within cosine 0.999 of float" "cosine $c"; fi
    if at_least "$c" 0.9999999; then fail "$name: int8 rounding shows" "cosine $c: float-like"
    else pass "$name: int8 rounding shows"; fi

    # MindSpore Lite's runtime runs the same file.
    if [ ! -x "$msrun" ]; then
      echo "SKIP $name: the mslite judge ($msrun) is absent"
      continue
    fi
    rm -rf "${out}_judge"
    mkdir -p "${out}_judge"
    if ! bash "$msrun" "$out.ms" "${out}_judge" "${m}_x.bin" "${m}_mask.bin" \
      >"$work/stdout" 2>"$work/stderr"; then
      fail "$name: MindSpore Lite runs the .ms" "$(grep -m3 -iE 'error|fail' "$work/stdout" "$work/stderr")"
      continue
    fi
    pass "$name: MindSpore Lite runs the .ms"
    c=$(cosine "${out}_judge/0.bin" "${out}_kiln.bin")
    echo "INFO $name: MindSpore Lite vs kiln .ms cosine $c"
    if at_least "$c" 0.999; then pass "$name: MindSpore Lite agrees with kiln (cosine >= 0.999)"
    else fail "$name: MindSpore Lite agrees with kiln (cosine >= 0.999)" "cosine $c"; fi
  done
done

finish
