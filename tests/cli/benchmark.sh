#!/usr/bin/env bash
# End-to-end runs of the `benchmark` drop-in: accuracy mode against hand-written expected data,
# thresholds, cosine mode, input and data-file errors, performance mode, exit statuses.
# Usage: tests/cli/benchmark.sh BENCHMARK SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 2 "BENCHMARK SOURCE_DIR [WORKDIR]" "$@"
benchmark=$1
src=$2
makeWork kiln-benchmark "${3:-}"

run() {
  "$benchmark" "$@" >"$work/stdout" 2>"$work/stderr"
  status=$?
}

# expect NAME STATUS ARGS...: the exit status is STATUS.
expect() {
  local name=$1 want=$2
  shift 2
  run "$@"
  if [ "$status" -ne "$want" ]; then fail "$name" "exit $status, expected $want"; else pass "$name"; fi
}

# has NAME FILE TEXT: FILE (stdout or stderr) contains TEXT.
has() {
  if grep -qF -- "$3" "$work/$2"; then pass "$1"; else fail "$1" "$2 lacks '$3'"; fi
}

# failsWith NAME CODE TEXT ARGS...: exit 255 (RET_ERROR -1), a coded kiln line on stderr holding
# TEXT, and benchmark's failure line on stdout.
failsWith() {
  local name=$1 code=$2 text=$3
  shift 3
  run "$@"
  if [ "$status" -ne 255 ]; then
    fail "$name" "exit $status, expected 255"
  elif ! grep -Eq "^benchmark: error ${code} \(-?[0-9]+\): " "$work/stderr"; then
    fail "$name" "stderr lacks 'benchmark: error $code (..): '"
  elif ! grep -qF -- "$text" "$work/stderr"; then
    fail "$name" "stderr lacks '$text'"
  elif ! grep -q "Fix: " "$work/stderr"; then
    fail "$name" "no fix hint"
  elif ! grep -Eq "^Run Benchmark (.* )?Failed : -1$" "$work/stdout"; then
    fail "$name" "stdout lacks the failure line"
  else
    pass "$name"
  fi
}

model="$src/tests/cli/models/affine.onnxtxt"
# x = [1, 2, 3, 4] as little-endian float32; y = 2x + 1 = [3, 5, 7, 9].
printf '\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40' >"$work/x.bin"
printf 'y 2 1 4\n3 5 7 9\n' >"$work/right.out"
printf 'y 2 1 4\n3 5 7 10\n' >"$work/off.out"   # one element 10% off: mean bias 10%
printf 'z 2 1 4\n3 5 7 9\n' >"$work/name.out"
printf 'y 2 2 2\n3 5 7 9\n' >"$work/shape.out"
printf 'y 2 1 4\n3 5 7\n' >"$work/count.out"
head -c 12 "$work/x.bin" >"$work/short.bin"

expect "help" 0 --help
has "help lists --modelFile" stdout "--modelFile"

expect "accuracy: right data" 0 --modelFile="$model" --inDataFile="$work/x.bin" --benchmarkDataFile="$work/right.out"
has "accuracy prints the outputs" stdout "Data of node y : 3 5 7 9"
has "accuracy prints the tensor bias" stdout "Mean bias of node/tensor y : 0.000000%"
has "accuracy prints the total bias" stdout "Mean bias of all nodes/tensors: 0.000000%"
has "accuracy ends with Success" stdout "Run Benchmark affine.onnxtxt Success."

failsWith "accuracy: off data fails" K7302 "mean bias 10.000000% is above --accuracyThreshold=0.5%" \
  --modelFile="$model" --inDataFile="$work/x.bin" --benchmarkDataFile="$work/off.out"
has "off data: bias is over failing elements" stdout "Mean bias of node/tensor y : 10.000000%"
has "off data: too big" stdout "Mean bias of all nodes/tensors is too big: 10.000000%"
expect "accuracy: threshold 20% passes" 0 --modelFile="$model" --inDataFile="$work/x.bin" \
  --benchmarkDataFile="$work/off.out" --accuracyThreshold=20

# cos([3,5,7,9], [3,5,7,10]) = 173 / sqrt(164 * 183) = 173 / 173.2397 = 0.998616.
failsWith "cosine below threshold fails" K7302 "mean cosine similarity 0.998616 is below" \
  --modelFile="$model" --inDataFile="$work/x.bin" --benchmarkDataFile="$work/off.out" \
  --accuracyThreshold=20 --cosineDistanceThreshold=0.999
has "cosine is printed" stdout "Cosine distance of all nodes/tensors: 0.998616"
expect "cosine above threshold passes" 0 --modelFile="$model" --inDataFile="$work/x.bin" \
  --benchmarkDataFile="$work/off.out" --accuracyThreshold=20 --cosineDistanceThreshold=0.99

failsWith "input file size" K7301 "Input binary file size error, required: 16, in fact: 12" \
  --modelFile="$model" --inDataFile="$work/short.bin" --benchmarkDataFile="$work/right.out"
failsWith "input file count" K7301 "names 2 file(s)" \
  --modelFile="$model" --inDataFile="$work/x.bin,$work/x.bin" --benchmarkDataFile="$work/right.out"
failsWith "missing input file" K1001 "$work/absent.bin" \
  --modelFile="$model" --inDataFile="$work/absent.bin"
failsWith "wrong output name" K7301 "The output tensor name is wrong" \
  --modelFile="$model" --inDataFile="$work/x.bin" --benchmarkDataFile="$work/name.out"
failsWith "wrong output shape" K7301 "the model produces [1,4]" \
  --modelFile="$model" --inDataFile="$work/x.bin" --benchmarkDataFile="$work/shape.out"
failsWith "short value line" K7301 "needs 4 values but the line has 3" \
  --modelFile="$model" --inDataFile="$work/x.bin" --benchmarkDataFile="$work/count.out"
failsWith "missing model" K1001 "$work/absent.onnx" --modelFile="$work/absent.onnx"
failsWith "loopCount 0" K4001 "LoopCount must be greater than 0" --modelFile="$model" --loopCount=0
failsWith "unknown flag" K4001 "--loopcount" --modelFile="$model" --loopcount=2
failsWith "flag with a space" K4001 "flag --modelFile has no value" --modelFile "$model"

# Performance mode: generated inputs, the timing line.
expect "performance" 0 --modelFile="$model" --loopCount=3 --warmUpLoopCount=1 --numThreads=1
if grep -Eq '^Model = affine.onnxtxt, NumThreads = 1, MinRunTime = [0-9.]+ ms, MaxRuntime = [0-9.]+ ms, AvgRunTime = [0-9.]+ ms$' "$work/stdout"; then
  pass "performance line"
else
  fail "performance line" "no Model = ... AvgRunTime line"
fi
expect "time profiling" 0 --modelFile="$model" --loopCount=2 --timeProfiling=true
has "profiling lists Mul" stdout "Mul"

# Dynamic inputs need --inputShape (or --inputShapes); the named form wins.
dynamic="$src/tests/cli/models/nchw_image.onnxtxt"
failsWith "dynamic input without shapes" K5003 "--inputShape=\"x:...\"" --modelFile="$dynamic" --loopCount=1
expect "dynamic input with --inputShape" 0 --modelFile="$dynamic" --inputShape="x:1,3,8,8" --loopCount=1
expect "dynamic input with --inputShapes" 0 --modelFile="$dynamic" --inputShapes="1,3,8,8" --loopCount=1
failsWith "unknown input name" K4102 "'image' is not an input" --modelFile="$dynamic" --inputShape="image:1,3,8,8"
failsWith "rank mismatch" K4103 "has rank 4" --modelFile="$dynamic" --inputShape="x:1,3,8"

finish
