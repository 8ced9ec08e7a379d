#!/usr/bin/env bash
# The must-show of 4-bit LLM weights: a synthetic Qwen2-1.5B-shaped decoder step (28 layers, hidden
# 1536, 12 heads / 2 KV heads, MLP 8960, vocab 151936; ~1.54B parameters, 4-bit MatMulNBits weights
# as ONNX external data, seeded) converted by converter_lite with its peak RSS below the model's
# size, and the .ms run in kiln's executor against ONNX Runtime on one step (max abs diff, cosine
# of the logits). Prints wall times and peak RSS (GNU time) for bench/results.md.
# Usage: bench/nbits_decoder.sh [BUILD_DIR] [WORKDIR] [extra nbits_decoder.mjs options...]
#   BLOCK=32|64|128 (default 128), MSLITE_JUDGE=DIR to also run the real MindSpore Lite runtime.
# Needs ~2 GB of disk in WORKDIR and onnxruntime-node (tests/real_models/install.sh BUILD/real_models).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath "${1:-$here/../build}")
work=$(realpath -m "${2:-/tmp/kiln-bench-nbits}")
shift $(($# > 2 ? 2 : $#))
# The 1.5B model's logits are ~2-norm 1 per element over 151936 values: float32 sums in another
# order (ONNX Runtime's MLAS) leave about 1e-4 absolute differences.
NBITS_MIN_COSINE=${NBITS_MIN_COSINE:-0.99999} NBITS_MAX_ABS=${NBITS_MAX_ABS:-1e-2} \
NBITS_ORT_THREADS=${NBITS_ORT_THREADS:-2} NBITS_CHECK_RSS=1 \
  bash "$here/../tests/real_models/nbits_decoder.sh" "$build/tools" \
  "$build/real_models/npm/node_modules" "$work" \
  --layers 28 --hidden 1536 --heads 12 --kv-heads 2 --mlp 8960 --vocab 151936 \
  --block "${BLOCK:-128}" --seq 1 --seed 1 "$@"
