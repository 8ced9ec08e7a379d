#!/usr/bin/env bash
# Runs every libFuzzer target of FUZZER_DIR (build-fuzz/tests/fuzz for the ASan+UBSan build,
# build/fuzz-ci for CI's) for SECONDS each, JOBS at a time, through run_one.sh (one line per
# target; work folders under WORK). Exit 1 when any target failed.
# Usage: run_all.sh FUZZER_DIR SECONDS [JOBS=2] [WORK=FUZZER_DIR/../fuzz-work] [TARGET...]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$1
seconds=$2
jobs=${3:-2}
work=${4:-$dir/../fuzz-work}
shift $(($# < 4 ? $# : 4))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(onnx_import ms_read om_read converter_config keep_dtype
  aipp_config shape_spec roundtrip npy_read calibration_image)
# UB reports are fatal in the sanitizer build (-fno-sanitize-recover); print their stacks.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash "$here/run_one.sh" \
  "$dir/{}_fuzz" "$here/corpus/{}" "$work/{}" "$seconds"
