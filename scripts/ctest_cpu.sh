#!/usr/bin/env bash
# Runs ctest with every test's command wrapped in /usr/bin/time, so each test's CPU time (user + sys of
# the test and all it waited for) is known beside ctest's wall time; prints the tests by CPU seconds.
# The machine may be shared: CPU seconds, unlike wall seconds, barely move with the load.
# Usage: scripts/ctest_cpu.sh BUILD_DIR OUT.tsv [ctest args, e.g. -j2 -R conformance]
# OUT.tsv: test, wall s (ctest's, from LastTest.log), wall s (time's), user s, sys s, cpu s.
# The wrapper goes into BUILD_DIR's generated CTestTestfile.cmake files for this run only (they are put
# back on exit). The unit tests run as four shards of kiln_unit_tests, wrapped like the others.
set -euo pipefail
build=$(realpath "$1")
out=$(realpath -m "$2")
shift 2
times=$(mktemp -d "${TMPDIR:-/tmp}/ctest-cpu-XXXXXX")
mapfile -t files < <(find "$build" -name CTestTestfile.cmake -not -path '*/_deps/*')
for f in "${files[@]}"; do cp -p "$f" "$f.ctest_cpu_saved"; done
restore() { for f in "${files[@]}"; do mv -f "$f.ctest_cpu_saved" "$f"; done; }
trap restore EXIT
for f in "${files[@]}"; do
  sed -i -E "s|^add_test\(\[=\[([^]]+)\]=\] |add_test([=[\1]=] \"/usr/bin/time\" \"-o\" \"$times/\1\" \"-f\" \"%e %U %S\" |" "$f"
done
start=$(date +%s)
rc=0
ctest --test-dir "$build" "$@" || rc=$?
echo "ctest_cpu: ctest took $(($(date +%s) - start)) s of wall time"
restore
trap - EXIT
# ctest's own wall time per test from LastTest.log ("NAME" ... "Test time = S sec").
log=$build/Testing/Temporary/LastTest.log
declare -A wall=()
if [ -f "$log" ]; then
  while IFS=$'\t' read -r name seconds; do wall[$name]=$seconds; done < <(awk '
    /^[0-9]+\/[0-9]+ Test: / { name = $3 }
    /Test time = / { for (i = 1; i <= NF; i++) if ($i == "=") { printf "%s\t%s\n", name, $(i + 1) } }' "$log")
fi
# The header first, then the tests by CPU seconds (sorted with the header, it landed mid-file and the
# total below skipped the first test instead of it).
printf 'test\tctest_wall_s\twall_s\tuser_s\tsys_s\tcpu_s\n' >"$out"
{
  for f in "$times"/*; do
    [ -e "$f" ] || continue
    name=$(basename "$f")
    # The last line holds the times ("Command exited with non-zero status N" may precede it).
    read -r e u s < <(tail -n 1 "$f")
    printf '%s\t%s\t%s\t%s\t%s\t%.2f\n' "$name" "${wall[$name]:-?}" "$e" "$u" "$s" "$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')"
  done
} | sort -t$'\t' -k6,6 -g -r >>"$out"
rm -rf "$times"
awk -F'\t' 'NR == 1 { next } { cpu += $6; n++ } END { printf "ctest_cpu: %d wrapped tests, %.0f s of CPU\n", n, cpu }' "$out"
head -n 26 "$out" | column -t -s$'\t'
exit $rc
