# Shared by the tests/cli/*.sh scripts (sourced after they set $work): PASS/FAIL lines with the
# failing run's output, and the closing "N passed, N failed" line whose status is the script's.
# kiln's own atc is under test: a CANN atc on PATH must not take the conversions (the hand-off
# tests set KILN_CANN_ATC per run).
export KILN_CANN_ATC=off
passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $1"; }
fail() {
  failed=$((failed + 1))
  echo "FAIL $1: $2"
  if [ -s "$work/stdout" ]; then sed 's/^/  stdout: /' "$work/stdout"; fi
  if [ -s "$work/stderr" ]; then sed 's/^/  stderr: /' "$work/stderr"; fi
}
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
