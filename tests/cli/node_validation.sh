#!/usr/bin/env bash
# Malformed nodes (tests/cli/models/invalid_nodes) are refused at import by the node-validation
# layer, with one coded line and no output, by every front-end: `kiln check --target om|ms`, atc
# modes 0 and 3, converter_lite. Each model here once crashed (SIGSEGV/SIGFPE) one of them or
# was written out as an .om/.ms that later crashed `kiln run`.
# Usage: tests/cli/node_validation.sh KILN ATC CONVERTER_LITE SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 4 "KILN ATC CONVERTER_LITE SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
atc=$2
converter=$3
src=$4
makeWork kiln-node-validation "${5:-}"
cd "$work" || exit 2
cp "$src"/tests/cli/models/invalid_nodes/* .

attributeFix="set the attribute as the ONNX operator specification defines it, in the exporter"
arityFix="give the node the inputs and outputs its ONNX operator schema names; an optional one may be left out, a required one may not be empty"

# expect NAME STATUS STREAM LINE CMD...: the command exits with STATUS, STREAM (stdout/stderr)
# holds LINE as one whole line, and no out* file is left behind.
expect() {
  local name=$1 want=$2 stream=$3 line=$4
  shift 4
  timeout 60 "$@" >"$work/stdout" 2>"$work/stderr"
  local status=$? problem=""
  [ "$status" -eq "$want" ] || problem="exit $status, not $want"
  grep -qxF -- "$line" "$work/$stream" || problem="${problem:+$problem; }$stream lacks '$line'"
  [ -z "$(ls out* 2>/dev/null)" ] || problem="${problem:+$problem; }left $(ls out*)"
  if [ -z "$problem" ]; then pass "$name"; else fail "$name" "$problem"; fi
  rm -rf out*
}

# refusedEverywhere MODEL CODE MESSAGE FIX: MESSAGE is what follows "MODEL.onnxtxt: graph 'MODEL': ".
refusedEverywhere() {
  local model=$1 code=$2 message=$3 fix=$4
  local file=$model.onnxtxt
  local text="$file: graph '$model': $message"
  expect "$model: kiln check --target om" 1 stderr "kiln: error $code: $text. Fix: $fix" \
    "$kiln" check "$file" --target om
  expect "$model: kiln check --target ms" 1 stderr "kiln: error $code: $text. Fix: $fix" \
    "$kiln" check "$file" --target ms
  expect "$model: kiln lower --target om" 1 stderr "kiln: error $code: $text. Fix: $fix" \
    "$kiln" lower "$file" --target om
  for mode in 0 3; do
    expect "$model: atc --mode=$mode (E10041)" 255 stdout "        $text" \
      "$atc" --mode=$mode --framework=5 --model="$file" --output=out --soc_version=Ascend310P3
    grep -qF "Invalid_Argument_Model(E10041): Failed to load the model from $file." "$work/stdout" ||
      fail "$model: atc --mode=$mode E10041 line" "no E10041 line"
  done
  expect "$model: converter_lite" 56 stderr "converter_lite: error $code (-200): $text. Fix: $fix" \
    "$converter" --fmk=ONNX --modelFile="$file" --outputFile=out
}

refusedEverywhere conv_stride0 K2013 \
  "node producing 'y' (Conv): attribute 'strides' has 0 at axis 1; it must be >= 1" "$attributeFix"
refusedEverywhere conv_stride_neg K2013 \
  "node producing 'y' (Conv): attribute 'strides' has -1 at axis 0; it must be >= 1" "$attributeFix"
refusedEverywhere conv_dilation0 K2013 \
  "node producing 'y' (Conv): attribute 'dilations' has 0 at axis 0; it must be >= 1" "$attributeFix"
refusedEverywhere conv_kernel0 K2013 \
  "node producing 'y' (Conv): attribute 'kernel_shape' has 0 at axis 0; it must be >= 1" \
  "$attributeFix"
refusedEverywhere maxpool_kernel40 K2013 \
  "node producing 'y' (MaxPool): attribute 'kernel_shape' has 40 entries for 2 spatial axes" \
  "$attributeFix"
refusedEverywhere scan_no_body K2013 \
  "node producing 't' (Scan): has no attribute 'body', which Scan (opset 17) requires" \
  "$attributeFix"
refusedEverywhere batchnorm_no_params K2015 \
  "node producing 'y' (BatchNormalization): has 1 input, but BatchNormalization (opset 17) takes 5 inputs" \
  "$arityFix"
refusedEverywhere conv_empty_weight K2015 \
  "node producing 'y' (Conv): input #1 is empty, but Conv (opset 17) requires it" "$arityFix"

# An axis only inference can judge (LayerNormalization reads Relu's output, whose rank no
# value_info declares): ONNX's inference used to index dims by it (SIGSEGV everywhere); now the
# same family check runs inside inference and again on the inferred ranks.
model=layernorm_axis_m99
text="pass settle-shapes: graph '$model': node producing 'y' (LayerNormalization): attribute 'axis' is -99, outside [-3, 2] for the rank-3 input. Fix: $attributeFix"
expect "$model: kiln check --target om" 1 stdout "problem: K2013: $text" "$kiln" check $model.onnxtxt --target om
expect "$model: kiln check --target ms" 1 stdout "problem: K2013: $text" "$kiln" check $model.onnxtxt --target ms
for mode in 0 3; do
  # ATC fails such a node in InferShape: E19999 (an inner error) with kiln's message.
  expect "$model: atc --mode=$mode (E19999)" 255 stdout "E19999: Inner Error!" \
    "$atc" --mode=$mode --framework=5 --model=$model.onnxtxt --output=out --soc_version=Ascend310P3
  grep -qF " ${text%%. Fix: *}" "$work/stdout" || fail "$model: atc --mode=$mode message" "no '${text%%. Fix: *}'"
done
expect "$model: converter_lite" 56 stderr "converter_lite: error K2013 (-200): $text" \
  "$converter" --fmk=ONNX --modelFile=$model.onnxtxt --outputFile=out

# The .om and .ms readers run the same layer: an .om the old atc wrote for a BatchNormalization
# without its parameters (`kiln run` crashed on it), an .ms the old converter_lite wrote with
# dilation 0.
expect "batchnorm_no_params.om: kiln check" 1 stderr \
  "kiln: error K8001: batchnorm_no_params.om: graph 'o_batchnorm_no_params': node 'BatchNormalization_0' (BatchNormalization): input #1 is empty, but BatchNormalization (opset 18) requires it. Fix: re-convert the model with kiln's atc, which refuses such nodes" \
  "$kiln" check batchnorm_no_params.om --target om
expect "conv_dilation0.ms: kiln convert --to onnx" 1 stderr \
  "kiln: error K7001: conv_dilation0.ms: graph 'conv_dilation0': node 'Conv2DFusion_2/Conv_6' (Conv): attribute 'dilations' has 0 at axis 0; it must be >= 1. Fix: pass a complete .ms file written by converter_lite or kiln" \
  "$kiln" convert conv_dilation0.ms --to onnx -o out.onnx

finish
