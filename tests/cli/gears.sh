#!/usr/bin/env bash
# atc's dynamic gears (--dynamic_batch_size, --dynamic_image_size, --dynamic_dims): one branch per
# gear behind a Case picked by MapIndex from ascend_mbatch_shape_data, shared weights in the root,
# every branch's numbers equal to the ONNX model's at that shape, byte-identical output, and the
# ATC rules for bad gear flags.
# Usage: tests/cli/gears.sh ATC KILN SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 3 "ATC KILN SOURCE_DIR [WORKDIR]" "$@"
atc=$1
kiln=$2
src=$3
makeWork kiln-gears "${4:-}"
cd "$work" || exit 2

run() {
  "$atc" "$@" >"$work/stdout" 2>"$work/stderr"
  status=$?
}

# MODEL_INOUT_INFO carries the gears as TLV 2 (batch), 3 (H/W) and 4 (dims), read back by
# kiln inspect --json.
inoutGears() {
  "$kiln" inspect --json "$1" | python3 -c 'import json,sys; d=json.load(sys.stdin)
def find(o):
    if isinstance(o, dict):
        if "inout_info" in o: return o["inout_info"]
        for v in o.values():
            r = find(v)
            if r is not None: return r
    if isinstance(o, list):
        for v in o:
            r = find(v)
            if r is not None: return r
info = find(d) or {}
print(json.dumps({k: info[k] for k in ("dynamic_batch", "dynamic_hw", "dynamic_dims") if k in info}))'
}
"$kiln" convert "$src/tests/cli/models/nchw_image.onnxtxt" --to onnx -o dyn.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert nchw_image"; exit 1; }
common=(--framework=5 --model=dyn.onnx --soc_version=Ascend310P3)

# The layout: root Data/MapIndex/Case/NetOutput, one branch graph per gear, the weight in the root.
run "${common[@]}" --output=out/batch "--input_shape=x:-1,3,8,8" --dynamic_batch_size=1,2,4
if [ "$status" -eq 0 ] && grep -qF "ATC run success" stdout; then
  pass "--dynamic_batch_size converts"
else fail "--dynamic_batch_size converts" "exit $status"; fi
run --mode=1 --om=out/batch.om --json=batch.json
layout=$(python3 - batch.json <<'EOF'
import json, sys
model = json.load(open(sys.argv[1]))
graphs = model["graph"]
root = graphs[0]
ops = {op["name"]: op for op in root["op"]}
def attr(op, key):
    for a in op.get("attr", []):
        if a["key"] == key:
            return a["value"]
    return None
case = ops["ascend_mbatch_shape_case"]
problems = []
if case["type"] != "Case": problems.append("no Case")
if ops["ascend_mbatch_shape_mapindex"]["type"] != "MapIndex": problems.append("no MapIndex")
if ops["ascend_mbatch_shape_data"]["type"] != "Data": problems.append("no selector Data")
if case["input"][0] != "ascend_mbatch_shape_mapindex:0": problems.append("Case input 0 " + case["input"][0])
if len(case["subgraph_name"]) != 3: problems.append("branches %d" % len(case["subgraph_name"]))
if attr(case, "_batch_num")["i"] != "3" and attr(case, "_batch_num")["i"] != 3: problems.append("_batch_num")
if [int(v) for v in attr(case, "_pred_value_2")["list"]["i"]] != [4]: problems.append("_pred_value_2")
consts = [op["name"] for op in root["op"] if op["type"] == "Const" and op["name"] != "ascend_mbatch_shape_const"]
if len(consts) != 1: problems.append("root consts %s" % consts)
names = [g["name"] for g in graphs]
for sub in case["subgraph_name"]:
    if sub not in names: problems.append("missing branch " + sub)
    g = graphs[names.index(sub)]
    datas = [op for op in g["op"] if op["type"] == "Data"]
    if len(datas) != 2: problems.append("%s has %d Data ops" % (sub, len(datas)))
    if any(attr(d, "_parent_node_index") is None for d in datas): problems.append("Data without _parent_node_index")
    if any(op["type"] == "Const" and op["name"].startswith("w_") for op in g["op"]): problems.append("weight copied into " + sub)
x = ops["x"]["output_desc"][0]["shape"]["dim"]
if [int(d) for d in x] != [4, 3, 8, 8]: problems.append("root x %s" % x)
print("; ".join(problems) if problems else "ok")
EOF
)
if [ "$status" -eq 0 ] && [ "$layout" = ok ]; then pass "gear layout (Case, MapIndex, branches, shared weight)"
else fail "gear layout (Case, MapIndex, branches, shared weight)" "exit $status: $layout"; fi

# Numbers: each gear as the ONNX model at that shape (kiln picks the branch from the shapes).
for shape in 1,3,8,8 2,3,8,8 4,3,8,8; do
  if "$kiln" compare dyn.onnx out/batch.om --input-shape "x:$shape" >compare.txt 2>&1; then
    pass "batch gear $shape matches ONNX"
  else fail "batch gear $shape matches ONNX" "$(tail -5 compare.txt)"; fi
done

cp out/batch.om first.om
run "${common[@]}" --output=out/batch "--input_shape=x:-1,3,8,8" --dynamic_batch_size=1,2,4
if [ "$status" -eq 0 ] && cmp -s first.om out/batch.om; then pass "gear .om is byte-identical"
else fail "gear .om is byte-identical" "exit $status or files differ"; fi

run "${common[@]}" --output=out/image "--input_shape=x:1,3,-1,-1" "--dynamic_image_size=8,8;16,12"
if [ "$status" -eq 0 ] && "$kiln" compare dyn.onnx out/image.om --input-shape "x:1,3,16,12" >compare.txt 2>&1; then
  pass "--dynamic_image_size gear 16x12 matches ONNX"
else fail "--dynamic_image_size gear 16x12 matches ONNX" "exit $status: $(tail -5 compare.txt 2>/dev/null)"; fi

run "${common[@]}" --output=out/dims "--input_shape=x:-1,3,-1,8" "--dynamic_dims=1,8;2,16" --input_format=ND
if [ "$status" -eq 0 ] && "$kiln" compare dyn.onnx out/dims.om --input-shape "x:2,3,16,8" >compare.txt 2>&1; then
  pass "--dynamic_dims gear 2,16 matches ONNX"
else fail "--dynamic_dims gear 2,16 matches ONNX" "exit $status: $(tail -5 compare.txt 2>/dev/null)"; fi
# The om judge (../shared/judges: GraphEngine's loader, CANN's public IR) on each gear model.
judge="$src/../shared/judges/om/check.sh"
if [ -x "$judge" ]; then
  for m in batch image dims; do
    if verdict=$("$judge" "out/$m.om" 2>&1) && [ "${verdict#PASS}" != "$verdict" ]; then
      pass "om judge passes the $m gear model"
    else fail "om judge passes the $m gear model" "$verdict"; fi
  done
else echo "SKIP om judge on the gear models: $judge is absent"; fi
got=$(inoutGears out/image.om)
if [ "$got" = '{"dynamic_hw": [[8, 8], [16, 12]]}' ]; then pass "MODEL_INOUT_INFO TLV 3: H/W gears"
else fail "MODEL_INOUT_INFO TLV 3: H/W gears" "$got"; fi
got=$(inoutGears out/dims.om)
if [ "$got" = '{"dynamic_dims": [[1, 8], [2, 16]]}' ]; then pass "MODEL_INOUT_INFO TLV 4: dims gears"
else fail "MODEL_INOUT_INFO TLV 4: dims gears" "$got"; fi

# A shape that is no gear: one coded message naming the shape and the gears (kiln run and kiln
# compare), not a Reshape error from the first branch.
noGear="kiln: error K5002: input shape x:3,3,8,8 matches none of the model's 3 gears: x:1,3,8,8 | x:2,3,8,8 | x:4,3,8,8. Fix: feed inputs of one gear's shape, or convert the model again with this shape among the gears (atc --dynamic_batch_size / --dynamic_image_size / --dynamic_dims)"
"$kiln" compare dyn.onnx out/batch.om --input-shape "x:3,3,8,8" >compare.txt 2>&1
status=$?
if [ "$status" -ne 0 ] && grep -qxF "$noGear" compare.txt; then pass "kiln compare: batch 3 is no gear"
else fail "kiln compare: batch 3 is no gear" "exit $status: $(cat compare.txt)"; fi
"$kiln" tensor make --fill 0.5 --shape 3,3,8,8 --name x -o x3.pb >/dev/null
"$kiln" run out/batch.om --input x=x3.pb --output-dir run3 >"$work/stdout" 2>"$work/stderr"
status=$?
if [ "$status" -eq 1 ] && [ "$(cat "$work/stderr")" = "$noGear" ] && [ ! -e run3 ]; then
  pass "kiln run: batch 3 is no gear, one coded line"
else fail "kiln run: batch 3 is no gear, one coded line" "exit $status"; fi

got=$(inoutGears out/batch.om)
if [ "$got" = '{"dynamic_batch": [1, 2, 4]}' ]; then pass "MODEL_INOUT_INFO TLV 2: batch gears"
else fail "MODEL_INOUT_INFO TLV 2: batch gears" "$got"; fi

# --mode=3 checks every gear (static shapes), not the -1 model.
run --mode=3 "${common[@]}" --output=out/check "--input_shape=x:-1,3,8,8" --dynamic_batch_size=1,2,4
if [ "$status" -eq 0 ] && python3 -c 'import json,sys; d=json.load(open("check_result.json")); sys.exit(d["result"] != "success")'; then
  pass "--mode=3 with gears checks each gear"
else fail "--mode=3 with gears checks each gear" "exit $status"; fi

# ATC's rules for the flags (om.md §2.6): exit 255, ATC's framing and error block line for line
# (the [PID: n] time prefix aside), one stderr line with kiln's and ATC's codes, ATC's message and
# the fix, no .om.
failsWithLines() {
  local name=$1 block=$2 err=$3
  shift 3
  run "$@"
  local got
  got=$(sed -E 's/^\[PID: [0-9]+\] [0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9:]{8}\.[0-9]{3}\.[0-9]{3} /[PID] /' stdout)
  local want="ATC start working now, please wait for a moment.
...
ATC run failed, Please check the detail log, Try 'atc --help' for more information
[PID] $block"
  if [ "$status" -eq 255 ] && [ "$got" = "$want" ] && [ "$(cat stderr)" = "$err" ] && [ ! -e out/bad.om ]; then
    pass "$name"
  else fail "$name" "exit $status; expected stdout:
$want
expected stderr:
$err"; fi
}
failsWithLines "batch gear on a non-batch axis" \
  "Invalid_Argument_Tensor_Dynamic_Shape(E10018): Value 1,-1,8,8 for shape 0 is invalid. When --dynamic_batch_size is included, only batch size N can be -1 in --input_shape." \
  "atc: error K4106 (E10018): Value 1,-1,8,8 for shape 0 is invalid. When --dynamic_batch_size is included, only batch size N can be -1 in --input_shape. Fix: see atc --help for the dynamic gear flags" \
  "${common[@]}" --output=out/bad "--input_shape=x:1,-1,8,8" --dynamic_batch_size=1,2
failsWithLines "duplicate gears" \
  "Invalid_Argument_Tensor_Dynamic_Shape(E10039): The --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims argument has duplicate profiles." \
  "atc: error K4106 (E10039): The --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims argument has duplicate profiles. Fix: see atc --help for the dynamic gear flags" \
  "${common[@]}" --output=out/bad "--input_shape=x:-1,3,8,8" --dynamic_batch_size=1,1
failsWithLines "gear value 0" \
  "Invalid_Argument_Tensor_Dynamic_Shape(E10038): Dimension size 0 is invalid. The value must be greater than 0." \
  "atc: error K4106 (E10038): Dimension size 0 is invalid. The value must be greater than 0. Fix: see atc --help for the dynamic gear flags" \
  "${common[@]}" --output=out/bad "--input_shape=x:-1,3,8,8" --dynamic_batch_size=0,2
failsWithLines "dims count differs from the -1s" \
  "Invalid_Argument(E10003): Value 1;2 for parameter --dynamic_dims is invalid. Reason: Each setting needs to be consistent with the number of -1 in the input shape." \
  "atc: error K4106 (E10003): Value 1;2 for parameter --dynamic_dims is invalid. Reason: Each setting needs to be consistent with the number of -1 in the input shape. Fix: see atc --help for the dynamic gear flags" \
  "${common[@]}" --output=out/bad "--input_shape=x:-1,3,-1,8" "--dynamic_dims=1;2" --input_format=ND

finish
