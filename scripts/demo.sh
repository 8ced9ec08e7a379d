#!/usr/bin/env bash
# Converts the bundled sample model to .ms (converter_lite) and .om (atc), checks both against the
# original with kiln compare, and shows what was written.
set -euo pipefail
build=${BUILD_DIR:-build}
out="$build/demo"
mkdir -p "$out"
kiln="$build/tools/kiln"
"$kiln" convert samples/tiny_cnn.onnxtxt --to onnx -o "$out/tiny_cnn.onnx"
echo "--- converter_lite → $out/tiny_cnn.ms"
"$build/tools/converter_lite" --fmk=ONNX --modelFile="$out/tiny_cnn.onnx" --outputFile="$out/tiny_cnn"
"$kiln" inspect "$out/tiny_cnn.ms"
echo "--- atc → $out/tiny_cnn.om"
"$build/tools/atc" --framework=5 --model="$out/tiny_cnn.onnx" --output="$out/tiny_cnn" --soc_version=Ascend310P3
"$kiln" inspect "$out/tiny_cnn.om"
for artifact in tiny_cnn.ms tiny_cnn.om; do
  echo "--- kiln compare tiny_cnn.onnx $artifact"
  "$kiln" compare "$out/tiny_cnn.onnx" "$out/$artifact"
done
ls -l "$out"
