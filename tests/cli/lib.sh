# Shared by the tests/cli/*.sh scripts: argument check, the work folder, PASS/FAIL lines with the
# failing run's output, and the closing "N passed, N failed" line whose status is the script's.
# kiln's own atc is under test: a CANN atc on PATH must not take the conversions (the hand-off
# tests set KILN_CANN_ATC per run).
export KILN_CANN_ATC=off

# needArgs N "USAGE" "$@": exits 2 with the usage line unless at least N arguments were given.
needArgs() {
  local needed=$1 usage=$2
  shift 2
  if [ $# -lt "$needed" ]; then
    echo "usage: $0 $usage" >&2
    exit 2
  fi
}

# makeWork PREFIX [DIR]: $work becomes DIR (emptied) or a fresh temp folder named PREFIX-*; it is
# removed when the script exits.
makeWork() {
  work=${2:-$(mktemp -d "${TMPDIR:-/tmp}/$1-XXXXXX")}
  rm -rf "$work"
  mkdir -p "$work"
  trap 'rm -rf "$work"' EXIT
}
# run COMMAND ARGS...: stdout and stderr to $work/stdout and $work/stderr, the status in $status.
# Scripts that always run one tool define their own run that names it.
run() {
  "$@" >"$work/stdout" 2>"$work/stderr"
  status=$?
}
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

# readsBack NAME KILN FILE...: every artifact a test writes is read back with kiln's own reader
# (`kiln inspect --ir` builds the IR from it), so a writer cannot pass while writing a file that
# nothing loads.
readsBack() {
  local name=$1 kiln=$2 file problem=""
  shift 2
  for file in "$@"; do
    "$kiln" inspect --ir "$file" >/dev/null 2>"$work/readback.err" ||
      problem="${problem:+$problem; }$file: $(head -c 300 "$work/readback.err")"
  done
  if [ -z "$problem" ]; then pass "$name"; else fail "$name" "$problem"; fi
}

# judgedByGe NAME SOURCE_DIR FILE...: the om judge beside the checkout (../shared/judges: GraphEngine's
# loader and CANN's public operator IR, with docs/om_backend.md's allow-list) finds no FAIL in the
# .om files (WARN allowed); skipped, saying so, when the judges are absent.
judgedByGe() {
  local name=$1 source=$2 judge allow verdicts
  shift 2
  judge="$source/../shared/judges/om/check.sh"
  if [ ! -x "$judge" ]; then
    echo "SKIP $name: $judge is absent"
    return
  fi
  allow=$(sed -n 's/^judge allow-list: *//p' "$source/docs/om_backend.md" | tr -d ' ')
  if verdicts=$("$judge" ${allow:+--allow-unregistered "$allow"} "$@" 2>&1) &&
    ! grep -qE "^(FAIL|ERROR) " <<<"$verdicts"; then
    pass "$name"
  else fail "$name" "$(grep -vE '^(PASS|WARN) ' <<<"$verdicts" | head -5)"; fi
}
