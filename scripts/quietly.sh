#!/usr/bin/env bash
# Runs one set-up step of `make demo` with its output in a log file: one line when it succeeds, the
# log's last lines and its path when it fails (the step's exit status is kept).
# Usage: quietly.sh LABEL LOG COMMAND [ARGS...]
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 LABEL LOG COMMAND [ARGS...]" >&2
  exit 2
fi
label=$1 log=$2
shift 2
mkdir -p "$(dirname "$log")"
start=$SECONDS
"$@" >"$log" 2>&1
status=$?
if [ $status -eq 0 ]; then
  echo "$label: ok ($((SECONDS - start)) s, log: $log)"
else
  echo "$label: FAILED (exit $status); the log's last 20 lines:" >&2
  tail -n 20 "$log" | sed 's/^/  /' >&2
  echo "$label: full log: $log" >&2
fi
exit $status
