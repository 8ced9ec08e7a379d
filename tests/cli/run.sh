#!/usr/bin/env bash
# End-to-end runs of `kiln inspect` / `kiln convert`: exit codes, coded messages on stderr, no
# partial outputs on failure, and byte-identical repeat conversions.
# Usage: tests/cli/run.sh KILN SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 2 "KILN SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
src=$2
makeWork kiln-cli "${3:-}"

# Runs kiln with the given arguments; stdout and stderr go to $work/stdout and $work/stderr and the
# exit status to $status.
runKiln() {
  "$kiln" "$@" >"$work/stdout" 2>"$work/stderr"
  status=$?
}

# expectOk NAME ARGS...: exit 0.
expectOk() {
  local name=$1
  shift
  runKiln "$@"
  if [ "$status" -ne 0 ]; then fail "$name" "exit $status, expected 0"; else pass "$name"; fi
}

# expectError NAME CODE NEEDLE ARGS...: non-zero exit, one "kiln: error CODE: ..." line on stderr
# that contains NEEDLE (a file, node or flag name), and no crash.
expectError() {
  local name=$1 code=$2 needle=$3
  shift 3
  runKiln "$@"
  if [ "$status" -eq 0 ]; then
    fail "$name" "exit 0, expected an error"
  elif [ "$status" -ge 128 ]; then
    fail "$name" "killed by signal $((status - 128))"
  elif ! grep -Eq "^kiln: error ${code}[0-9]*: " "$work/stderr"; then
    fail "$name" "stderr lacks 'kiln: error $code: '"
  elif ! grep -qF -- "$needle" "$work/stderr"; then
    fail "$name" "stderr lacks '$needle'"
  elif ! grep -q "Fix: " "$work/stderr"; then
    fail "$name" "stderr has no fix hint"
  else
    pass "$name"
  fi
}

# expectNoTemp NAME DIR FILE: no temp file of the atomic writer (.FILE.tmp-*) is left in DIR.
expectNoTemp() {
  local name=$1 dir=$2 file=$3
  local leftovers
  leftovers=$(find "$dir" -maxdepth 1 -name ".$file.tmp-*" | head -n 5)
  if [ -n "$leftovers" ]; then fail "$name" "temp file left behind: $leftovers"; else pass "$name"; fi
}

# expectNoOutput NAME DIR FILE: neither FILE nor a leftover temp file is in DIR.
expectNoOutput() {
  local name=$1 dir=$2 file=$3
  if [ -e "$dir/$file" ] && [ ! -d "$dir/$file" ]; then
    fail "$name" "$dir/$file was written"
  else
    expectNoTemp "$name" "$dir" "$file"
  fi
}

# --- inputs
sample="$src/samples/tiny_cnn.onnxtxt"
good="$work/good.onnx"
bad="$work/bad"
out="$work/out"
mkdir -p "$bad" "$out"

# --- good inputs
expectOk "convert sample" convert "$sample" --to onnx -o "$good"
if [ -s "$good" ]; then pass "convert wrote a file"; else fail "convert wrote a file" "$good missing or empty"; fi
expectOk "inspect converted" inspect "$good"
if grep -q "^nodes: 6" "$work/stdout" && grep -q "^parameters: 692 elements, 2776 bytes" "$work/stdout"; then
  pass "inspect reports the sample's nodes and parameters"
else
  fail "inspect reports the sample's nodes and parameters" "$(tr '\n' '|' <"$work/stdout")"
fi
expectOk "inspect --json" inspect --json "$good"
if grep -q '"inputs"' "$work/stdout"; then pass "inspect --json prints JSON"; else fail "inspect --json prints JSON" "no inputs key"; fi

# Converted output re-imports to the same IR as its source.
runKiln inspect --ir "$sample"
cp "$work/stdout" "$work/ir_source"
runKiln inspect --ir "$good"
if [ "$status" -eq 0 ] && cmp -s "$work/ir_source" "$work/stdout"; then
  pass "converted model re-imports to the same IR"
else
  fail "converted model re-imports to the same IR" "IR text differs (exit $status)"
fi

# Repeatable: converting the same input twice, or converting the output again, gives the same bytes.
expectOk "convert sample again" convert "$sample" --to onnx -o "$work/again.onnx"
if cmp -s "$good" "$work/again.onnx"; then pass "two conversions are byte-identical"; else fail "two conversions are byte-identical" "cmp differs"; fi
expectOk "convert the converted model" convert "$good" --to onnx -o "$work/twice.onnx"
if cmp -s "$good" "$work/twice.onnx"; then pass "convert is idempotent"; else fail "convert is idempotent" "cmp differs"; fi

# Overwriting an existing output replaces it whole.
printf 'stale' >"$out/replaced.onnx"
expectOk "convert over an existing file" convert "$sample" --to onnx -o "$out/replaced.onnx"
if cmp -s "$good" "$out/replaced.onnx"; then pass "existing output replaced"; else fail "existing output replaced" "content differs"; fi
expectNoTemp "no temp file after success" "$out" "replaced.onnx"

# --- bad inputs (binary)
: >"$bad/empty.onnx"
head -c $(($(stat -c %s "$good") / 2)) "$good" >"$bad/truncated.onnx"
printf 'This is a README, not a model.\n' >"$bad/readme.onnx"
printf '\x0f\xff\x00\x01' >"$bad/garbage.onnx"
printf '\x08\x08' >"$bad/no_graph.onnx" # ir_version 8 and nothing else

expectError "missing file" K1001 "$bad/absent.onnx" inspect "$bad/absent.onnx"
expectError "folder as model" K1002 "$bad" inspect "$bad"
expectError "empty file" K2002 "$bad/empty.onnx" inspect "$bad/empty.onnx"
expectError "truncated file" K2002 "$bad/truncated.onnx" inspect "$bad/truncated.onnx"
expectError "text file" K2001 "$bad/readme.onnx" inspect "$bad/readme.onnx"
expectError "binary garbage" K2001 "$bad/garbage.onnx" inspect "$bad/garbage.onnx"
expectError "no graph" K2014 "$bad/no_graph.onnx" inspect "$bad/no_graph.onnx"
printf 'This is not an offline model.\n' >"$bad/model.om"
expectError "invalid .om" K8001 "$bad/model.om" inspect "$bad/model.om"
printf 'This is not a FlatBuffer.\n' >"$bad/model.ms"
expectError "invalid .ms" K7001 "$bad/model.ms" inspect "$bad/model.ms"
lenet="$src/../shared/conformance/ms/lenet_tod_infer.ms"
if [ -f "$lenet" ]; then
  expectOk "inspect .ms" inspect "$lenet"
  expectOk "inspect .ms --json" inspect "$lenet" --json
  # --ir reads the .ms into IR: NHWC convs come back as ONNX Convs, whose layout Transposes
  # cancel (sink-transposes) but for the one that takes LeNet's NHWC input to NCHW.
  expectOk "inspect .ms --ir" inspect "$lenet" --ir
  if grep -q "= Conv(" "$work/stdout" && grep -q "perm = \[0, 3, 1, 2\]" "$work/stdout"; then
    pass "inspect .ms --ir shows Conv and Transposes"
  else
    fail "inspect .ms --ir shows Conv and Transposes" "no Conv/Transpose in the printed IR"
  fi
fi

# --- bad inputs (structure, in ONNX text syntax)
header='<ir_version: 8, opset_import: ["" : 17]>'
cat >"$bad/cycle.onnxtxt" <<EOF
$header
g (float[2] X) => (float[2] Y) {
  a = Add (X, b)
  b = Relu (a)
  Y = Identity (a)
}
EOF
cat >"$bad/undefined.onnxtxt" <<EOF
$header
g (float[2] X) => (float[2] Y) {
  Y = Add (X, ghost)
}
EOF
cat >"$bad/duplicate.onnxtxt" <<EOF
$header
g (float[2] X) => (float[2] Y) {
  Y = Relu (X)
  Y = Neg (X)
}
EOF
cat >"$bad/dtype.onnxtxt" <<EOF
$header
g (float[2] X) => (float[2] Y)
<float[3] W = {1.0, 2.0}>
{
  Y = Add (X, W)
}
EOF
cat >"$bad/syntax.onnxtxt" <<EOF
$header
g (float[2] X) => (float[2] Y) { Y = Relu (X
EOF
expectError "cycle" K2010 "cycle through" inspect "$bad/cycle.onnxtxt"
expectError "cycle names the file" K2010 "$bad/cycle.onnxtxt" inspect "$bad/cycle.onnxtxt"
expectError "undefined input" K2009 "reads 'ghost'" inspect "$bad/undefined.onnxtxt"
expectError "duplicate value" K2008 "redefines 'Y'" inspect "$bad/duplicate.onnxtxt"
expectError "data size mismatch" K2006 "tensor 'W'" inspect "$bad/dtype.onnxtxt"
expectError "text syntax error" K2001 "$bad/syntax.onnxtxt" inspect "$bad/syntax.onnxtxt"

# --- sensitivity: ranking, target search, keep lists in the peers' formats
expectOk "sensitivity weight quant" sensitivity "$sample" --weight-quant-bits 2 --target-cosine 0.99999 --write-config "$out/tuned.cfg"
if grep -q "logits  *Gemm" "$work/stdout" && grep -q "keeping 1 node(s) in float gives 1.000000 (met)" "$work/stdout"; then
  pass "sensitivity ranks the Gemm and keeps it"
else
  fail "sensitivity ranks the Gemm and keeps it" "unexpected report"
fi
if [ "$(cat "$out/tuned.cfg" 2>/dev/null)" = "$(printf '[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=2\nskip_quant_node=logits')" ]; then
  pass "sensitivity writes a converter_lite config"
else
  fail "sensitivity writes a converter_lite config" "$(cat "$out/tuned.cfg" 2>/dev/null)"
fi
expectOk "sensitivity fp16" sensitivity "$sample" --precision-mode force_fp16 --target-mre 0.01 --write-keep-dtype "$out/keep.txt"
if [ "$(wc -l <"$out/keep.txt" 2>/dev/null)" -ge 1 ] && grep -q "(met)" "$work/stdout"; then
  pass "sensitivity writes a keep_dtype file"
else
  fail "sensitivity writes a keep_dtype file" "$(cat "$out/keep.txt" 2>/dev/null)"
fi
# Trials run on threads and read the float run's kept tensors: neither changes a byte of the report.
runKiln sensitivity "$sample" --precision-mode force_fp16 --target-mre 0.01 --json --threads 1
cp "$work/stdout" "$out/sensitivity_t1.json"
runKiln sensitivity "$sample" --precision-mode force_fp16 --target-mre 0.01 --json --threads 2
if grep -q '"keep"' "$out/sensitivity_t1.json" && cmp -s "$out/sensitivity_t1.json" "$work/stdout"; then
  pass "sensitivity report is byte-identical at --threads 1 and 2"
else
  fail "sensitivity report is byte-identical at --threads 1 and 2" "$(diff "$out/sensitivity_t1.json" "$work/stdout" | head -5)"
fi
runKiln sensitivity "$sample" --precision-mode force_fp16 --target-mre 0.01 --json --threads 1 --max-stored-mb 0
if cmp -s "$out/sensitivity_t1.json" "$work/stdout"; then
  pass "sensitivity report is the same when every trial runs the whole model"
else
  fail "sensitivity report is the same when every trial runs the whole model" "$(diff "$out/sensitivity_t1.json" "$work/stdout" | head -5)"
fi
expectOk "sensitivity with a loose target" sensitivity "$sample" --precision-mode force_fp16 --target-mre 50 --write-keep-dtype "$out/none.txt"
expectNoOutput "no empty keep_dtype file (atc rejects one)" "$out" "none.txt"
runKiln sensitivity "$sample" --weight-quant-bits 1 --target-cosine 1.5
if [ "$status" -eq 1 ] && grep -q "(NOT met)" "$work/stdout"; then pass "unreachable target exits 1"; else fail "unreachable target exits 1" "exit $status"; fi
expectError "sensitivity needs one variant" K4001 "--precision-mode" sensitivity "$sample" --precision-mode force_fp16 --weight-quant-bits 8
expectError "sensitivity keep list needs a target" K4001 "target" sensitivity "$sample" --weight-quant-bits 8 --write-config "$out/never.cfg"
expectNoOutput "no config without a target" "$out" "never.cfg"

# --- bad flags
expectError "unknown target" K4001 "--to" convert "$sample" --to tflite -o "$out/x.onnx"
expectError "unknown subcommand" K4001 "subcommand" frobnicate
expectError "missing output flag" K4001 "--output" convert "$sample"

# --- failed conversions leave nothing behind
for input in truncated.onnx readme.onnx cycle.onnxtxt undefined.onnxtxt; do
  expectError "convert $input fails" K20 "$bad/$input" convert "$bad/$input" --to onnx -o "$out/failed.onnx"
  expectNoOutput "convert $input leaves no output" "$out" "failed.onnx"
done
printf 'keep me' >"$out/kept.onnx"
expectError "failed convert over an existing file" K2010 "$bad/cycle.onnxtxt" convert "$bad/cycle.onnxtxt" --to onnx -o "$out/kept.onnx"
if [ "$(cat "$out/kept.onnx")" = "keep me" ]; then pass "existing output untouched on failure"; else fail "existing output untouched on failure" "content changed"; fi
expectError "convert into a missing folder" K1003 "$out/nowhere" convert "$sample" --to onnx -o "$out/nowhere/x.onnx"
if [ ! -e "$out/nowhere" ]; then pass "missing folder not created"; else fail "missing folder not created" "$out/nowhere exists"; fi
mkdir -p "$out/adir"
expectError "convert onto a folder" K1003 "$out/adir" convert "$sample" --to onnx -o "$out/adir"
expectNoOutput "convert onto a folder leaves no temp file" "$out" "adir"

# OpenMP workers (oneDNN's runtime) sleep between parallel regions unless the user chose a policy:
# libgomp reports what it read at start-up when OMP_DISPLAY_ENV is set.
env -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose "$kiln" --version >"$work/stdout" 2>"$work/stderr"
if ! grep -q "OMP_WAIT_POLICY" "$work/stderr"; then
  echo "SKIP OpenMP wait policy: this kiln does not load an OpenMP runtime (built without oneDNN)"
else
  if grep -q "GOMP_SPINCOUNT = '0'" "$work/stderr"; then pass "OpenMP workers sleep by default"
  else fail "OpenMP workers sleep by default" "libgomp did not start with a zero spin count"; fi
  OMP_WAIT_POLICY=ACTIVE OMP_DISPLAY_ENV=verbose "$kiln" --version >"$work/stdout" 2>"$work/stderr"
  if grep -q "OMP_WAIT_POLICY = 'ACTIVE'" "$work/stderr"; then pass "a user's OpenMP wait policy is kept"
  else fail "a user's OpenMP wait policy is kept" "OMP_WAIT_POLICY=ACTIVE was not what libgomp read"; fi
fi

finish
