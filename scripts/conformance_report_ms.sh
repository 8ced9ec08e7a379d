#!/usr/bin/env bash
# Regenerates the "Via ms" section of docs/conformance.md and tests/conformance/expected_pass_ms.txt
# from one `kiln conformance --via ms --pipeline default` run (lower to .ms, serialize, read back).
# Usage: scripts/conformance_report_ms.sh [BUILD_DIR]   (scripts/conformance_report.sh calls it)
set -euo pipefail
build=${1:-build}
data=/usr/share/libonnx-testdata/data
doc=docs/conformance.md
out=$(mktemp)
expected=$(mktemp)
"$build/tools/kiln" conformance --via ms --pipeline default -j "$(nproc)" --write-expected "$expected" \
  "$data/node" "$data/pytorch-converted" "$data/pytorch-operator" "$data/simple" > "$out" || true
{
  echo "# Cases expected to pass \`kiln conformance --via ms --pipeline default\` (regenerate with scripts/conformance_report_ms.sh)."
  grep -v '^#' "$expected"
} > tests/conformance/expected_pass_ms.txt
section=$(mktemp)
{
  echo "## Via ms"
  echo
  echo "\`kiln conformance --via ms --pipeline default\`: each model goes through the default pipeline, is lowered"
  echo "to MindSpore Lite ops and serialized as a \`.ms\` FlatBuffer (\`buildMsBuffer\`), read back (\`readMsBuffer\`)"
  echo "and run. Cases whose ops do not lower (K7101/K7102) are skips that name the ops. The cases that pass are"
  echo "listed in \`tests/conformance/expected_pass_ms.txt\`; the \`conformance_ms\` ctest fails if any of them stops"
  echo "passing. Tolerances as above."
  echo
  echo "| suite | cases | passed | failed | skipped (do not lower) |"
  echo "|---|---|---|---|---|"
  for suite in node pytorch-converted pytorch-operator simple; do
    total=$(grep -cE "^(PASS|FAIL|SKIP) $suite/" "$out" || true)
    p=$(grep -cE "^PASS $suite/" "$out" || true)
    f=$(grep -cE "^FAIL $suite/" "$out" || true)
    s=$(grep -cE "^SKIP $suite/" "$out" || true)
    echo "| $suite | $total | $p | $f | $s |"
  done
  echo
  echo "Closing line: \`$(tail -n 1 "$out")\`"
  echo
  echo "### Cases that lower but fail"
  echo
  if grep -qE "^FAIL " "$out"; then
    echo "Every one of them passes via onnx (a regression of the writer or the reader)."
    echo
    echo "| case | reason |"
    echo "|---|---|"
    grep -E "^FAIL " "$out" | sed -E 's/^FAIL ([^:]+): (.*)$/| \1 | \2 |/' | sed -E 's/\. Fix: [^|]*\|$/ |/'
  else
    echo "None: every case that passes via onnx and lowers passes via ms."
  fi
  echo
  echo "### Cases that do not lower"
  echo
  echo "| case | reason |"
  echo "|---|---|"
  { grep -E "^SKIP " "$out" || true; } | sed -E 's/^SKIP ([^:]+): (.*)$/| \1 | \2 |/' \
    | sed -E 's/does not lower: //; s/\. Fix: [^|]*\|$/ |/'
} > "$section"
# Replace the old section in place; a new one goes before "## Via om" (whose script rewrites from
# its heading to the end of the file), else at the end.
awk -v section="$section" '
  function emit() { while ((getline line < section) > 0) print line; written = 1 }
  /^## Via ms/ { skipping = 1; next }
  skipping && /^## / { skipping = 0 }
  skipping { next }
  /^## Via om/ && !written { emit(); print "" }
  { print }
  END { if (!written) { print ""; emit() } }
' "$doc" > "$doc.tmp"
mv "$doc.tmp" "$doc"
rm -f "$out" "$expected" "$section"
echo "wrote the via ms section of $doc and tests/conformance/expected_pass_ms.txt"
