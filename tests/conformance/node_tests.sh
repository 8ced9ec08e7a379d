#!/usr/bin/env bash
# Runs the newest ONNX backend node tests (a folder beside the checkout, never copied into it)
# through `kiln conformance`; when the folder is absent, says so and exits 77 (ctest's skip code).
# Usage: tests/conformance/node_tests.sh KILN NODE_TESTS_DIR EXPECTED_LIST TWIN_DIR TWIN_LIST
#        conformance-flags...
# TWIN_DIR is Debian's libonnx-testdata node folder, which the conformance_* test with the same
# flags runs against TWIN_LIST. A case whose folder (model and every data set) is byte-identical to
# its twin there is left out here: the same bytes through the same flags give the same result, and
# that test already asserts it. A case stays whenever EXPECTED_LIST holds it and TWIN_LIST does not,
# so no expectation is lost. (507 of the 1,802 cases are such twins.)
set -uo pipefail
if [ $# -lt 5 ]; then
  echo "usage: $0 KILN NODE_TESTS_DIR EXPECTED_LIST TWIN_DIR TWIN_LIST conformance-flags..." >&2
  exit 2
fi
kiln=$1
cases=$2/node
expected=$3
twins=$4
twin_list=$5
shift 5
if [ ! -d "$cases" ]; then
  echo "SKIP: $cases is absent (the newest ONNX node tests, onnx commit 6be0677f, are kept in" \
    "../shared/onnx-node-tests beside the checkout; configure with -DKILN_NODE_TESTS=DIR to" \
    "point elsewhere)"
  exit 77
fi
declare -A listed_here listed_there
while read -r name _; do listed_here[$name]=1; done < <(grep -v '^#' "$expected")
if [ -f "$twin_list" ]; then
  while read -r name _; do listed_there[$name]=1; done < <(grep -v '^#' "$twin_list")
fi
# One diff over both folders names every case that differs (a file differs or is only on one side).
declare -A differs
if [ -d "$twins" ]; then
  while IFS= read -r line; do
    case $line in
      "Only in $cases: "* | "Only in $twins: "*) differs[${line##*: }]=1 ;;
      "Only in $cases/"* | "Only in $twins/"*)
        where=${line#Only in }
        where=${where%%: *}
        where=${where#"$cases"/}
        where=${where#"$twins"/}
        differs[${where%%/*}]=1 ;;
      "Files $cases/"*)
        where=${line#"Files $cases/"}
        differs[${where%%/*}]=1 ;;
      *) echo "node_tests.sh: unexpected diff line: $line" >&2; exit 2 ;;
    esac
  done < <(diff -rq "$cases" "$twins" 2>&1) # a diff error is an unexpected line: exit 2
fi
run=()
left_out=0
for dir in "$cases"/*/; do
  dir=${dir%/}
  [ -f "$dir/model.onnx" ] || continue
  base=${dir##*/}
  name=node/$base
  if [ -d "$twins/$base" ] && [ -z "${differs[$base]:-}" ] &&
    { [ -z "${listed_here[$name]:-}" ] || [ -n "${listed_there[$name]:-}" ]; }; then
    left_out=$((left_out + 1))
    continue
  fi
  run+=("$dir")
done
echo "node tests: ${#run[@]} cases run, $left_out left out as byte-identical to the case of $twins" \
  "that conformance_* runs with the same flags"
exec "$kiln" conformance "$@" -q -j 2 --expect "$expected" "${run[@]}"
