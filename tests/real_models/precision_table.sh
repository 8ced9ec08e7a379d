#!/usr/bin/env bash
# Precision table of the real models' default FP16 conversions: each model goes through
# converter_lite --fp16=on (.ms), atc at its default precision (force_fp16) and atc
# --precision_mode=allow_mix_precision (.om), and `kiln compare` measures every output against the
# ONNX model in kiln's executor, plus the tensor before each Sigmoid/Softmax output (its logits,
# where the FP16 gate applies: a probability's relative error is not a precision measure), and the
# FP32 .om (must_keep_origin_dtype) as the target's own floor. Kept nodes come from the converters'
# "stays fp32" notes. Prints a Markdown table.
# Usage: precision_table.sh BUILD_DIR OUT_DIR [--update-doc docs/accuracy_notes.md docs/accuracy.md]
#   OUT_DIR is tests/real_models' output folder (OUT_DIR/models/NAME.onnx, OUT_DIR/NAME/input.*.pb).
#   --update-doc replaces the table between each doc's precision-table markers instead of printing it
#   (accuracy_notes.md is the hand-kept part scripts/accuracy_report.sh appends to accuracy.md).
set -euo pipefail
build=$(realpath "$1")
out=$(realpath "$2")
docs=()
if [ "${3:-}" = --update-doc ]; then docs=("${@:4}"); fi
kiln="$build/tools/kiln"
here=$(cd "$(dirname "$0")" && pwd)
[ -d "$out/models" ] || { echo "no $out/models: run ctest -R real_models first" >&2; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name | input shapes for the converters (dynamic models) | ONNX input name=file stem, ...
models=(
  "ppocr_det|x:1,3,640,640|x=x"
  "ppocr_rec|x:1,3,48,320|x=x"
  "ppocr_cls|x:1,3,48,192|x=x"
  "oww_embedding|input_1:1,76,32,1|input_1=input_1"
  "oww_melspectrogram|input:1,1280|input=input"
  "oww_hey_jarvis||x.1=x.1"
  "oww_timer||onnx::Flatten_0=onnx__Flatten_0"
  "silero_vad_v5|input:1,512;state:2,1,128|input=input,state=state,sr=sr"
  "silero_vad_legacy|input:1,512;h:2,1,64;c:2,1,64|input=input,sr=sr,h=h,c=c"
  "isnet_fp16||input=input"
  "isnet_quint8||input=input"
)
only=${PRECISION_TABLE_MODELS:-} # space-separated subset, for a quick look

# Output rows of `kiln compare --json`: name cosine mre (names may hold blanks: tab-separated).
metrics() {
  python3 -c 'import json,sys
for o in json.load(sys.stdin): print(o["output"], "%.8f" % o["cosine"], o["mean_relative_error"], sep="\t")'
}
# "output pre" for each output a Sigmoid/Softmax makes, pre being the tensor before it.
preActivations() {
  # An NHWC .ms ends in Transpose(Sigmoid(pre)): the pair is (output, pre); with one channel (the
  # segmentation and detection maps here) both layouts hold the same element order.
  "$kiln" inspect --ir "$1" | awk '
    match($0, /^ *%[^:]*:/) {
      out = substr($0, RSTART, RLENGTH); sub(/^ *%/, "", out); sub(/:$/, "", out)
      if (match($0, /= (Sigmoid|Softmax)\(%[^),]*/)) {
        arg = substr($0, RSTART, RLENGTH); sub(/^[^%]*%/, "", arg); act[out] = arg; print out, arg
      } else if (match($0, /= Transpose\(%[^),]*/)) {
        arg = substr($0, RSTART, RLENGTH); sub(/^[^%]*%/, "", arg)
        if (arg in act) print out, act[arg]
      }
    }'
}
# Cosine and MRE of one intermediate tensor of two models: REF REF_TENSOR MODEL TENSOR INPUTS...
preMetrics() {
  local ref=$1 refTensor=$2 model=$3 tensor=$4
  shift 4
  [ -n "$tensor" ] || return 0
  rm -rf "$work/ref" "$work/cand"
  "$kiln" run "$ref" "$@" --capture "$refTensor" --output-dir "$work/ref" > /dev/null 2>&1 || return 0
  "$kiln" run "$model" "$@" --capture "$tensor" --output-dir "$work/cand" > /dev/null 2>&1 || return 0
  python3 "$here/tensor_metrics.py" "$work"/ref/intermediates/*.pb "$work"/cand/intermediates/*.pb
}
# A long kept list (one entry per quantized conv, say) as its count and first three entries.
shortList() {
  awk -v l="$1" 'BEGIN { n = split(l, a, "; ");
    if (n <= 6) print l; else printf "%d nodes: %s; %s; %s; ...\n", n, a[1], a[2], a[3] }'
}
pct() { awk -v v="$1" 'BEGIN {printf "%.3f%%", v * 100}'; }
gate() { # cosine mre -> yes/no against cosine >= 0.9999 and MRE <= 0.5%
  awk -v c="$1" -v m="$2" 'BEGIN {print (c >= 0.9999 && m <= 0.005) ? "yes" : "**no**"}'
}

table() {
echo "| model | artifact | output | cosine | MRE | pre-activation (cosine, MRE) | gate | kept fp32 |"
echo "|---|---|---|---|---|---|---|---|"
for entry in "${models[@]}"; do
  IFS='|' read -r name shapes feeds <<< "$entry"
  if [ -n "$only" ] && [[ " $only " != *" $name "* ]]; then continue; fi
  onnx="$work/$name.onnx"
  cp "$out/models/$name.onnx" "$onnx"
  inputs=()
  IFS=',' read -ra pairs <<< "$feeds"
  for p in "${pairs[@]}"; do inputs+=(--input "${p%%=*}=$out/$name/input.${p#*=}.pb"); done
  # Outputs that a Sigmoid/Softmax makes, with the tensor before it: "output pre".
  pre=$(preActivations "$onnx")
  lite=(--fmk=ONNX "--modelFile=$onnx" --fp16=on)
  atc=(--framework=5 "--model=$onnx" --soc_version=Ascend310P3 --log=info)
  if [ -n "$shapes" ]; then lite+=("--inputShape=$shapes"); atc+=("--input_shape=$shapes"); fi
  variants=("ms --fp16=on|ms|")
  variants+=("om default (force_fp16)|om|")
  variants+=("om allow_mix_precision|om|--precision_mode=allow_mix_precision")
  variants+=("om fp32 (must_keep_origin_dtype)|om|--precision_mode=must_keep_origin_dtype")
  for v in "${variants[@]}"; do
    IFS='|' read -r label kind flag <<< "$v"
    base="$work/${name}_$kind"
    if [ "$kind" = ms ]; then
      "$build/tools/converter_lite" "${lite[@]}" "--outputFile=$base" > "$base.log" 2>&1 || {
        echo "| $name | $label | — | conversion failed: $(grep -m1 -o 'K[0-9]*.*' "$base.log" | cut -c1-80) |||||"
        continue
      }
    else
      # shellcheck disable=SC2086
      "$build/tools/atc" "${atc[@]}" "--output=$base" $flag > "$base.log" 2>&1 || {
        echo "| $name | $label | — | conversion failed: $(grep -m1 -o 'K[0-9]*.*' "$base.log" | cut -c1-80) |||||"
        continue
      }
    fi
    kept=$(grep -o "node '[^']*' ([A-Za-z]*) stays fp32: [a-z ]*" "$base.log" |
      grep -v "graph output" | sed "s/node '\([^']*\)' (\([A-Za-z]*\)).*/\1 (\2)/" | sort -u |
      paste -sd ';' | sed 's/;/; /g' || true)
    [ -z "$kept" ] && kept="—"
    kept=$(shortList "$kept")
    [ "$kind" = ms ] && kept="— (weights only)"
    outs=$("$kiln" compare "$onnx" "$base.$kind" "${inputs[@]}" --json 2>/dev/null | metrics || true)
    while IFS=$'\t' read -r tensor cos mre; do
      [ -z "$tensor" ] && continue
      preName=$(awk -v o="$tensor" '$1 == o {print $2}' <<< "$pre")
      preCell="—"
      gcos=$cos gmre=$mre
      if [ -n "$preName" ]; then
        # The artifact's own name for the activation's input (fusions and casts rename it).
        candPre=$(preActivations "$base.$kind" | awk -v o="$tensor" '$1 == o {print $2}')
        row=$(preMetrics "$onnx" "$preName" "$base.$kind" "$candPre" "${inputs[@]}")
        if [ -n "$row" ]; then
          read -r pcos pmre <<< "$row"
          preCell="$preName: $pcos, $(pct "$pmre")"
          gmre=$pmre # the MRE gate applies to the logits; cosine to every output
          gcos=$(awk -v a="$cos" -v b="$pcos" 'BEGIN {print (a < b) ? a : b}')
        else
          preCell="$preName: not matched"
        fi
      fi
      shown=$tensor
      [ ${#shown} -gt 24 ] && shown="${shown:0:21}..."
      echo "| $name | $label | $shown | $cos | $(pct "$mre") | $preCell | $(gate "$gcos" "$gmre") | $kept |"
    done <<< "$outs"
    rm -f "$base.$kind"
  done
  rm -f "$onnx"
done
}

if [ ${#docs[@]} -eq 0 ]; then
  table
  exit 0
fi
table > "$work/table.md"
begin='<!-- precision-table begin -->'
end='<!-- precision-table end -->'
for doc in "${docs[@]}"; do
  grep -qF "$begin" "$doc" || { echo "$doc has no '$begin' marker" >&2; exit 1; }
  awk -v b="$begin" -v e="$end" -v t="$work/table.md" '
    $0 == b { print; while ((getline line < t) > 0) print line; skip = 1; next }
    $0 == e { skip = 0 }
    !skip' "$doc" > "$work/doc.md"
  cat "$work/doc.md" > "$doc"
  echo "updated $doc"
done
