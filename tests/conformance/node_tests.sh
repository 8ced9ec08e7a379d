#!/usr/bin/env bash
# Runs the newest ONNX backend node tests (a folder beside the checkout, never copied into it)
# through `kiln conformance`; when the folder is absent, says so and exits 77 (ctest's skip code).
# Usage: tests/conformance/node_tests.sh KILN NODE_TESTS_DIR EXPECTED_LIST conformance-flags...
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 KILN NODE_TESTS_DIR EXPECTED_LIST conformance-flags..." >&2
  exit 2
fi
kiln=$1
cases=$2/node
expected=$3
shift 3
if [ ! -d "$cases" ]; then
  echo "SKIP: $cases is absent (the newest ONNX node tests, onnx commit 6be0677f, are kept in" \
    "../shared/onnx-node-tests beside the checkout; configure with -DKILN_NODE_TESTS=DIR to" \
    "point elsewhere)"
  exit 77
fi
exec "$kiln" conformance "$@" -q -j 2 --expect "$expected" "$cases"
