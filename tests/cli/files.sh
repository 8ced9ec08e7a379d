#!/usr/bin/env bash
# Every file kiln reads or writes is safe (issue 24, classes 1, 6, 7, 10b): weight files a model
# names stay in its folder, special files are refused without blocking, outputs never replace a
# device, a link or the input, an unwritable output folder is named with the real reason, and a
# model truncated during a run ends in one coded line. Each case checks the exact line and status.
# Usage: tests/cli/files.sh KILN ATC CONVERTER_LITE BENCHMARK SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 5 "KILN ATC CONVERTER_LITE BENCHMARK SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
atc=$2
converter=$3
benchmark=$4
src=$5
makeWork kiln-files "${6:-}"
cd "$work" || exit 2

# run TOOL ARGS...: stdout/stderr to files, status in $status; 20 s at most (a blocked open shows
# up as status 124, not as a hung test).
run() {
  timeout 20 "$@" >"$work/stdout" 2>"$work/stderr" </dev/null
  status=$?
}

# expectLine NAME STATUS LINE TOOL ARGS...: exit STATUS and stderr holding exactly LINE.
expectLine() {
  local name=$1 want=$2 line=$3
  shift 3
  run "$@"
  if [ "$status" -eq 124 ]; then
    fail "$name" "timed out (blocked)"
  elif [ "$status" -ne "$want" ]; then
    fail "$name" "exit $status, expected $want"
  elif ! grep -qxF -- "$line" "$work/stderr"; then
    fail "$name" "stderr lacks the line: $line"
  else
    pass "$name"
  fi
}

# expectSame NAME FILE COPY: FILE is byte-identical to COPY.
expectSame() {
  if cmp -s "$2" "$3"; then pass "$1"; else fail "$1" "$2 changed"; fi
}

# expectAbsent NAME PATH: nothing at PATH, and no temp file of the atomic writer beside it.
expectAbsent() {
  local name=$1 path=$2
  local leftovers
  leftovers=$(find "$(dirname "$path")" -maxdepth 1 -name ".$(basename "$path").tmp-*" | head -n 3)
  if [ -e "$path" ] || [ -L "$path" ]; then
    fail "$name" "$path was written"
  elif [ -n "$leftovers" ]; then
    fail "$name" "temp file left: $leftovers"
  else
    pass "$name"
  fi
}

"$kiln" convert "$src/samples/tiny_cnn.onnxtxt" --to onnx -o tiny.onnx >/dev/null 2>&1 ||
  { echo "cannot write tiny.onnx"; exit 2; }
"$converter" --fmk=ONNX --modelFile=tiny.onnx --outputFile=tiny >/dev/null 2>&1 ||
  { echo "cannot write tiny.ms"; exit 2; }
cp tiny.onnx tiny.onnx.orig
python3 - image.pb <<'PY'
import struct, sys
# TensorProto: dims 1,1,8,8 (field 1), data_type FLOAT (field 2), name "image" (field 8), raw_data (9).
raw = struct.pack("<64f", *([0.5] * 64))
msg = b"".join(b"\x08" + bytes([d]) for d in (1, 1, 8, 8)) + b"\x10\x01" + b"\x42\x05image"
open(sys.argv[1], "wb").write(msg + b"\x4a" + bytes([0x80 | (len(raw) & 0x7F), len(raw) >> 7]) + raw)
PY
"$kiln" run tiny.ms --input image=image.pb --output-dir run_ok >/dev/null 2>&1 ||
  { echo "cannot run tiny.ms on image.pb"; exit 2; }

# --- class 1: a FileConstant's weight file may not lead out of the .om's folder.
# A secret outside the model folder, long enough to stand for any of the model's weights.
head -c 65536 /dev/zero | tr '\0' 'S' >secret.bin
mkdir -p om
"$atc" --framework=5 --model=tiny.onnx --output=om/ext --soc_version=Ascend310P3 \
  --external_weight=1 >/dev/null 2>&1 || { echo "atc --external_weight=1 failed"; exit 2; }
weight=weight/weight_fc_w_fp16
[ -f "om/$weight" ] || { echo "om/$weight missing:" om/weight/*; exit 2; }
judgedByGe "the --external_weight=1 .om passes the om judge" "$src" om/ext.om
"$kiln" convert om/ext.om --to onnx -o om_ok.onnx >"$work/stdout" 2>"$work/stderr" &&
  pass "om with its weights beside it converts" || fail "om with its weights beside it converts" "exit $?"

# The weight file replaced by a symlink to the secret.
mv "om/$weight" om/fc_w.bin
ln -s "$work/secret.bin" "om/$weight"
expectLine "om FileConstant symlink leaving the folder" 1 \
  "kiln: error K8001: om/ext.om: FileConstant 'fc_w_fp16' location '$weight' resolves outside the model folder (to '$work/secret.bin'). Fix: keep the weight files inside the .om's folder, named by relative paths (as atc --external_weight writes them)" \
  "$kiln" convert om/ext.om --to onnx -o leak.onnx
expectAbsent "no output after the refused symlink" leak.onnx
expectLine "om FileConstant symlink, kiln run" 1 \
  "kiln: error K8001: om/ext.om: FileConstant 'fc_w_fp16' location '$weight' resolves outside the model folder (to '$work/secret.bin'). Fix: keep the weight files inside the .om's folder, named by relative paths (as atc --external_weight writes them)" \
  "$kiln" run om/ext.om --input image=image.pb --output-dir run_leak
rm "om/$weight"
mv om/fc_w.bin "om/$weight"

# The location rewritten in the .om itself (same length, so the file stays well formed): ".."
# steps and an absolute path. Runs of "/" pad the new paths to the old length.
rewrite() { # rewrite NEW OUT: ext.om with $weight's location replaced by NEW (padded with "/")
  python3 - "$weight" "$1" om/ext.om "$2" <<'EOF'
import sys
old, new, src, dst = sys.argv[1].encode(), sys.argv[2], sys.argv[3], sys.argv[4]
head, _, tail = new.rpartition("/")
new = (head + "/" * (len(old) - len(new) + 1) + tail).encode()
assert len(new) == len(old), (new, old)
data = open(src, "rb").read()
assert data.count(old) == 1
open(dst, "wb").write(data.replace(old, new))
EOF
}
rewrite "../secret.bin" om/dotdot.om
dotdot=$(python3 -c "import sys; o='$weight'; n='../secret.bin'; print('..' + '/' * (len(o) - len(n) + 1) + 'secret.bin')")
expectLine "om FileConstant location with '..'" 1 \
  "kiln: error K8001: om/dotdot.om: FileConstant 'fc_w_fp16' location '$dotdot' leaves the model folder. Fix: keep the weight files inside the .om's folder, named by relative paths (as atc --external_weight writes them)" \
  "$kiln" convert om/dotdot.om --to onnx -o leak2.onnx
expectAbsent "no output after the refused '..'" leak2.onnx
rewrite "/etc/passwd" om/absolute.om
absolute=$(python3 -c "o='$weight'; n='/etc/passwd'; print('/etc' + '/' * (len(o) - len(n) + 1) + 'passwd')")
expectLine "om FileConstant absolute location" 1 \
  "kiln: error K8001: om/absolute.om: FileConstant 'fc_w_fp16' location '$absolute' is absolute. Fix: keep the weight files inside the .om's folder, named by relative paths (as atc --external_weight writes them)" \
  "$kiln" convert om/absolute.om --to onnx -o leak3.onnx
expectAbsent "no output after the refused absolute path" leak3.onnx

# --- class 6: special files as inputs are refused at once, for every tool.
mkfifo fifo.onnx fifo.ms fifo.cfg fifo.txt fifo.bin
fifoLine() { echo "$1: error K1002: '$2' is not a regular file (it is a FIFO (named pipe)). Fix: pass a regular file"; }
expectLine "FIFO model: kiln inspect" 1 "$(fifoLine kiln fifo.onnx)" "$kiln" inspect fifo.onnx
expectLine "FIFO model: kiln run" 1 "$(fifoLine kiln fifo.ms)" "$kiln" run fifo.ms --output-dir o
expectLine "FIFO model: kiln convert" 1 "$(fifoLine kiln fifo.onnx)" "$kiln" convert fifo.onnx --to ms -o x.ms
expectLine "FIFO model: converter_lite" 168 \
  "converter_lite: error K1002 (-600): --modelFile: 'fifo.onnx' is not a regular file (it is a FIFO (named pipe)). Fix: pass a regular file" \
  "$converter" --fmk=ONNX --modelFile=fifo.onnx --outputFile=x
expectLine "FIFO model: benchmark" 255 \
  "benchmark: error K1002 (-1): 'fifo.ms' is not a regular file (it is a FIFO (named pipe)). Fix: pass a regular file" \
  "$benchmark" --modelFile=fifo.ms
# atc prints the message in its error block on stdout, the code and fix on stderr.
expectLine "FIFO model: atc" 255 "atc: error K1002 (E10041): Failed to load the model from fifo.onnx. 'fifo.onnx' is not a regular file (it is a FIFO (named pipe)). Fix: pass a regular file" \
  "$atc" --framework=5 --model=fifo.onnx --output=o/x --soc_version=Ascend310P3
if grep -qF "'fifo.onnx' is not a regular file (it is a FIFO (named pipe))" stdout; then
  pass "FIFO model: atc names the FIFO"
else fail "FIFO model: atc names the FIFO" "stdout lacks the reason"; fi
expectLine "FIFO config: converter_lite --configFile" 168 \
  "converter_lite: error K1002 (-600): --configFile: 'fifo.cfg' is not a regular file (it is a FIFO (named pipe)). Fix: pass a regular file" \
  "$converter" --fmk=ONNX --modelFile=tiny.onnx --outputFile=x --configFile=fifo.cfg
expectLine "FIFO keep_dtype: atc --keep_dtype" 255 "atc: error K4201 (E10001): keep_dtype file fifo.txt: 'fifo.txt' is not a regular file (it is a FIFO (named pipe)). Fix: pass a regular file" \
  "$atc" --framework=5 --model=tiny.onnx --output=o/x --soc_version=Ascend310P3 --keep_dtype=fifo.txt
if grep -qF "keep_dtype file fifo.txt: 'fifo.txt' is not a regular file (it is a FIFO (named pipe))" stdout; then
  pass "FIFO keep_dtype: atc names the FIFO"
else fail "FIFO keep_dtype: atc names the FIFO" "stdout lacks the reason"; fi
expectLine "FIFO AIPP config: atc --insert_op_conf" 255 \
  "atc: error K1002: AIPP configuration: 'fifo.cfg' is not a regular file (it is a FIFO (named pipe)). Fix: pass a regular file" \
  "$atc" --framework=5 --model=tiny.onnx --output=o/x --soc_version=Ascend310P3 --insert_op_conf=fifo.cfg
expectLine "FIFO input data: benchmark --inDataFile" 255 \
  "benchmark: error K1002 (-1): --inDataFile: 'fifo.bin' is not a regular file (it is a FIFO (named pipe)). Fix: pass a regular file" \
  "$benchmark" --modelFile=tiny.ms --inDataFile=fifo.bin
mkdir -p folder.bin
expectLine "folder input data: benchmark --inDataFile" 255 \
  "benchmark: error K1002 (-1): --inDataFile: 'folder.bin' is not a regular file (it is a folder). Fix: pass a regular file" \
  "$benchmark" --modelFile=tiny.ms --inDataFile=folder.bin
expectLine "folder as config: converter_lite --configFile" 168 \
  "converter_lite: error K1002 (-600): --configFile: 'folder.bin' is not a regular file (it is a folder). Fix: pass a regular file" \
  "$converter" --fmk=ONNX --modelFile=tiny.onnx --outputFile=x --configFile=folder.bin
expectLine "folder as model: converter_lite --modelFile" 168 \
  "converter_lite: error K1002 (-600): --modelFile: 'folder.bin' is not a regular file (it is a folder). Fix: pass a regular file" \
  "$converter" --fmk=ONNX --modelFile=folder.bin --outputFile=x
expectLine "folder as AIPP config: atc --insert_op_conf" 255 \
  "atc: error K1002: AIPP configuration: 'folder.bin' is not a regular file (it is a folder). Fix: pass a regular file" \
  "$atc" --framework=5 --model=tiny.onnx --output=o/x --soc_version=Ascend310P3 --insert_op_conf=folder.bin
expectLine "folder as expected data: benchmark --benchmarkDataFile" 255 \
  "benchmark: error K1002 (-1): --benchmarkDataFile: 'folder.bin' is not a regular file (it is a folder). Fix: pass a regular file" \
  "$benchmark" --modelFile=tiny.ms --benchmarkDataFile=folder.bin

# --- class 6: outputs that are not regular files, symlinks, or the input itself.
if mknod nulldev c 1 3 2>/dev/null; then
  expectLine "device as -o" 1 \
    "kiln: error K1003: refusing to write 'nulldev': it is a character device, which kiln would replace with a file. Fix: write the output to a regular file path" \
    "$kiln" convert tiny.onnx --to onnx -o nulldev
  expectLine "device as atc --json" 255 \
    "atc: error K1003: refusing to write 'nulldev': it is a character device, which kiln would replace with a file. Fix: write the output to a regular file path" \
    "$atc" --mode=1 --om=om/ext.om --json=nulldev
  if [ -c nulldev ]; then pass "the device is still a device"; else fail "the device is still a device" "replaced"; fi
else
  echo "SKIP device outputs: mknod is not permitted here"
fi
mkfifo out.fifo
expectLine "FIFO as -o" 1 \
  "kiln: error K1003: refusing to write 'out.fifo': it is a FIFO (named pipe), which kiln would replace with a file. Fix: write the output to a regular file path" \
  "$kiln" convert tiny.onnx --to ms -o out.fifo
if [ -p out.fifo ]; then pass "the FIFO is still a FIFO"; else fail "the FIFO is still a FIFO" "replaced"; fi
echo keep >victim.txt
ln -s victim.txt link.ms
expectLine "symlink as -o" 1 \
  "kiln: error K1003: refusing to write 'link.ms': it is a symbolic link (to 'victim.txt'). Fix: kiln does not write through symbolic links; name the real file or another path" \
  "$kiln" convert tiny.onnx --to ms -o link.ms
if [ -L link.ms ] && [ "$(cat victim.txt)" = keep ]; then pass "link and target untouched"; else fail "link and target untouched" "changed"; fi
ln -s victim.txt link.json
expectLine "symlink as atc --json" 255 \
  "atc: error K1003: refusing to write 'link.json': it is a symbolic link (to 'victim.txt'). Fix: kiln does not write through symbolic links; name the real file or another path" \
  "$atc" --mode=1 --om=om/ext.om --json=link.json
expectLine "output is the input" 1 \
  "kiln: error K1003: refusing to write 'tiny.onnx': it is the input 'tiny.onnx', which the output would replace. Fix: write the output to another path" \
  "$kiln" convert tiny.onnx --to onnx -o tiny.onnx
expectSame "the model is unchanged" tiny.onnx tiny.onnx.orig
ln tiny.onnx hard.onnx
expectLine "output is a hard link to the input" 1 \
  "kiln: error K1003: refusing to write 'hard.onnx': it is the input 'tiny.onnx', which the output would replace. Fix: write the output to another path" \
  "$kiln" convert tiny.onnx --to onnx -o hard.onnx
expectSame "the model is unchanged through its hard link" tiny.onnx tiny.onnx.orig
cp tiny.ms tiny.ms.orig
expectLine "kiln convert .ms onto itself" 1 \
  "kiln: error K1003: refusing to write 'tiny.ms': it is the input 'tiny.ms', which the output would replace. Fix: write the output to another path" \
  "$kiln" convert tiny.ms --to ms -o tiny.ms
expectSame "the .ms is unchanged" tiny.ms tiny.ms.orig
expectLine "kiln convert writing over the .om's weight folder" 1 \
  "kiln: error K1003: refusing to write 'om/ext.om': it is the input 'om/ext.om', which the output would replace. Fix: write the output to another path" \
  "$kiln" convert om/ext.om --to onnx -o om/ext.om

# --- class 10b: an output folder on a read-only file system is named with the real reason.
# A private mount namespace keeps the read-only mount from outliving the test.
mkdir -p ro
# Runs a command with $work/ro mounted read-only, in a private mount namespace (so the mount
# cannot outlive the test).
roRun=(unshare -m sh -c 'mount -t tmpfs -o ro,size=64k tmpfs "$0" && exec "$@"' "$work/ro")
if "${roRun[@]}" true 2>/dev/null; then
  expectLine "read-only output folder: kiln run --output-dir" 1 \
    "kiln: error K1003: cannot create the output folder 'ro/out': Read-only file system. Fix: the folder is on a read-only file system; write the output elsewhere" \
    "${roRun[@]}" "$kiln" run tiny.onnx --input image=image.pb --output-dir ro/out
  expectLine "read-only output folder: kiln convert -o" 1 \
    "kiln: error K1003: cannot create a file in 'ro': Read-only file system. Fix: the folder is on a read-only file system; write the output elsewhere" \
    "${roRun[@]}" "$kiln" convert tiny.onnx --to ms -o ro/x.ms
  expectLine "read-only output folder: atc --output" 255 \
    "atc: error K8202 (E10001): Value ro/x for parameter --output is invalid. Reason: [Errno 30] Read-only file system. Fix: '$work/ro' is not writable; make it writable or write elsewhere" \
    "${roRun[@]}" "$atc" --framework=5 --model=tiny.onnx --output=ro/x --soc_version=Ascend310P3
  if grep -qF "Value ro/x for parameter --output is invalid. Reason: [Errno 30] Read-only file system" stdout; then
    pass "read-only output folder: atc gives the reason"
  else fail "read-only output folder: atc gives the reason" "stdout lacks [Errno 30]"; fi
else
  echo "SKIP read-only output folder: cannot mount a read-only tmpfs here (needs root and mount namespaces)"
fi

# --- class 7: the model truncated while kiln runs it: one coded line, status 1, no signal.
# truncateWhenMapped PID FILE: waits until PID has FILE mapped (the run has loaded it), then
# truncates FILE to nothing.
truncateWhenMapped() {
  local pid=$1 file=$2 tries=0
  while ! grep -q "/$file\$" "/proc/$pid/maps" 2>/dev/null && [ $tries -lt 400 ]; do
    sleep 0.05
    tries=$((tries + 1))
  done
  truncate -s 0 "$file"
}
line="kiln: error K1002: 'shrink.ms' became shorter while it was being read (truncated or rewritten in place). Fix: leave input files unchanged while kiln uses them, then run again"
cp tiny.ms shrink.ms
"$kiln" run shrink.ms --input image=image.pb --output-dir shrink_out --repeat 100000 \
  >"$work/stdout" 2>"$work/stderr" &
runner=$!
truncateWhenMapped "$runner" shrink.ms
wait "$runner"
status=$?
if [ "$status" -ne 1 ]; then
  fail "model truncated during kiln run" "exit $status, expected 1"
elif [ "$(cat stderr)" != "$line" ]; then
  fail "model truncated during kiln run" "stderr is not the one line: $line"
else
  pass "model truncated during kiln run"
fi
expectAbsent "no output after the truncated run" shrink_out
cp tiny.ms shrink.ms
"$benchmark" --modelFile=shrink.ms --loopCount=100000 >"$work/stdout" 2>"$work/stderr" &
runner=$!
truncateWhenMapped "$runner" shrink.ms
wait "$runner"
status=$?
if [ "$status" -eq 1 ] && [ "$(cat stderr)" = "${line/kiln:/benchmark:}" ]; then
  pass "model truncated during benchmark"
else
  fail "model truncated during benchmark" "exit $status, expected 1 and the line: ${line/kiln:/benchmark:}"
fi

finish
