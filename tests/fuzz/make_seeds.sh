#!/usr/bin/env bash
# Regenerates the seed corpora in tests/fuzz/corpus/<target>/ : text seeds written here, .onnx /
# .ms / .om seeds made from the repository's tiny models with kiln's own tools (kiln, atc,
# converter_lite of BUILD). Every seed stays a few KB. Usage: make_seeds.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
kiln=$build/tools/kiln atc=$build/tools/atc lite=$build/tools/converter_lite
corpus=$here/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Inputs that once crashed a target (regress_*) are kept: they are not regenerated.
find "$corpus" -type f ! -name 'regress_*' -delete 2>/dev/null || true
mkdir -p "$corpus"/{onnx_import,ms_read,om_read,converter_config,keep_dtype,aipp_config,shape_spec,roundtrip,npy_read}

# Binary ONNX from the small text models (tests/cli/models, samples): import seeds and round-trip
# seeds alike.
models=(affine small_weights scalar_consts resize_third conv_dynamic_same any_channels new_ops
        nchw_image dynamic_shapes tiny_cnn qlinear_int8)
for m in "${models[@]}"; do
  src=$root/tests/cli/models/$m.onnxtxt
  [ -f "$src" ] || src=$root/samples/$m.onnxtxt
  "$kiln" convert "$src" --to onnx -o "$work/$m.onnx" >/dev/null
  cp "$work/$m.onnx" "$corpus/onnx_import/$m.onnx"
  cp "$work/$m.onnx" "$corpus/roundtrip/$m.onnx"
done

# .ms seeds: plain, fp16 weights, 8-bit and 4-bit weight quantization (bit packing), a dynamic dim.
printf '[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=8\nmin_quant_weight_size=0\nmin_quant_weight_channel=0\n' >"$work/q8.cfg"
printf '[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=4\nmin_quant_weight_size=0\nmin_quant_weight_channel=0\n' >"$work/q4.cfg"
ms() { # name model [extra converter_lite flags]
  local name=$1 model=$2
  shift 2
  "$lite" --fmk=ONNX --modelFile="$work/$model.onnx" --outputFile="$work/ms_$name" "$@" >/dev/null
  cp "$work/ms_$name.ms" "$corpus/ms_read/$name.ms"
}
ms affine affine
ms small_weights small_weights
ms tiny_cnn tiny_cnn
ms nchw_image nchw_image
ms tiny_cnn_fp16 tiny_cnn --fp16=on
ms tiny_cnn_q8 tiny_cnn --configFile="$work/q8.cfg"
ms tiny_cnn_q4 tiny_cnn --configFile="$work/q4.cfg"
ms dynamic dynamic_shapes

# .om seeds: plain, AIPP inserted, dynamic batch gears (Case/MapIndex), another soc.
printf 'aipp_op {\n  aipp_mode: static\n  input_format: RGB888_U8\n  src_image_size_w: 8\n  src_image_size_h: 8\n  mean_chn_0: 10\n}\n' >"$work/aipp.cfg"
om() { # name model soc [extra atc flags]
  local name=$1 model=$2 soc=$3
  shift 3
  "$atc" --model="$work/$model.onnx" --framework=5 --output="$work/om_$name" --soc_version="$soc" \
    "$@" >/dev/null
  cp "$work/om_$name.om" "$corpus/om_read/$name.om"
}
om affine affine Ascend310P3
om small_weights small_weights Ascend310P3
om tiny_cnn tiny_cnn Ascend310P3
om tiny_cnn_910 tiny_cnn Ascend910B1
om nchw_image nchw_image Ascend310P3 --input_shape="x:1,3,8,8"
om nchw_image_aipp nchw_image Ascend310P3 --input_shape="x:1,3,8,8" --insert_op_conf="$work/aipp.cfg"
om nchw_image_gears nchw_image Ascend310P3 --input_shape="x:-1,3,8,8" --dynamic_batch_size="1,2"
om nchw_image_fp16 nchw_image Ascend310P3 --input_shape="x:1,3,8,8" --precision_mode=force_fp16

# converter_lite --configFile seeds: every section kiln types, accepted and refused values.
cfg=$corpus/converter_config
printf '[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=8\nmin_quant_weight_size=0\nmin_quant_weight_channel=16\nskip_quant_node=conv1,matmul1\nenable_encode=true\n' >"$cfg/weight_quant.cfg"
printf '[common_quant_param]\nquant_type=WEIGHT_QUANT\nbit_num=4\n\n[weight_quant_param]\nper_channel=false\nbias_correction=true\ndequant_strategy=ON_THE_FLY\nquant_strategy=MAX_MIN\n' >"$cfg/weight_param.cfg"
printf '[registry]\ndisable_fusion=on\nfusion_blacklists=ConvActivationFusion,MatMulAddFusion\nplugin_path=./a.so;./b.so\n' >"$cfg/registry.cfg"
printf '# comment\n; comment\n[full_quant_param]\nactivation_quant_method=KL\ntarget_device=ASCEND\nsmooth_alpha=0.5\n[data_preprocess_param]\ncalibrate_path=in:/tmp/x\ncalibrate_size=10\ninput_type=BIN\n' >"$cfg/ignored.cfg"
printf '[common_quant_param]\r\nquant_type=FULL_QUANT\r\n[mixed_bit_weight_quant_param]\r\ninit_scale=0.02\r\nmax_iterations=100\r\n' >"$cfg/crlf_full.cfg"
printf '[ascend_context]\ninput_shape=x:1,3,224,224\n[micro_param]\nenable_micro=true\n[common_quant_param]\nbit_num=17\n' >"$cfg/bad_range.cfg"

# --keep_dtype seeds.
kd=$corpus/keep_dtype
printf 'conv1\nrelu1\n' >"$kd/names.txt"
printf 'OpType::Softmax\r\n  matmul1  \r\n\r\nOpType:: MatMul\n' >"$kd/optypes_crlf.txt"
printf 'unknown_node\nOpType::\n' >"$kd/bad.txt"

# AIPP (--insert_op_conf) seeds: static with crop/CSC/padding, dynamic, YUV, two ops, multi_shape.
ai=$corpus/aipp_config
cp "$work/aipp.cfg" "$ai/static_rgb.cfg"
printf 'aipp_op {\n  aipp_mode: static\n  related_input_rank: 0\n  input_format: YUV420SP_U8\n  src_image_size_w: 16\n  src_image_size_h: 16\n  crop: true\n  load_start_pos_w: 2\n  load_start_pos_h: 2\n  crop_size_w: 8\n  crop_size_h: 8\n  csc_switch: true\n  rbuv_swap_switch: false\n  var_reci_chn_0: 0.5\n  min_chn_1: 1.5\n}\n' >"$ai/yuv_crop_csc.cfg"
printf 'aipp_op {\n  aipp_mode: static\n  input_format: XRGB8888_U8\n  src_image_size_w: 4\n  src_image_size_h: 4\n  padding: true\n  left_padding_size: 2\n  right_padding_size: 2\n  top_padding_size: 2\n  bottom_padding_size: 2\n  padding_value: 1.0\n  ax_swap_switch: true\n  matrix_r0c0: 256\n  output_bias_0: 0\n  input_bias_1: 0\n}\n' >"$ai/xrgb_padding.cfg"
printf 'aipp_op {\n  aipp_mode: dynamic\n  related_input_name: "images"\n  max_src_image_size: 1000\n}\n' >"$ai/dynamic.cfg"
printf '# two inputs\naipp_op {\n  aipp_mode: static\n  input_format: YUV400_U8\n  related_input_rank: 0\n  src_image_size_w: 8\n  src_image_size_h: 8\n}\naipp_op {\n  aipp_mode: static\n  input_format: RGB888_U8\n  related_input_rank: 1\n  input_edge_idx: 0\n}\nmulti_shape_op {\n  mode: batch\n  related_input_rank: 0\n  batch_list: 1\n  batch_list: 2\n}\n' >"$ai/two_ops.cfg"

# --input_shape seeds: byte 0 picks the dialect (bit 0: converter_lite) and the gear flag the
# second line fills (ATC: (b>>1)%3 = 0 batch, 1 image size, 2 dims; bit 3 NHWC).
ss=$corpus/shape_spec
printf '\x00images:1,3,8,8;tokens:1,4' >"$ss/atc_static"
printf '\x00images:1,3,8,8' >"$ss/atc_one"
printf '\x00-1,3,8,8;1,4' >"$ss/atc_positional"
printf '\x00images:1~4,3,8,8;tokens:1,-1' >"$ss/atc_ranges"
printf '\x00images:-1,3,8,8\n1,2,4' >"$ss/atc_batch_gears"
printf '\x02images:1,3,-1,-1\n8,8;16,16' >"$ss/atc_image_gears"
printf '\x04images:-1,3,8,8;tokens:-1,4\n1,1;2,2' >"$ss/atc_dims_gears"
printf '\x0aimages:1,-1,-1,3\n8,8' >"$ss/atc_nhwc_image_gears"
printf '\x01images:1,3,8,8;tokens:1,4' >"$ss/lite_static"
printf '\x01images:1,3,8,8' >"$ss/lite_one"

# .npy seeds: every element type kiln tensor writes (v1 headers), a scalar, an empty array, and
# the header faults it refuses (Fortran order, big-endian, version 2.0 and 3.0 files edited by hand).
nr=$corpus/npy_read
for t in float32 float16 float64 int8 uint8 int32 int64 bool; do
  "$kiln" tensor make --random --seed 1 --dtype "$t" --shape 2,3 -o "$nr/$t.npy" >/dev/null
done
"$kiln" tensor make --fill 7 --dtype int64 --shape "" -o "$nr/scalar.npy" >/dev/null
"$kiln" tensor make --fill 0 --shape 0,4 -o "$nr/empty.npy" >/dev/null
sed "s/False/True /" "$nr/float32.npy" >"$nr/fortran.npy"
sed "s/'<f4'/'>f4'/" "$nr/float32.npy" >"$nr/big_endian.npy"
{ printf '\x93NUMPY\x02\x00\x76\x00\x00\x00'; tail -c +11 "$nr/float64.npy"; } >"$nr/version2.npy"
{ printf '\x93NUMPY\x03\x00'; tail -c +9 "$nr/float32.npy"; } >"$nr/version3.npy"

du -sh "$corpus"/* | sed "s|$root/||"
