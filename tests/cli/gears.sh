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
if attr(case, "batch_num")["i"] != "3" and attr(case, "batch_num")["i"] != 3: problems.append("batch_num")
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

run "${common[@]}" --output=out/dims "--input_shape=x:-1,3,-1,8" "--dynamic_dims=1,8;2,16"
if [ "$status" -eq 0 ] && "$kiln" compare dyn.onnx out/dims.om --input-shape "x:2,3,16,8" >compare.txt 2>&1; then
  pass "--dynamic_dims gear 2,16 matches ONNX"
else fail "--dynamic_dims gear 2,16 matches ONNX" "exit $status: $(tail -5 compare.txt 2>/dev/null)"; fi

# A shape that is no gear: refused by the run, not computed on the wrong branch.
if "$kiln" compare dyn.onnx out/batch.om --input-shape "x:3,3,8,8" >compare.txt 2>&1; then
  fail "batch 3 is no gear" "compare passed"
else pass "batch 3 is no gear"; fi

# --mode=3 checks every gear (static shapes), not the -1 model.
run --mode=3 "${common[@]}" --output=out/check "--input_shape=x:-1,3,8,8" --dynamic_batch_size=1,2,4
if [ "$status" -eq 0 ] && python3 -c 'import json,sys; d=json.load(open("check_result.json")); sys.exit(d["result"] != "success")'; then
  pass "--mode=3 with gears checks each gear"
else fail "--mode=3 with gears checks each gear" "exit $status"; fi

# ATC's rules for the flags (om.md §2.6).
failsWithCode() {
  local name=$1 code=$2
  shift 2
  run "$@"
  if [ "$status" -ne 0 ] && grep -qF "($code)" stdout && [ ! -e out/bad.om ]; then pass "$name"
  else fail "$name" "exit $status, expected $code"; fi
}
failsWithCode "batch gear on a non-batch axis" E10018 "${common[@]}" --output=out/bad "--input_shape=x:1,-1,8,8" --dynamic_batch_size=1,2
failsWithCode "duplicate gears" E10039 "${common[@]}" --output=out/bad "--input_shape=x:-1,3,8,8" --dynamic_batch_size=1,1
failsWithCode "gear value 0" E10038 "${common[@]}" --output=out/bad "--input_shape=x:-1,3,8,8" --dynamic_batch_size=0,2
failsWithCode "dims count differs from the -1s" E10003 "${common[@]}" --output=out/bad "--input_shape=x:-1,3,-1,8" "--dynamic_dims=1;2"

finish
