#!/usr/bin/env bash
# Transformer models through both converters: a BERT-like encoder from standard ops (opset 17), a
# decoder step with a KV cache (RMSNormalization + RotaryEmbedding, attention from standard ops,
# opset 23), the same step with the Attention and Swish ops (opset 24), and the other new ops with
# non-default attributes (GroupNormalization, Gelu, Mish, grouped-query Attention, interleaved
# RotaryEmbedding). Each converts with converter_lite and with atc --soc_version=Ascend310P3
# (fp32), and the .ms / .om run in kiln must match the ONNX model run by kiln (which runs the new
# ops with their own kernels): cosine >= 0.99999 and SQNR >= 80 dB (relative RMS error <= 1e-4)
# for every output. The fp16 .om (atc's default precision) must not pass that bar, so the check
# can tell.
# Usage: tests/cli/transformer.sh KILN CONVERTER_LITE ATC SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 4 "KILN CONVERTER_LITE ATC SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
converter=$2
atc=$3
src=$4
makeWork kiln-transformer "${5:-}"
cd "$work" || exit 2
models=$src/tests/cli/models

# below_bar REF MODEL: the outputs of MODEL outside the fp32 bar of REF's ("" when none).
below_bar() {
  if ! "$kiln" compare "$1" "$2" --json >"$work/stdout" 2>"$work/stderr"; then
    echo "kiln compare failed"
    return
  fi
  python3 - "$work/stdout" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
bad = [f"{r['output']}: cosine {r['cosine']:.8f}, sqnr {r['sqnr_db']} dB" for r in rows
       if r["cosine"] < 0.99999 or (r["sqnr_db"] != "inf" and r["sqnr_db"] < 80)]
print("; ".join(bad) if bad else ("" if rows else "no outputs"))
PY
}

# matches NAME REF MODEL: every output of MODEL is within the fp32 bar of REF's.
matches() {
  local bad
  bad=$(below_bar "$2" "$3")
  if [ -z "$bad" ]; then pass "$1"; else fail "$1" "$bad"; fi
}

for m in bert_encoder decoder_step decoder_step_ops new_ops; do
  if "$converter" --fmk=ONNX --modelFile="$models/$m.onnxtxt" --outputFile="$m" \
    >"$work/stdout" 2>"$work/stderr" && [ -s "$m.ms" ]; then
    matches "$m: converter_lite .ms matches" "$models/$m.onnxtxt" "$m.ms"
  else fail "$m: converter_lite converts" "exit or no $m.ms"; fi
  if "$atc" --framework=5 --model="$models/$m.onnxtxt" --output="$m" --soc_version=Ascend310P3 \
    --precision_mode=force_fp32 >"$work/stdout" 2>"$work/stderr" && [ -s "$m.om" ]; then
    matches "$m: atc .om (fp32) matches" "$models/$m.onnxtxt" "$m.om"
    judgedByGe "$m: the .om passes the om judge" "$src" "$m.om"
  else fail "$m: atc converts" "exit or no $m.om"; fi
done

# The standard-op attention and the Attention op compute the same step (their causal masks are
# -10000 and -inf, SiLU and Swish): the Attention kernel checked against standard ops.
matches "decoder_step: Attention op agrees with standard-op attention" \
  "$models/decoder_step.onnxtxt" "$models/decoder_step_ops.onnxtxt"

# The bar rejects fp16: atc's default precision for the encoder falls below it.
"$atc" --framework=5 --model="$models/bert_encoder.onnxtxt" --output=fp16 \
  --soc_version=Ascend310P3 >"$work/stdout" 2>"$work/stderr"
bad=$(below_bar "$models/bert_encoder.onnxtxt" fp16.om)
case "$bad" in
  *"sqnr"*) pass "the fp32 bar rejects the fp16 .om" ;;
  *) fail "the fp32 bar rejects the fp16 .om" "got '$bad'" ;;
esac

# The expansion leaves no new op behind: the lowered graphs hold only standard target ops.
for m in decoder_step_ops new_ops; do
  if ! "$kiln" opt "$models/$m.onnxtxt" --pipeline default >"$work/stdout" 2>"$work/stderr"; then
    fail "$m: expand-new-ops leaves no new op" "kiln opt failed"
  elif grep -qE "= (Attention|RMSNormalization|RotaryEmbedding|GroupNormalization|Swish|Gelu|Mish)\(" \
    "$work/stdout"; then
    fail "$m: expand-new-ops leaves no new op" "$(grep -cE '= (Attention|RMSNormalization|RotaryEmbedding|GroupNormalization|Swish|Gelu|Mish)\(' "$work/stdout") left"
  else pass "$m: expand-new-ops leaves no new op"; fi
done

finish
