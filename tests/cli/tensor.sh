#!/usr/bin/env bash
# kiln tensor without Python: a seeded random input runs the sample model, its outputs become
# benchmark data that the converted .ms passes (and a different input fails); .npy files written
# byte by byte here round-trip through .pb and back unchanged; every bad input is one exact coded
# line, exit 1 and no output file.
# Usage: tests/cli/tensor.sh KILN CONVERTER_LITE BENCHMARK SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 4 "KILN CONVERTER_LITE BENCHMARK SOURCE_DIR [WORKDIR]" "$@"
kiln=$1
converter=$2
benchmark=$3
src=$4
makeWork kiln-tensor "${5:-}"
cd "$work" || exit 2

# prints NAME WANT COMMAND...: exit 0 and stdout exactly WANT (lines joined by \n).
prints() {
  local name=$1 want=$2
  shift 2
  run "$@"
  if [ "$status" -ne 0 ]; then
    fail "$name" "exit $status, expected 0"
  elif [ "$(cat "$work/stdout")" != "$want" ]; then
    fail "$name" "stdout is not: $want"
  else pass "$name"; fi
}

# refuses NAME LINE COMMAND...: exit 1, stderr exactly LINE, and no out.* file left behind.
refuses() {
  local name=$1 want=$2
  shift 2
  rm -f out.*
  run "$@"
  if [ "$status" -ne 1 ]; then
    fail "$name" "exit $status, expected 1"
  elif [ "$(cat "$work/stderr")" != "$want" ]; then
    fail "$name" "stderr is not: $want"
  elif compgen -G 'out.*' >/dev/null || compgen -G '.out.*' >/dev/null; then
    fail "$name" "an output file was left: $(ls -a | grep out.)"
  else pass "$name"; fi
}

# npy FILE DESCR SHAPE DATA [VERSION] [ORDER]: a .npy file as numpy.save lays it out (header padded
# with spaces to a multiple of 64 bytes, ending in a newline); DATA is printf escapes.
npy() {
  local file=$1 descr=$2 shape=$3 data=$4 version=${5:-1} order=${6:-False}
  local header="{'descr': '$descr', 'fortran_order': $order, 'shape': $shape, }"
  local prefix=$((version == 1 ? 10 : 12))
  local total=$(((prefix + ${#header} + 1 + 63) / 64 * 64))
  local length=$((total - prefix))
  header=$(printf '%s%*s' "$header" $((length - ${#header} - 1)) '')
  {
    # The inner printf writes the escapes (\\ becomes \) that the outer one turns into bytes.
    if [ "$version" -eq 1 ]; then
      printf "$(printf '\\x93NUMPY\\x%02x\\x00\\x%02x\\x%02x' "$version" $((length & 255)) $((length >> 8)))"
    else
      printf "$(printf '\\x93NUMPY\\x%02x\\x00\\x%02x\\x%02x\\x00\\x00' "$version" $((length & 255)) $((length >> 8)))"
    fi
    printf '%s\n' "$header"
    printf "$data"
  } >"$file"
}

# --- random input -> kiln run -> benchmark data -> benchmark on the converted .ms ---
run "$kiln" convert "$src/samples/tiny_cnn.onnxtxt" --to onnx -o tiny_cnn.onnx
run "$converter" --fmk=ONNX --modelFile=tiny_cnn.onnx --outputFile=tiny_cnn
if [ -f tiny_cnn.ms ]; then pass "converter_lite tiny_cnn.ms"; else fail "converter_lite tiny_cnn.ms" "no .ms"; fi

prints "make random .pb" "kiln: wrote image.pb ('image', float32 [1,1,8,8])" \
  "$kiln" tensor make --random --seed 1 --shape 1,1,8,8 -o image.pb
prints "make .bin from .pb" "kiln: wrote image.bin ('image', float32 [1,1,8,8])" \
  "$kiln" tensor make image.pb -o image.bin
size=$(stat -c %s image.bin)
if [ "$size" -eq 256 ]; then pass ".bin is 64 raw float32"; else fail ".bin is 64 raw float32" "$size bytes"; fi
"$kiln" tensor make --random --seed 1 --shape 1,1,8,8 --name image -o again.pb >/dev/null
if cmp -s image.pb again.pb; then pass "same seed, same bytes"; else fail "same seed, same bytes" "differ"; fi
"$kiln" tensor make --random --seed 2 --shape 1,1,8,8 -o other.bin >/dev/null
if ! cmp -s image.bin other.bin; then pass "another seed, other bytes"; else fail "another seed, other bytes" "same"; fi
# The generator is fixed (splitmix64), so these values hold on every machine.
prints "make random 2x3" "kiln: wrote r.pb ('r', float32 [2,3])" \
  "$kiln" tensor make --random --seed 7 --shape 2,3 -o r.pb
prints "show random" "name: r
dtype: float32
shape: [2,3]
elements: 6
min: -0.966424
max: 0.801521
mean: -0.135939
values: -0.220341 -0.966424 0.801521 0.165861 -0.0951163 -0.501137" \
  "$kiln" tensor show r.pb

run "$kiln" run tiny_cnn.onnx --input image=image.pb --output-dir outputs
prints "benchmark data from kiln run" "kiln: wrote expected.txt (1 tensor(s))" \
  "$kiln" tensor benchmark-data outputs/probabilities.pb -o expected.txt
if [ "$(head -1 expected.txt)" = "probabilities 2 1 10" ] && [ "$(sed -n 2p expected.txt | wc -w)" -eq 10 ] &&
  [ "$(wc -l <expected.txt)" -eq 2 ]; then
  pass "benchmark data layout"
else fail "benchmark data layout" "$(head -c 300 expected.txt)"; fi
run "$benchmark" --modelFile=tiny_cnn.ms --inDataFile=image.bin --benchmarkDataFile=expected.txt
if [ "$status" -eq 0 ] && grep -qx "Mean bias of all nodes/tensors: 0.000000%" "$work/stdout" &&
  grep -qx "Run Benchmark tiny_cnn.ms Success." "$work/stdout"; then
  pass "benchmark passes on kiln run's outputs"
else fail "benchmark passes on kiln run's outputs" "exit $status"; fi
run "$benchmark" --modelFile=tiny_cnn.ms --inDataFile=other.bin --benchmarkDataFile=expected.txt
if [ "$status" -ne 0 ] && grep -q "K7302" "$work/stderr"; then
  pass "benchmark fails on another input"
else fail "benchmark fails on another input" "exit $status"; fi

# --- .npy files written here, read, and written back byte for byte ---
npy f32.npy '<f4' '(2, 3)' '\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40\x00\x00\xc0\x40'
prints "show .npy float32" "name: (none)
dtype: float32
shape: [2,3]
elements: 6
min: 1
max: 6
mean: 3.5
values: 1 2 3 4 5 6" "$kiln" tensor show f32.npy
prints ".npy -> .pb" "kiln: wrote f32.pb ('f32', float32 [2,3])" "$kiln" tensor make f32.npy -o f32.pb
prints ".pb -> .npy" "kiln: wrote back.npy ('f32', float32 [2,3])" "$kiln" tensor make f32.pb -o back.npy
if cmp -s f32.npy back.npy; then pass ".npy round trip"; else fail ".npy round trip" "bytes differ"; fi
npy i8.npy '|i1' '(4,)' '\xfd\xfe\xff\x7f'
npy u8.npy '|u1' '(2, 2)' '\x00\x01\xfe\xff'
npy b1.npy '|b1' '(3,)' '\x01\x00\x01'
npy i32.npy '<i4' '(2,)' '\xff\xff\xff\xff\x00\x00\x00\x80'
npy i64.npy '<i8' '()' '\x01\x00\x00\x00\x00\x00\x00\x40'
npy f16.npy '<f2' '(2,)' '\x00\x3c\x00\xc1'
npy f64.npy '<f8' '(1,)' '\x00\x00\x00\x00\x00\x00\x04\x40'
npy empty.npy '<f4' '(0, 3)' ''
for kind in i8 u8 b1 i32 i64 f16 f64 empty; do
  "$kiln" tensor make $kind.npy -o $kind.pb >/dev/null && "$kiln" tensor make $kind.pb -o $kind.back.npy >/dev/null
  if cmp -s $kind.npy $kind.back.npy; then pass ".npy round trip $kind"; else fail ".npy round trip $kind" "bytes differ"; fi
done
prints "show int8" "values: -3 -2 -1 127" sh -c "'$kiln' tensor show i8.npy | tail -1"
prints "show int32" "values: -1 -2147483648" sh -c "'$kiln' tensor show i32.npy | tail -1"
prints "show int64 scalar" "shape: []
elements: 1
min: 4611686018427387905
max: 4611686018427387905
mean: 4.61169e+18
values: 4611686018427387905" sh -c "'$kiln' tensor show i64.npy | tail -6"
prints "show float16" "values: 1 -2.5" sh -c "'$kiln' tensor show f16.npy | tail -1"
prints "show empty" "shape: [0,3]
elements: 0" sh -c "'$kiln' tensor show empty.npy | tail -2"
npy v2.npy '<f8' '(1,)' '\x00\x00\x00\x00\x00\x00\x04\x40' 2
prints "version 2.0 header" "values: 2.5" sh -c "'$kiln' tensor show v2.npy | tail -1"
prints ".npy float64 -> float32 .bin" "kiln: wrote f64.bin ('f64', float32 [1])" \
  "$kiln" tensor make f64.npy --dtype float32 -o f64.bin
if [ "$(od -An -tx1 f64.bin | tr -d ' ')" = "00002040" ]; then pass ".bin bytes"; else fail ".bin bytes" "$(od -An -tx1 f64.bin)"; fi
prints "raw .bin read back" "values: 2.5" sh -c "'$kiln' tensor show f64.bin --dtype float32 --shape 1 | tail -1"
prints "fill" "values: 3 3 3 3" sh -c "'$kiln' tensor make --fill 3 --dtype int32 --shape 2,2 -o fill.npy >/dev/null && '$kiln' tensor show fill.npy | tail -1"

# --- bad inputs: one coded line each ---
npy fortran.npy '<f4' '(1,)' '\x00\x00\x80\x3f' 1 True
refuses "fortran order" "kiln: error K6001: fortran.npy: .npy array is in Fortran order (fortran_order: True). Fix: save a C-ordered array: numpy.save(path, numpy.ascontiguousarray(a))" \
  "$kiln" tensor make fortran.npy -o out.pb
npy big.npy '>f4' '(1,)' '\x3f\x80\x00\x00'
refuses "big-endian" "kiln: error K6001: big.npy: .npy element type '>f4' is big-endian. Fix: save the array as little-endian: a.astype(a.dtype.newbyteorder('<'))" \
  "$kiln" tensor make big.npy -o out.pb
npy u16.npy '<u2' '(1,)' '\x01\x00'
refuses "unsupported element type" "kiln: error K6001: u16.npy: .npy element type '<u2' is not supported. Fix: save the array as one of <f4, <f2, <f8, |i1, |u1, <i4, <i8, |b1" \
  "$kiln" tensor make u16.npy -o out.pb
npy short.npy '<f4' '(2, 3)' '\x00\x00\x80\x3f'
refuses "data shorter than the shape" "kiln: error K6001: short.npy: .npy data is 4 bytes but shape (2,3) of float32 needs 24. Fix: the file is cut short or has bytes after the array; write it again" \
  "$kiln" tensor make short.npy -o out.pb
npy huge.npy '<f4' '(4294967296, 4294967296)' ''
refuses "element count overflow" "kiln: error K6001: huge.npy: .npy shape: element count of [4294967296,4294967296] overflows. Fix: save an array of a size a tensor can hold" \
  "$kiln" tensor make huge.npy -o out.pb
npy v3.npy '<f4' '(1,)' '\x00\x00\x80\x3f' 3
refuses "format version 3" "kiln: error K6001: v3.npy: .npy format version 3.0 is not supported. Fix: save with numpy.save, which writes version 1.0 (2.0 for huge headers)" \
  "$kiln" tensor show v3.npy
printf 'PK\x03\x04not numpy' >zip.npy
refuses "not a .npy" "kiln: error K6001: zip.npy: not a .npy file (no \\x93NUMPY magic). Fix: write the file with numpy.save (a C-ordered array of a supported type), or make it with \`kiln tensor make\`" \
  "$kiln" tensor show zip.npy
printf '\x93NUMPY\x01\x00\xff\x00{' >cut.npy
refuses "header cut short" "kiln: error K6001: cut.npy: .npy header says 255 bytes but the file has 1 after it. Fix: the file is cut short; write it again" \
  "$kiln" tensor show cut.npy
npy extra.npy '<f4' '(1,)' '\x00\x00\x80\x3f'
sed -i "s/'shape'/'shapes'/" extra.npy
refuses "unknown header key" "kiln: error K6001: extra.npy: .npy header: unknown key 'shapes'. Fix: write the file with numpy.save (a C-ordered array of a supported type), or make it with \`kiln tensor make\`" \
  "$kiln" tensor show extra.npy
refuses "missing file" "kiln: error K1001: cannot open 'absent.npy': no such file. Fix: check the path" \
  "$kiln" tensor make absent.npy -o out.pb
refuses "unknown dtype" "kiln: error K4001: --dtype: 'float8' is not an element type kiln tensor takes. Fix: use one of float32, float16, float64, int8, uint8, int32, int64, bool" \
  "$kiln" tensor make --random --dtype float8 --shape 2 -o out.pb
refuses "bad shape" "kiln: error K4001: --shape: '-2' in '3,-2' is not a non-negative integer. Fix: write the dims separated by commas, e.g. --shape 1,3,224,224" \
  "$kiln" tensor make --random --shape=3,-2 -o out.pb
refuses "shape overflow" "kiln: error K4001: --shape: the element count of [4294967296,4294967296] overflows. Fix: give the dims of a tensor that fits in memory" \
  "$kiln" tensor make --fill 0 --shape 4294967296,4294967296 -o out.pb
refuses "raw file size" "kiln: error K6001: image.bin: holds 256 bytes but --shape 1,3,8,8 of float32 needs 768. Fix: give the --dtype and --shape the file was written with" \
  "$kiln" tensor make image.bin --dtype float32 --shape 1,3,8,8 -o out.pb
refuses "raw file without --dtype" "kiln: error K4001: --dtype: image.bin is raw data (not .pb or .npy), so its element type must be given. Fix: add --dtype (one of float32, float16, float64, int8, uint8, int32, int64, bool) and --shape" \
  "$kiln" tensor show image.bin
refuses "reshape to another count" "kiln: error K4001: --shape: [3,3] has 9 elements but the tensor has 6 ([2,3]). Fix: give dims whose product is the tensor's element count" \
  "$kiln" tensor make f32.npy --shape 3,3 -o out.pb
refuses "two sources" "kiln: error K4001: kiln tensor make: give exactly one of FILE (.npy, .pb or raw), --random or --fill VALUE. Fix: e.g. kiln tensor make --random --seed 1 --shape 1,3,224,224 -o x.pb" \
  "$kiln" tensor make f32.npy --random -o out.pb
refuses "random without shape" "kiln: error K4001: --shape: --random needs the tensor's dims. Fix: add --shape with the dims, e.g. --shape 1,3,224,224" \
  "$kiln" tensor make --random -o out.pb
refuses "fill out of range" "kiln: error K4001: --fill: 300 is outside uint8 (0 to 255). Fix: give a value the type holds, or another --dtype" \
  "$kiln" tensor make --fill 300 --dtype uint8 --shape 2 -o out.pb
refuses "fill not a number" "kiln: error K4001: --fill: 'one' is not a float32 value. Fix: write a decimal number, nan, inf or -inf" \
  "$kiln" tensor make --fill one --shape 2 -o out.pb
refuses "range outside the type" "kiln: error K4001: --range: [0, 1000) goes beyond int8 (whole numbers from -128 to 127). Fix: write --range LOW,HIGH with whole numbers LOW < HIGH; values are drawn from LOW to HIGH-1" \
  "$kiln" tensor make --random --range 0,1000 --dtype int8 --shape 2 -o out.pb
refuses "seed without random" "kiln: error K4001: --seed: only --random draws values. Fix: add --random, or drop the flag" \
  "$kiln" tensor make --fill 1 --seed 3 --shape 2 -o out.pb
refuses "output extension" "kiln: error K4001: --output: 'out.txt' is not a .pb, .npy or .bin file. Fix: name the output FILE.pb (ONNX TensorProto, for kiln run / compare --input), FILE.bin (raw, for benchmark --inDataFile) or FILE.npy" \
  "$kiln" tensor make --fill 1 --shape 2 -o out.txt
refuses "benchmark data needs names" "kiln: error K6001: f32.npy: the tensor has no name, and benchmark data names each output. Fix: pass the TensorProto files \`kiln run\` writes for the model's outputs" \
  "$kiln" tensor benchmark-data f32.npy -o out.txt
refuses "benchmark data, a file twice" "kiln: error K6001: outputs/probabilities.pb: tensor 'probabilities' was already given by another file. Fix: pass each output's file once" \
  "$kiln" tensor benchmark-data outputs/probabilities.pb outputs/probabilities.pb -o out.txt
refuses "not a TensorProto" "kiln: error K6001: zip.pb: not a TensorProto. Fix: pass a serialized onnx TensorProto (as \`kiln run\` and \`kiln tensor make\` write)" \
  sh -c "cp zip.npy zip.pb && '$kiln' tensor show zip.pb"
refuses "no subcommand" "kiln: error K4001: A subcommand is required. Fix: run 'kiln --help' for the accepted flags" \
  "$kiln" tensor

finish
