#!/usr/bin/env bash
# ATC / converter_lite parity (issue 29): AIPP on an opset-9 model, kiln compare of an AIPP .om on
# a uint8 image, each tool's rule for a missing output folder, atc --version / --help without
# conversion framing, kiln inspect of a gear .om (gear table, real inputs once).
# Usage: tests/cli/parity.sh KILN ATC CONVERTER_LITE SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 4 "KILN ATC CONVERTER_LITE SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
atc=$2
lite=$3
src=$4
makeWork kiln-parity "${5:-}"
cd "$work" || exit 2
here=$(pwd -P)
models=$src/tests/cli/models

"$kiln" convert "$src/samples/tiny_cnn.onnxtxt" --to onnx -o tiny.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert tiny_cnn"; exit 1; }

# linesAre NAME FILE EXPECTED: FILE (in $work) holds exactly EXPECTED, all lines.
linesAre() {
  if [ "$(cat "$work/$2")" = "$3" ]; then pass "$1"; else
    fail "$1" "$2 is not exactly (status $status):
$3"
  fi
}
# stampless FILE: ATC's error block with its "[PID: n] <time> " prefix written as "[PID] ".
stampless() {
  sed -E 's/^\[PID: [0-9]+\] [0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9:]{8}\.[0-9]{3}\.[0-9]{3} /[PID] /' "$1"
}
deviceNote="kiln: note: the .om files kiln writes are not device-runnable: they hold the graph and weights as ATC lays them out but no device kernels, task lists or memory plan; run them in kiln's executor (kiln run X.om) or build the device model with CANN's atc"

# --- Output folders: each tool's own rule ---
# GraphEngine's atc creates the missing folders of --output (CheckOutputPathValid makes the
# prefix path); MindSpore Lite's converter resolves the --outputFile folder with realpath and
# fails when it is missing. docs/atc.md and docs/converter_lite.md say so.
tinyAtc=(--framework=5 --model=tiny.onnx --soc_version=Ascend310P3 --precision_mode=force_fp32)
run "$atc" "${tinyAtc[@]}" --output=made/on/demand/tiny
if [ "$status" -eq 0 ] && [ -f made/on/demand/tiny.om ] && [ "$(cat stdout)" = "ATC start working now, please wait for a moment.
...
ATC run success, welcome to the next use.
$deviceNote" ]; then
  pass "atc creates the missing folders of --output"
else fail "atc creates the missing folders of --output" "exit $status"; fi
readsBack "atc's .om in created folders reads back" "$kiln" made/on/demand/tiny.om
run "$atc" "${tinyAtc[@]}" --output=tiny.onnx/sub/tiny
if [ "$status" -eq 255 ] && [ "$(stampless stdout)" = "ATC start working now, please wait for a moment.
...
ATC run failed, Please check the detail log, Try 'atc --help' for more information
[PID] Invalid_Argument(E10001): Value tiny.onnx/sub/tiny for parameter --output is invalid. Reason: [Errno 20] Not a directory" ] &&
  [ "$(cat stderr)" = "atc: error K8202 (E10001): Value tiny.onnx/sub/tiny for parameter --output is invalid. Reason: [Errno 20] Not a directory. Fix: '$here/tiny.onnx/sub' must be a folder kiln can create and write" ]; then
  pass "atc names a folder it cannot create"
else fail "atc names a folder it cannot create" "exit $status"; fi
run "$atc" --mode=3 --framework=5 --model=tiny.onnx --soc_version=Ascend310P3 --check_report=reports/new/check.json
if [ "$status" -eq 0 ] && grep -qF '"result": "success"' reports/new/check.json; then
  pass "atc --mode=3 creates the missing folders of --check_report"
else fail "atc --mode=3 creates the missing folders of --check_report" "exit $status"; fi

run "$lite" --fmk=ONNX --modelFile=tiny.onnx --outputFile=missing/folder/tiny
if [ "$status" -eq 255 ] && [ "$(cat stdout)" = "CONVERT RESULT FAILED:-1 Common error code." ] &&
  [ "$(cat stderr)" = "converter_lite: error K1003 (-1): cannot create a file in 'missing/folder': No such file or directory. Fix: check that the output folder exists and is writable" ] &&
  [ ! -e missing ]; then
  pass "converter_lite refuses a missing --outputFile folder and creates nothing"
else fail "converter_lite refuses a missing --outputFile folder and creates nothing" "exit $status"; fi
mkdir -p present
run "$lite" --fmk=ONNX --modelFile=tiny.onnx --outputFile=present/tiny
if [ "$status" -eq 0 ] && [ "$(cat stdout)" = "CONVERT RESULT SUCCESS:0" ] && [ -f present/tiny.ms ]; then
  pass "converter_lite writes into an existing folder"
else fail "converter_lite writes into an existing folder" "exit $status"; fi

# --- atc --version / --help: no conversion framing ---
run "$atc" --version
if [ "$status" -eq 0 ] && [ -z "$(cat stderr)" ] &&
  [ "$(sed -n 2p stdout)" = "$deviceNote" ] && [ "$(wc -l <stdout)" -eq 2 ] &&
  grep -qxE "atc \(kiln\) [0-9]+\.[0-9]+\.[0-9]+" <(head -1 stdout); then
  pass "atc --version: the version and the device note only"
else fail "atc --version: the version and the device note only" "exit $status"; fi
run "$atc" --help
if [ "$status" -eq 0 ] && [ -z "$(cat stderr)" ] && [ "$(head -2 stdout)" = "usage: atc <args>
$deviceNote" ] && ! grep -qE "^ATC (start working|run success|run failed)" stdout; then
  pass "atc --help: usage without conversion framing"
else fail "atc --help: usage without conversion framing" "exit $status"; fi

finish
