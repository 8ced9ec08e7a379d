#!/usr/bin/env bash
# converter_lite quant_type=FULL_QUANT on the sample CNN: calibrated on 20 seeded samples given as
# converter_lite's calibrate_path (one folder per input), the .ms holds int8 Conv2DFusion /
# MatMulFusion between QuantDTypeCast nodes, runs in kiln's executor within cosine 0.99 of the float
# model, repeats byte for byte; config and data errors are one coded line and leave no .ms. With
# ../shared/judges present, the real MindSpore Lite runtime runs the .ms and agrees with kiln's run.
# Usage: tests/cli/full_quant.sh CONVERTER_LITE KILN SOURCE_DIR [WORKDIR]
set -uo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
needArgs 3 "CONVERTER_LITE KILN SOURCE_DIR [WORKDIR]" "$@"
converter=$1
kiln=$2
src=$3
makeWork kiln-full-quant "${4:-}"
cd "$work" || exit 2
model=$src/samples/tiny_cnn.onnxtxt
judges=$src/../shared/judges

for i in $(seq 1 20); do
  mkdir -p calibration/image
  "$kiln" tensor make --random --seed "$i" --shape 1,1,8,8 --name image \
    -o "calibration/image/s$(printf %02d "$i").npy" >/dev/null
done
"$kiln" tensor make --random --seed 99 --shape 1,1,8,8 --name image -o test.pb >/dev/null

config() { # config FILE EXTRA_LINES...: a FULL_QUANT config over calibration/image
  local file=$1
  shift
  printf '[common_quant_param]\nquant_type=FULL_QUANT\nbit_num=8\n[data_preprocess_param]\ncalibrate_path=image:%s\ninput_type=BIN\n' \
    "$work/calibration/image" >"$file"
  for line in "$@"; do printf '%s\n' "$line" >>"$file"; done
}
convert() { # convert NAME CONFIG: converter_lite to NAME.ms
  "$converter" --fmk=ONNX --modelFile="$model" --outputFile="$work/$1" --configFile="$2" \
    >"$work/stdout" 2>"$work/stderr"
  status=$?
}
opCount() { "$kiln" inspect "$1" | awk -v op="$2" '$1 == op { n = $2 } END { print n + 0 }'; }
atLeast() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

for method in MAX_MIN KL REMOVAL_OUTLIER; do
  config "$method.cfg" "[full_quant_param]" "activation_quant_method=$method"
  convert "$method" "$method.cfg"
  if [ "$status" -ne 0 ] || ! grep -qx "CONVERT RESULT SUCCESS:0" stdout; then
    fail "$method converts" "exit $status: $(head -c 300 stderr)"
    continue
  fi
  if grep -q "FULL_QUANT: calibrated $method on 20 sample(s)" stderr &&
    grep -q "2 Conv/MatMul/Gemm quantized, 0 skipped" stderr; then
    pass "$method: the calibration is reported"
  else fail "$method: the calibration is reported" "$(grep FULL_QUANT stderr | head -3)"; fi
  cosine=$("$kiln" compare "$model" "$method.ms" 2>/dev/null | awk '$1 == "probabilities" { print $2 }')
  if [ -n "$cosine" ] && atLeast "$cosine" 0.99; then pass "$method: cosine $cosine vs float"
  else fail "$method: cosine vs float >= 0.99" "cosine '$cosine'"; fi
done

# The int8 form: the Conv and the Gemm run as int8 ops between QuantDTypeCast borders.
conv=$(opCount MAX_MIN.ms Conv2DFusion)
casts=$(opCount MAX_MIN.ms QuantDTypeCast)
if [ "$conv" = 1 ] && [ "$casts" -ge 2 ] && "$kiln" inspect --ir MAX_MIN.ms | grep -q 'QLinearConv'; then
  pass "the .ms holds an int8 Conv2DFusion and $casts QuantDTypeCast, read back as QLinearConv"
else fail "int8 Conv2DFusion between QuantDTypeCast" "Conv2DFusion $conv, QuantDTypeCast $casts"; fi


convert again MAX_MIN.cfg
if cmp -s MAX_MIN.ms again.ms; then pass "a repeat writes the same bytes"
else fail "a repeat writes the same bytes" "MAX_MIN.ms and again.ms differ"; fi

# skip_quant_node keeps the named node float.
config skip.cfg
sed -i 's/^bit_num=8$/bit_num=8\nskip_quant_node=logits/' skip.cfg
convert skip skip.cfg
if [ "$status" -eq 0 ] && grep -q "1 Conv/MatMul/Gemm quantized, 1 skipped" stderr; then
  pass "skip_quant_node keeps the Gemm float"
else fail "skip_quant_node keeps the Gemm float" "exit $status: $(grep FULL_QUANT stderr | tail -1)"; fi

# refuses NAME CODE TEXT CONFIG: exit non-zero, one coded error naming TEXT, no .ms left.
refuses() {
  rm -f "$work/bad.ms"
  convert bad "$4"
  if [ "$status" -eq 0 ]; then
    fail "$1" "exit 0"
  elif ! grep -Eq "^converter_lite: error $2[0-9]* \(-?[0-9]+\): .*$3" stderr; then
    fail "$1" "stderr lacks '$2 ... $3': $(head -c 300 stderr)"
  elif [ -e "$work/bad.ms" ] || compgen -G "$work/.bad.ms.tmp-*" >/dev/null; then
    fail "$1" "an output file was left"
  else pass "$1"; fi
}
# input_type=IMAGE: 8-bit gray PNGs (GRAY, resized from 16x16, (v - 100) / 50) calibrate to the same
# bytes as the same pixels given as raw float tensors preprocessed outside.
if /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
  /usr/bin/python3 - "$work" <<'PY'
import os, random, struct, sys
from PIL import Image
work = sys.argv[1]
os.makedirs(os.path.join(work, "png"), exist_ok=True)
os.makedirs(os.path.join(work, "pixels"), exist_ok=True)
for i in range(12):
    rng = random.Random(i)
    # 16x16 blocks of 2x2 equal pixels, so a LINEAR resize to 8x8 reproduces each block's value.
    block = [[rng.randint(0, 255) for _ in range(8)] for _ in range(8)]
    image = Image.new("L", (16, 16))
    image.putdata([block[y // 2][x // 2] for y in range(16) for x in range(16)])
    image.save(os.path.join(work, "png", "%02d.png" % i))
    with open(os.path.join(work, "pixels", "%02d.bin" % i), "wb") as f:
        f.write(struct.pack("<64f", *[(v - 100.0) / 50.0 for row in block for v in row]))
PY
  printf '[common_quant_param]\nquant_type=FULL_QUANT\n[data_preprocess_param]\ncalibrate_path=image:%s/png\ninput_type=IMAGE\nimage_to_format=GRAY\nnormalize_mean=[100]\nnormalize_std=[50]\nresize_width=8\nresize_height=8\n' "$work" >png.cfg
  printf '[common_quant_param]\nquant_type=FULL_QUANT\n[data_preprocess_param]\ncalibrate_path=image:%s/pixels\ninput_type=BIN\n' "$work" >pixels.cfg
  convert png png.cfg
  pngStatus=$status
  convert pixels pixels.cfg
  if [ "$pngStatus" -eq 0 ] && [ "$status" -eq 0 ] && cmp -s png.ms pixels.ms; then
    pass "input_type=IMAGE (PNG, GRAY, resize, normalize) calibrates like the same pixels as tensors"
  else fail "input_type=IMAGE calibrates like the same pixels as tensors" "exit $pngStatus/$status or the .ms differ"; fi
  printf 'not an image' >png/99.png
  refuses "a file that is no image" K4001 "99.png" png.cfg
  rm -f png/99.png
  sed -i 's/resize_width=8/resize_width=9/' png.cfg
  refuses "an image size the input does not take" K4001 "set resize_width/resize_height" png.cfg
else
  echo "SKIP input_type=IMAGE: python3-pil is not installed (scripts/install-deps.sh installs it)"
fi

printf '[common_quant_param]\nquant_type=FULL_QUANT\n[data_preprocess_param]\ncalibrate_path=image:%s/absent\n' "$work" >absent.cfg
refuses "a missing calibration folder" K1001 "absent" absent.cfg
printf '[common_quant_param]\nquant_type=FULL_QUANT\n[data_preprocess_param]\ncalibrate_path=picture:%s/calibration/image\n' "$work" >name.cfg
refuses "a folder for an input the model lacks" K4001 "calibrate_path" name.cfg
printf '[common_quant_param]\nquant_type=FULL_QUANT\n[data_preprocess_param]\ncalibrate_path=image:%s/calibration/image\nnormalize_mean=127.5\n' "$work" >mean.cfg
refuses "normalize_mean without brackets" K7201 "write the values in brackets" mean.cfg

# The real MindSpore Lite runtime runs the int8 .ms and agrees with kiln's executor.
if [ ! -x "$judges/mslite/run-msrun.sh" ] && [ ! -f "$judges/mslite/run-msrun.sh" ]; then
  echo "SKIP the MindSpore Lite runtime check: $judges/mslite is absent (it lives beside the checkout in CI)"
else
  "$kiln" run MAX_MIN.ms --input image=test.pb --output-dir kiln_out >/dev/null 2>&1
  "$kiln" tensor make test.pb -o test.bin >/dev/null 2>&1
  mkdir -p ms_out
  if bash "$judges/mslite/run-msrun.sh" "$work/MAX_MIN.ms" "$work/ms_out" "$work/test.bin" >msrun.txt 2>&1 &&
    "$kiln" tensor make ms_out/0.bin --dtype float32 --shape 1,10 -o ms_out/probabilities.pb >/dev/null 2>&1; then
    read -r cosine _ < <(python3 "$src/tests/real_models/tensor_metrics.py" kiln_out/probabilities.pb ms_out/probabilities.pb)
    if [ -n "${cosine:-}" ] && atLeast "$cosine" 0.999; then
      pass "the MindSpore Lite runtime runs the int8 .ms and agrees with kiln (cosine $cosine)"
    else fail "the MindSpore Lite runtime agrees with kiln" "cosine '${cosine:-}'"; fi
  else fail "the MindSpore Lite runtime runs the int8 .ms" "$(tail -3 msrun.txt)"; fi
fi

finish
