#!/usr/bin/env bash
# Runs one libFuzzer target for a fixed time on its seed corpus (new inputs go to a work folder,
# never into the source tree) and prints one line: executions, coverage, crashes. Exit 0 when it
# ran clean, 1 on a crash / sanitizer report / timeout / out-of-memory (the input is kept under
# WORK/artifacts and printed), 77 when SKIP_REASON is given (ctest shows the test as skipped).
# Usage: run_one.sh FUZZER CORPUS WORK SECONDS [SKIP_REASON]
set -uo pipefail
bin=$1 corpus=$2 work=$3 seconds=$4 skip=${5:-}
if [ -n "$skip" ]; then
  echo "SKIP: $skip"
  exit 77
fi
name=$(basename "$bin")
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
# A keyword dictionary for the text formats: tests/fuzz/dict/<target>.dict.
dict=$(dirname "$corpus")/../dict/$(basename "$corpus").dict
dictFlag=()
[ -f "$dict" ] && dictFlag=(-dict="$dict")
# -timeout: one input taking this long is a hang. -rss_limit_mb also caps a single allocation.
# Kernels refuse buffers over 64 MiB (K5004) here: a few-KB model may legitimately ask for GBs of
# intermediates, which would trip the RSS limit below without being a bug.
export KILN_MAX_BUFFER_BYTES="${KILN_MAX_BUFFER_BYTES:-67108864}"
# A fixed seed and a run cap keep CI's mutation sequence the same from run to run, so a CI result
# is repeatable (KILN_FUZZ_SEED / KILN_FUZZ_RUNS change them; the ASan+UBSan runs use neither).
"$bin" "$work/corpus" "$corpus" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 \
  -seed="${KILN_FUZZ_SEED:-1}" -runs="${KILN_FUZZ_RUNS:-20000}" \
  "${dictFlag[@]}" -print_final_stats=1 -artifact_prefix="$work/artifacts/" >"$work/log" 2>&1
rc=$?
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
last=$(grep -E '^#[0-9]+' "$work/log" | tail -1)
cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
# slow-unit-* files only note inputs slower than 10 s (a loaded machine makes many); failures are
# crash-*, leak-*, timeout-*, oom-*.
artifacts=$(find "$work/artifacts" -type f ! -name 'slow-unit-*' | wc -l)
if [ "$rc" -eq 0 ] && [ "$artifacts" -eq 0 ]; then
  echo "$name: ${seconds}s, ${execs:-?} execs, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, 0 crashes"
  exit 0
fi
echo "$name: FAILED (exit $rc, $artifacts artifact(s)); log: $work/log"
grep -E 'ERROR|SUMMARY|runtime error|Deadly|timeout|out-of-memory' "$work/log" | head -20
for f in "$work"/artifacts/*; do
  [ -f "$f" ] || continue
  case $(basename "$f") in slow-unit-*) continue ;; esac
  echo "--- $f ($(stat -c %s "$f") bytes), base64:"
  head -c 4096 "$f" | base64 -w 120
done
exit 1
