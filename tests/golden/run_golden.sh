#!/usr/bin/env bash
# Golden tests: each tests/golden/<pass>/*.onnxtxt holds `# RUN:` lines (%kiln, %FileCheck, %not,
# %s are substituted) and `# CHECK` lines that FileCheck matches against the command's output.
# tests/golden/lower-{ms,om}/<family>*.onnxtxt hold `kiln lower` tests, one file per op family.
# Usage: run_golden.sh KILN FILECHECK GOLDEN_DIR NOT
set -uo pipefail
kiln=$1
filecheck=$2
dir=$3
not=$4
passed=0
failed=0
while IFS= read -r -d '' test; do
  runs=$(sed -n 's/^# RUN: //p' "$test")
  if [ -z "$runs" ]; then
    echo "FAIL $test: no RUN line"
    failed=$((failed + 1))
    continue
  fi
  ok=1
  while IFS= read -r run; do
    cmd=${run//%kiln/$kiln}
    cmd=${cmd//%FileCheck/$filecheck}
    cmd=${cmd//%not/$not}
    cmd=${cmd//%s/$test}
    if ! output=$(bash -o pipefail -c "$cmd" 2>&1); then
      echo "FAIL ${test#$dir/}: $run"
      echo "$output" | sed 's/^/    /'
      ok=0
    fi
  done <<< "$runs"
  if [ $ok = 1 ]; then passed=$((passed + 1)); echo "PASS ${test#$dir/}"; else failed=$((failed + 1)); fi
done < <(find "$dir" -name '*.onnxtxt' -print0 | sort -z)
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
