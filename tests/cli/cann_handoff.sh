#!/usr/bin/env bash
# The hand-off to CANN's atc (--cann_atc=PATH, KILN_CANN_ATC, an atc on PATH that is not kiln's):
# kiln's pre-flight and simplification, then a fake CANN atc (a script recording its arguments and
# the model it is given) runs with the user's flags and --model replaced by the prepared ONNX; its
# output and exit status are the run's, the temporary model is removed, kiln's own framing and
# "not device-runnable" note are not printed. Unusable paths are one coded error each; kiln's own
# atc (this binary or a copy) is never taken for CANN's.
# Usage: tests/cli/cann_handoff.sh ATC KILN SOURCE_DIR [WORKDIR]
set -uo pipefail

if [ $# -lt 3 ]; then
  echo "usage: $0 ATC KILN SOURCE_DIR [WORKDIR]" >&2
  exit 2
fi
atc=$1
kiln=$2
src=$3
work=${4:-$(mktemp -d "${TMPDIR:-/tmp}/kiln-handoff-XXXXXX")}
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$work" || exit 2
mkdir -p tmp fake log
export TMPDIR=$work/tmp FAKE_LOG=$work/log

# same NAME FILE EXPECTED: FILE's text is exactly EXPECTED.
same() {
  if [ "$(cat "$work/$2")" = "$3" ]; then pass "$1"; else
    fail "$1" "$2 is not exactly:
$3"
  fi
}

"$kiln" convert "$src/tests/cli/models/nchw_image.onnxtxt" --to onnx -o dyn.onnx >/dev/null ||
  { echo "FAIL setup: kiln convert nchw_image"; exit 1; }
# The fake CANN atc: records its arguments, the environment guard and a copy of the model.
cat >fake/atc <<'SH'
#!/usr/bin/env bash
printf '%s\n' "$@" >"$FAKE_LOG/argv"
echo "${KILN_ATC_HANDOFF:-unset}" >"$FAKE_LOG/guard"
for a in "$@"; do
  case $a in --model=*) cp "${a#--model=}" "$FAKE_LOG/model.onnx"; echo "${a#--model=}" >"$FAKE_LOG/model_path" ;; esac
done
echo "ATC start working now, please wait for a moment."
echo "fake CANN atc on stderr" >&2
echo "ATC run success, welcome to the next use."
exit "${FAKE_EXIT:-0}"
SH
chmod +x fake/atc
common=(--framework=5 --model=dyn.onnx --soc_version=Ascend310P3 --output=out/m)

# --- --cann_atc=PATH: flags forwarded in order, --model replaced, output and status forwarded ---
run "$atc" "${common[@]}" "--input_shape=x:2,3,8,8" --precision_mode=allow_fp32_to_fp16 \
  --cann-atc="$work/fake/atc" --log=error
[ "$status" -eq 0 ] && pass "hand-off exit 0" || fail "hand-off exit 0" "exit $status"
same "CANN's atc is run with the user's flags, --model replaced" log/argv "--framework=5
--model=$(cat log/model_path 2>/dev/null)
--soc_version=Ascend310P3
--output=out/m
--input_shape=x:2,3,8,8
--precision_mode=allow_fp32_to_fp16
--log=error"
case $(cat log/model_path 2>/dev/null) in
"$work"/tmp/kiln-atc-*/dyn.onnx) pass "the prepared model is in a temporary folder" ;;
*) fail "the prepared model is in a temporary folder" "$(cat log/model_path 2>/dev/null)" ;;
esac
if [ -z "$(ls tmp)" ]; then pass "the temporary folder is removed"; else fail "the temporary folder is removed" "$(ls tmp)"; fi
same "CANN's atc runs with the hand-off guard set" log/guard 1
same "stdout is CANN's atc's alone" stdout "ATC start working now, please wait for a moment.
ATC run success, welcome to the next use."
same "stderr says who builds the .om" stderr "atc: kiln's checks and simplification passed; CANN's atc $work/fake/atc (from --cann_atc) builds the .om
fake CANN atc on stderr"
# The prepared model: ONNX with the shapes fixed and the graph simplified (7 nodes become 3).
run "$kiln" inspect log/model.onnx
if [ "$status" -eq 0 ] && grep -qxF "  x: f32[2,3,8,8]" stdout && grep -qxF "  y: f32[2,512]" stdout &&
  grep -qxF "nodes: 3 (0 subgraphs)" stdout; then
  pass "the prepared model is ONNX with fixed shapes, simplified"
else fail "the prepared model is ONNX with fixed shapes, simplified" "status $status"; fi
run "$kiln" compare dyn.onnx log/model.onnx --input-shape x:2,3,8,8
[ "$status" -eq 0 ] && pass "the prepared model computes what the user's does" ||
  fail "the prepared model computes what the user's does" "status $status"

# Exit status forwarded; "--cann_atc PATH" (value as the next argument) and -model= forms.
FAKE_EXIT=7 run "$atc" --cann_atc "$work/fake/atc" --framework=5 -model=dyn.onnx \
  --soc_version=Ascend310P3 --output=out/m "--input_shape=x:1,3,8,8"
[ "$status" -eq 7 ] && pass "CANN's atc's exit status is the run's" || fail "CANN's atc's exit status is the run's" "exit $status"
same "--cann_atc PATH and -model= are replaced" log/argv "--framework=5
--model=$(cat log/model_path 2>/dev/null)
--soc_version=Ascend310P3
--output=out/m
--input_shape=x:1,3,8,8"

# Gears: every gear checked, CANN's atc gets the -1 dims and the gear flag (it builds the gears).
run "$atc" "${common[@]}" "--input_shape=x:-1,3,8,8" --dynamic_batch_size=1,2,4 --cann-atc="$work/fake/atc"
run "$kiln" inspect log/model.onnx
if grep -qxF "  x: f32[N,3,8,8]" stdout && grep -qxF -- "--dynamic_batch_size=1,2,4" log/argv; then
  pass "gears: -1 dims kept, gear flag forwarded"
else fail "gears: -1 dims kept, gear flag forwarded" "$(cat log/argv)"; fi

# Flags kiln cannot build pass on; a flag naming nodes keeps every node (shapes fixed only).
rm -f log/*
run "$atc" "${common[@]}" "--input_shape=x:2,3,8,8" --out_nodes=Relu_1:0 --cann-atc="$work/fake/atc"
run "$kiln" inspect log/model.onnx
if grep -qxF -- "--out_nodes=Relu_1:0" log/argv && grep -qxF "nodes: 7 (0 subgraphs)" stdout &&
  grep -qxF "  x: f32[2,3,8,8]" stdout; then
  pass "--out_nodes passes on, nodes kept"
else fail "--out_nodes passes on, nodes kept" "$(cat log/argv 2>/dev/null)"; fi

# kiln's pre-flight still refuses a mistake: kiln's framing, no CANN atc run, no temporary file.
rm -f log/*
run "$atc" "${common[@]}" "--input_shape=z:2,3,8,8" --cann-atc="$work/fake/atc"
if [ "$status" -eq 255 ] && grep -qF "(E10016): Op name z specified in --input_shape is not found in the model." stdout &&
  [ ! -e log/argv ] && [ -z "$(ls tmp)" ]; then
  pass "a shape mistake stops before CANN's atc"
else fail "a shape mistake stops before CANN's atc" "exit $status"; fi

# --- unusable paths: one coded error, exit 255 ---
badPath() {
  local name=$1 expected=$2
  shift 2
  rm -f out/m.om
  run "$@"
  if [ "$status" -eq 255 ] && [ "$(cat stderr)" = "$expected" ] && [ ! -e log/argv ] &&
    [ ! -e out/m.om ]; then pass "$name"
  else fail "$name" "exit $status (no out/m.om expected); expected stderr: $expected"; fi
}
fixFlag="Fix: pass --cann_atc=<CANN's atc> (e.g. /usr/local/Ascend/ascend-toolkit/latest/bin/atc), or --cann_atc=off to convert with kiln's own atc"
badPath "missing --cann_atc" "atc: error K1001: CANN's atc '/no/such/atc' (from --cann_atc) does not exist. $fixFlag" \
  "$atc" "${common[@]}" "--input_shape=x:2,3,8,8" --cann_atc=/no/such/atc
printf 'x' >plain
badPath "not executable" "atc: error K8202: CANN's atc 'plain' (from --cann_atc) is not an executable file. $fixFlag" \
  "$atc" "${common[@]}" "--input_shape=x:2,3,8,8" --cann_atc=plain
badPath "kiln's own atc" "atc: error K8202: '$atc' (from --cann_atc) is kiln's own atc, not CANN's. $fixFlag" \
  "$atc" "${common[@]}" "--input_shape=x:2,3,8,8" --cann_atc="$atc"
KILN_CANN_ATC=/no/such/atc badPath "missing KILN_CANN_ATC" "atc: error K1001: CANN's atc '/no/such/atc' (from KILN_CANN_ATC) does not exist. Fix: set KILN_CANN_ATC to CANN's atc (e.g. /usr/local/Ascend/ascend-toolkit/latest/bin/atc), or to off to convert with kiln's own atc" \
  "$atc" "${common[@]}" "--input_shape=x:2,3,8,8"

# --- an atc on PATH: CANN's is used; kiln's own (a copy) is skipped; KILN_CANN_ATC=off ---
mkdir -p kilnbin
cp "$atc" kilnbin/atc
rm -f log/*
env -u KILN_CANN_ATC PATH="$work/kilnbin:$work/fake:$PATH" "$atc" "${common[@]}" "--input_shape=x:2,3,8,8" >stdout 2>stderr
status=$?
if [ "$status" -eq 0 ] && grep -qxF "atc: kiln's checks and simplification passed; CANN's atc $work/fake/atc (from PATH) builds the .om" stderr &&
  [ -e log/argv ]; then
  pass "an atc on PATH that is not kiln's takes the build (a copy of kiln's is skipped)"
else fail "an atc on PATH that is not kiln's takes the build (a copy of kiln's is skipped)" "exit $status"; fi
rm -f log/*
env -u KILN_CANN_ATC PATH="$work/kilnbin:$PATH" "$atc" "${common[@]}" "--input_shape=x:2,3,8,8" >stdout 2>stderr
status=$?
if [ "$status" -eq 0 ] && [ -e out/m.om ] && grep -qxF "ATC run success, welcome to the next use." stdout; then
  pass "only kiln's atc on PATH: kiln converts"
else fail "only kiln's atc on PATH: kiln converts" "exit $status"; fi
rm -f out/m.om log/*
KILN_CANN_ATC=off PATH="$work/fake:$PATH" run "$atc" "${common[@]}" "--input_shape=x:2,3,8,8"
if [ "$status" -eq 0 ] && [ -e out/m.om ] && [ ! -e log/argv ] &&
  grep -qF "kiln: note: the .om files kiln writes are not device-runnable" stdout; then
  pass "KILN_CANN_ATC=off: kiln converts, with its note"
else fail "KILN_CANN_ATC=off: kiln converts, with its note" "exit $status"; fi
# The guard: run as CANN's atc by a hand-off (a wrapper calling kiln's atc), kiln never hands off.
rm -f out/m.om log/*
env -u KILN_CANN_ATC KILN_ATC_HANDOFF=1 PATH="$work/fake:$PATH" "$atc" "${common[@]}" "--input_shape=x:2,3,8,8" >stdout 2>stderr
status=$?
if [ "$status" -eq 0 ] && [ -e out/m.om ] && [ ! -e log/argv ]; then pass "a hand-off never hands off again"
else fail "a hand-off never hands off again" "exit $status"; fi
# Other modes run in kiln's atc, with a warning when --cann_atc is given.
run "$atc" --mode=3 "${common[@]}" "--input_shape=x:2,3,8,8" --cann_atc="$work/fake/atc"
if [ "$status" -eq 0 ] && grep -qxF "atc: warning: --cann_atc is used by --mode=0 only; --mode=3 runs in kiln's atc." stderr; then
  pass "--mode=3 runs in kiln's atc"
else fail "--mode=3 runs in kiln's atc" "exit $status"; fi
# --help documents the hand-off.
run "$atc" --help
if grep -qF -- "--cann_atc" stdout && grep -qF "KILN_CANN_ATC" stdout; then pass "--help documents --cann_atc"
else fail "--help documents --cann_atc" "missing"; fi

finish
