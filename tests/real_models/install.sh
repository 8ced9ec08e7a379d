#!/usr/bin/env bash
# Installs the pinned npm packages (the real models and ONNX Runtime, --ignore-scripts) into
# WORKDIR/npm once per package-lock.json. run.sh calls it; CI calls it during the build, when the
# network is all it waits for (.ci/run).
# Usage: install.sh WORKDIR
set -euo pipefail
work=$(realpath -m "$1")
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
