#!/usr/bin/env bash
# Converts the bundled sample model and shows what was written.
set -euo pipefail
build=${BUILD_DIR:-build}
out="$build/demo"
mkdir -p "$out"
kiln="$build/tools/kiln"
"$kiln" convert samples/tiny_cnn.onnxtxt --to onnx -o "$out/tiny_cnn.onnx"
echo "--- $out/tiny_cnn.onnx"
"$kiln" inspect "$out/tiny_cnn.onnx"
ls -l "$out"
