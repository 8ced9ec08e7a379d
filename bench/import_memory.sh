#!/usr/bin/env bash
# Peak RSS of importing big ONNX models vs a tiny one (`kiln inspect` in a child, wait4 ru_maxrss).
# Builds nothing: needs BUILD_DIR/tools/kiln and BUILD_DIR/tests/memory/import_memory_check.
# Usage: bench/import_memory.sh [BUILD_DIR] [SIZE_MIB...]   (default sizes: 100 1000)
set -euo pipefail
build=${1:-build}
shift || true
sizes=("$@")
if [ ${#sizes[@]} -eq 0 ]; then sizes=(100 1000); fi
check="$build/tests/memory/import_memory_check"
kiln="$build/tools/kiln"
for tool in "$check" "$kiln"; do
  if [ ! -x "$tool" ]; then echo "missing $tool: build first (make build)" >&2; exit 1; fi
done
work="$(realpath -m "$build")/bench/import_memory"
echo "kernel $(uname -r), $(nproc) CPUs, $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?')"
for size in "${sizes[@]}"; do
  echo "--- ${size} MiB initializer"
  # 1.0: report the numbers even if a size would fail the ctest's 10% limit.
  "$check" "$kiln" "$work" --size-mb "$size" --runs 3 --max-fraction 1.0 --also-convert
done
