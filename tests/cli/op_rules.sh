#!/usr/bin/env bash
# One coded outcome per bad input, whichever front-end meets it (docs/ops.md): an attribute of the
# wrong kind is K2013 for kiln run/check/lower, converter_lite and atc (the .ms path used to abort
# with exit 134 and atc to succeed with the default); an empty keep_dtype file is K4201 for atc and
# `kiln opt` alike.
# Usage: tests/cli/op_rules.sh KILN ATC CONVERTER_LITE SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 4 "KILN ATC CONVERTER_LITE SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
atc=$2
converter=$3
src=$4
makeWork kiln-op-rules "${5:-}"
cd "$work" || exit 2
models=$src/tests/cli/models

# refused NAME CODE TEXT CMD...: the command exits non-zero but not by a signal (atc exits 255 as
# ATC does; anything else above 128 is a crash), prints CODE and TEXT, and leaves no output file.
refused() {
  local name=$1 code=$2 text=$3
  shift 3
  "$@" >"$work/stdout" 2>"$work/stderr"
  local status=$? problem=""
  [ "$status" -ne 0 ] || problem="exit 0"
  [ "$status" -lt 128 ] || [ "$status" -eq 255 ] || problem="${problem:+$problem; }exit $status (a crash)"
  cat "$work/stdout" "$work/stderr" >"$work/all"
  grep -qF "$code" "$work/all" || problem="${problem:+$problem; }no $code"
  grep -qF "$text" "$work/all" || problem="${problem:+$problem; }no '$text'"
  [ -z "$(ls out* 2>/dev/null)" ] || problem="${problem:+$problem; }left $(ls out*)"
  if [ -z "$problem" ]; then pass "$name"; else fail "$name" "$problem"; fi
  rm -rf out*
}

bad=$models/layernorm_float_axis.onnxtxt
kind="attribute 'axis' has kind FLOAT, but LayerNormalization (opset 17) declares it INT"
refused "kiln check: float axis" K2013 "$kind" "$kiln" check "$bad"
refused "kiln check --target ms: float axis" K2013 "$kind" "$kiln" check "$bad" --target ms
refused "kiln check --target om: float axis" K2013 "$kind" "$kiln" check "$bad" --target om
refused "kiln lower --target ms: float axis" K2013 "$kind" "$kiln" lower "$bad" --target ms
refused "kiln lower --target om: float axis" K2013 "$kind" "$kiln" lower "$bad" --target om
refused "kiln convert --to ms: float axis" K2013 "$kind" "$kiln" convert "$bad" --to ms -o out.ms
refused "converter_lite: float axis" K2013 "$kind" \
  "$converter" --fmk=ONNX --modelFile="$bad" --outputFile=out
refused "atc: float axis" K2013 "$kind" \
  "$atc" --framework=5 --model="$bad" --output=out --soc_version=Ascend310P3

# An op newer than the onnx library (RMSNormalization, opset 23) is checked against kiln's own
# declaration of its attributes, the same way.
bad=$models/rmsnorm_float_axis.onnxtxt
kind="attribute 'axis' has kind FLOAT, but RMSNormalization (opset 23) declares it INT"
refused "kiln check: RMSNormalization float axis" K2013 "$kind" "$kiln" check "$bad"
refused "converter_lite: RMSNormalization float axis" K2013 "$kind" \
  "$converter" --fmk=ONNX --modelFile="$bad" --outputFile=out
refused "atc: RMSNormalization float axis" K2013 "$kind" \
  "$atc" --framework=5 --model="$bad" --output=out --soc_version=Ascend310P3

printf '\n  \n' >empty_keep.cfg
ok=$models/resize_third.onnxtxt
refused "atc --keep_dtype empty file" K4201 "holds no entry" \
  "$atc" --framework=5 --model="$ok" --output=out --soc_version=Ascend310P3 \
  --precision_mode=force_fp16 --keep_dtype=empty_keep.cfg
refused "kiln opt --keep-dtype-file empty file" K4201 "holds no entry" \
  "$kiln" opt "$ok" --precision-mode force_fp16 --keep-dtype-file empty_keep.cfg -o out.onnx

finish
