#!/usr/bin/env bash
# The sanitizer run (`make fuzz-run`): every libFuzzer target of an ASan+UBSan build (`make fuzz`)
# for SECONDS each, JOBS at a time, then the unit tests under ASan+UBSan. Prints one line per target
# (run_one.sh) and the unit tests' summary; exit 1 when anything failed.
# Usage: run_all.sh [BUILD_DIR=build-fuzz] [SECONDS=60] [JOBS=2] [TARGET...]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build-fuzz}
seconds=${2:-60}
jobs=${3:-2}
shift $(($# < 3 ? $# : 3))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(onnx_import ms_read om_read converter_config keep_dtype
  aipp_config shape_spec roundtrip)
# UB reports are fatal in the build (-fno-sanitize-recover); print their stacks.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
status=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash "$here/run_one.sh" \
  "$build/tests/fuzz/{}_fuzz" "$here/corpus/{}" "$build/fuzz-work/{}" "$seconds" || status=1
if [ -z "${KILN_FUZZ_SKIP_UNIT:-}" ]; then
  echo "unit tests under ASan+UBSan:"
  if "$build/tests/unit/kiln_unit_tests" --gtest_brief=1 >"$build/fuzz-work/unit.log" 2>&1; then
    grep -E '^\[  PASSED  \]|^\[==========\]' "$build/fuzz-work/unit.log" | tail -2
  else
    status=1
    grep -E 'FAILED|ERROR: AddressSanitizer|runtime error|SUMMARY' "$build/fuzz-work/unit.log" | head -30
    echo "log: $build/fuzz-work/unit.log"
  fi
fi
exit $status
