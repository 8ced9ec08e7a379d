#!/usr/bin/env bash
# Every real model converts with converter_lite without --inputShape (dynamic dims stay -1 in the
# .ms), and each .ms runs in kiln's executor close to the ONNX model on the inputs the real_models
# test saved (cosine >= 0.999 per output). Also the silero VAD exports of @ricky0123/vad-web that
# tests/real_models does not list (v6: its 1-D Conv sits inside If branches).
# A static model (isnet_fp16, isnet_quint8, oww_hey_jarvis, oww_timer) is one real_models converted
# without --inputShape already, with these very flags, and ran in kiln as ONNX and as .ms on the
# same saved inputs (compare.mjs leaves converter_lite.args, converter_lite.log, out_onnx/, out_ms/):
# its checks read those instead of converting and running it again (the two isnets' runs are ~20 s
# of CPU); the conversion's success line and the cosine of every output are checked the same way.
# Usage: no_input_shape.sh BUILD_DIR. Exit 77 (ctest: skipped) when the real models are absent.
set -uo pipefail
build=$(realpath -m "$1")
kiln="$build/tools/kiln"
converter="$build/tools/converter_lite"
# Resolved as run.sh resolves it, so the paths compare.mjs wrote in converter_lite.args match.
out=$(realpath -m "$build/real_models/out")
vad="$build/real_models/npm/node_modules/@ricky0123/vad-web/dist"
if ! compgen -G "$out/models/*.onnx" >/dev/null; then
  echo "SKIP: the real models are not in $out/models (run ctest -R real_models first)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-no-input-shape-XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
check() { # check NAME OK DETAIL
  if [ "$2" = 1 ]; then
    echo "PASS $1"
    passed=$((passed + 1))
  else
    echo "FAIL $1: $3"
    failed=$((failed + 1))
  fi
}

models=("$out"/models/*.onnx)
for extra in "$vad"/silero_vad_*.onnx; do
  [ -e "$extra" ] || continue
  [ -e "$out/models/$(basename "$extra")" ] || models+=("$extra")
done
here=$(cd "$(dirname "$0")" && pwd)
reused=0
for model in "${models[@]}"; do
  name=$(basename "$model" .onnx)
  saved=$out/$name
  if [ "$(dirname "$model")" = "$out/models" ] && [ -f "$saved/converter_lite.args" ] &&
    ! grep -q -- '--inputShape' "$saved/converter_lite.args" &&
    [ "$(cat "$saved/converter_lite.args")" = "$(printf '%s\n' --fmk=ONNX "--modelFile=$model" "--outputFile=$saved/$name")" ] &&
    [ -s "$saved/$name.ms" ] && [ -d "$saved/out_onnx" ] && [ -d "$saved/out_ms" ]; then
    reused=$((reused + 1))
    ok=0
    grep -q "CONVERT RESULT SUCCESS:0" "$saved/converter_lite.log" && ok=1
    check "$name converts without --inputShape (real_models' conversion)" $ok \
      "no success line in $saved/converter_lite.log"
    [ $ok = 1 ] || continue
    node "$here/cosines.mjs" "$saved/out_onnx" "$saved/out_ms" >"$work/stdout" 2>"$work/stderr"
    st=$?
    bad=$(awk 'NF == 2 { n++; if (!($2 + 0 >= 0.999)) b++ } END { print (n ? b + 0 : -1) }' "$work/stdout")
    ok=0
    [ $st -eq 0 ] && [ "$bad" = 0 ] && ok=1
    check "$name: the .ms without --inputShape matches ONNX on the saved inputs (real_models' runs)" $ok \
      "exit $st, $bad output(s) below cosine 0.999: $(tail -c 600 "$work/stdout" "$work/stderr")"
    continue
  fi
  "$converter" --fmk=ONNX --modelFile="$model" --outputFile="$work/$name" >"$work/stdout" 2>"$work/stderr"
  st=$?
  ok=0
  [ $st -eq 0 ] && grep -q "CONVERT RESULT SUCCESS:0" "$work/stdout" && [ -s "$work/$name.ms" ] && ok=1
  check "$name converts without --inputShape" $ok "exit $st: $(tail -c 600 "$work/stderr")"
  [ $ok = 1 ] || continue
  feeds=()
  for f in "$out/$name"/input.*.pb; do
    [ -e "$f" ] || continue
    # The file names sanitize the input names ('onnx::Flatten_0'); the TensorProto keeps them.
    input=$("$kiln" tensor show "$f" | sed -n 's/^name: //p')
    feeds+=(--input "$input=$f")
  done
  [ ${#feeds[@]} -gt 0 ] || continue
  "$kiln" compare "$model" "$work/$name.ms" "${feeds[@]}" >"$work/stdout" 2>"$work/stderr"
  st=$?
  # Rows after the header: NAME COSINE MEAN_REL MAX_ABS SQNR, counted from the end (a name may
  # hold spaces); every output must be close.
  bad=$(awk 'NR > 1 && NF >= 5 { n++; if ($(NF - 3) + 0 < 0.999) b++ } END { print (n ? b + 0 : -1) }' "$work/stdout")
  ok=0
  [ $st -eq 0 ] && [ "$bad" = 0 ] && ok=1
  check "$name: the .ms without --inputShape matches ONNX on the saved inputs" $ok \
    "exit $st, $bad output(s) below cosine 0.999: $(tail -c 600 "$work/stderr")"
done
echo "$reused static model(s) checked on real_models' conversion and runs"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
