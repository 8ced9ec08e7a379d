#!/usr/bin/env bash
# A decoder step with 4-bit MatMulNBits weights (nbits_decoder.mjs, seeded) through kiln: the ONNX
# model in kiln's executor and converter_lite's .ms (weights kept 4-bit: bit-packed, one quant
# param per block) in kiln's executor, each against ONNX Runtime on the same step; converter_lite's
# peak RSS must stay below the model's size with NBITS_CHECK_RSS=1 (its weights are mapped, never
# widened to float32).
# With MSLITE_JUDGE=DIR (the MindSpore Lite judge folder holding run-msrun.sh) the .ms also runs in
# the real runtime. ctest runs a 2-layer model; bench/nbits_decoder.sh the 1.5B-parameter one.
# Usage: nbits_decoder.sh TOOLS_DIR NODE_MODULES WORKDIR [nbits_decoder.mjs write options...]
# Exits 77 (skipped) without node or ONNX Runtime.
set -euo pipefail
tools=$(realpath "$1")
modules=$(realpath -m "$2")
work=$(realpath -m "$3")
shift 3
here=$(cd "$(dirname "$0")" && pwd)
gen="$here/nbits_decoder.mjs"
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
[ -d "$modules/onnxruntime-node" ] || { echo "SKIP: onnxruntime-node is not under $modules"; exit 77; }
min_cosine=${NBITS_MIN_COSINE:-0.99999}
max_abs=${NBITS_MAX_ABS:-1e-3}
status=0
fail() { echo "FAIL: $*"; status=1; }

rm -rf "$work"
mkdir -p "$work"
# Peak RSS (kB) and wall time of a command, from GNU time.
timed() {
  local log=$1
  shift
  /usr/bin/time -v -o "$log" "$@"
}
rss() { awk -F': ' '/Maximum resident set size/ {print $2}' "$1"; }
wall() { awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$1"; }

node "$gen" write "$work" "$@"
model_bytes=$(($(stat -c %s "$work/model.onnx") + $(stat -c %s "$work/model.onnx.data")))
timed "$work/ort.time" node "$gen" ort "$work" "$modules" "${NBITS_ORT_THREADS:-1}" "${NBITS_ORT_OPT:-all}"
echo "ONNX Runtime: $(wall "$work/ort.time") wall, peak RSS $(rss "$work/ort.time") kB"

timed "$work/run_onnx.time" "$tools/kiln" run "$work/model.onnx" --input "hidden=$work/hidden.pb" \
  --output-dir "$work/kiln_onnx" >/dev/null
echo "kiln run model.onnx: $(wall "$work/run_onnx.time") wall, peak RSS $(rss "$work/run_onnx.time") kB"
echo -n "kiln (onnx) vs ONNX Runtime: "
node "$gen" compare "$work/kiln_onnx/logits.pb" "$work/ort_logits.pb" "$min_cosine" "$max_abs" ||
  fail "kiln's executor on the ONNX model differs from ONNX Runtime"

timed "$work/convert.time" "$tools/converter_lite" --fmk=ONNX --modelFile="$work/model.onnx" \
  --outputFile="$work/model" >"$work/convert.log" 2>&1 || { cat "$work/convert.log"; fail "converter_lite"; }
convert_kb=$(rss "$work/convert.time")
ms_bytes=$(stat -c %s "$work/model.ms")
[ -f "$work/model.msw" ] && ms_bytes=$((ms_bytes + $(stat -c %s "$work/model.msw")))
echo "converter_lite: $(wall "$work/convert.time") wall, peak RSS $convert_kb kB;" \
  "model.onnx + data $model_bytes bytes, .ms $ms_bytes bytes"
# Held with NBITS_CHECK_RSS=1 (the bench's big model): a small model is below the process's own
# baseline (libraries, ~30 MB).
if [ "${NBITS_CHECK_RSS:-0}" = 1 ]; then
  [ $((convert_kb * 1024)) -lt "$model_bytes" ] ||
    fail "converter_lite's peak RSS $((convert_kb * 1024)) B is not below the model's $model_bytes B"
fi

# Every MatMulNBits weight is a bit-packed 4-bit weight-quant tensor, no float32 copy of it.
layers=$(node -e 'const a = process.argv.slice(1); const i = a.indexOf("--layers"); console.log(i < 0 ? 28 : a[i + 1])' -- "$@")
"$tools/kiln" inspect --ir "$work/model.ms" >"$work/model.ms.txt" 2>&1 || true
"$tools/kiln" lower "$work/model.onnx" --target ms >"$work/lower.txt"
# NBITS_PACKED_WEIGHTS: how many stay 4-bit when not all do (--dq models: the pipeline folds
# DequantizeLinear outputs under 16 MiB into float32 constants).
want_packed=${NBITS_PACKED_WEIGHTS:-$((7 * layers + 1))}
packed=$(grep -c "qweight' i8 .* BITPACKING quant\[[0-9]* x 4 bits\]" "$work/lower.txt" || true)
[ "$packed" -eq "$want_packed" ] ||
  fail "$packed bit-packed 4-bit weights in the .ms, expected $want_packed"
[ -n "${NBITS_PACKED_WEIGHTS:-}" ] || ! grep -q "qweight.* f32 .* const" "$work/lower.txt" ||
  fail "a MatMulNBits weight was widened to float32"

timed "$work/run_ms.time" "$tools/kiln" run "$work/model.ms" --input "hidden=$work/hidden.pb" \
  --output-dir "$work/kiln_ms" >/dev/null
echo "kiln run model.ms: $(wall "$work/run_ms.time") wall, peak RSS $(rss "$work/run_ms.time") kB"
echo -n "kiln (.ms) vs ONNX Runtime: "
node "$gen" compare "$work/kiln_ms/logits.pb" "$work/ort_logits.pb" "$min_cosine" "$max_abs" ||
  fail "the .ms in kiln's executor differs from ONNX Runtime"

if [ -n "${MSLITE_JUDGE:-}" ]; then
  node "$gen" tobin "$work/hidden.pb" "$work/hidden.bin"
  mkdir -p "$work/msrun" # msrun writes into an existing folder
  if timed "$work/msrun.time" "$MSLITE_JUDGE/run-msrun.sh" "$work/model.ms" "$work/msrun" \
    "$work/hidden.bin" >"$work/msrun.log" 2>&1; then
    echo "MindSpore Lite runtime: $(wall "$work/msrun.time") wall, peak RSS $(rss "$work/msrun.time") kB"
    node "$gen" frombin "$work/msrun/0.bin" "$work/ort_logits.pb" "$work/msrun_logits.pb"
    echo -n "MindSpore Lite (.ms) vs ONNX Runtime: "
    node "$gen" compare "$work/msrun_logits.pb" "$work/ort_logits.pb" "$min_cosine" "$max_abs" ||
      fail "the .ms in MindSpore Lite differs from ONNX Runtime"
  else
    tail -5 "$work/msrun.log"
    fail "MindSpore Lite could not run the .ms"
  fi
fi
[ $status -eq 0 ] && echo "PASS nbits_decoder $*"
exit $status
