#!/usr/bin/env bash
# Installs kiln's build and test dependencies from Debian packages. Idempotent: does nothing when all are present.
# `install-deps.sh fuzz` also installs clang and its sanitizer/libFuzzer runtimes (`make test` and `make fuzz` ask for them).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler
  libflatbuffers-dev flatbuffers-compiler
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev llvm-14-tools libonnx-testdata libopenblas-dev
  libdnnl-dev # oneDNN: the executor's 2-D convolutions (src/runtime/kernels/conv_dnnl.cpp)
  libstb-dev # stb_image: converter_lite's calibration images (input_type=IMAGE)
  python3-pil fonts-dejavu-core # tests/real_models/text_images.py renders the OCR models' text images
  time # GNU time: peak RSS in bench/convert_vs_peer.sh
  python3 # tests/cli/atc.sh reads the mode-1 JSON dumps (scripts/om_formats_count.py)
  dpkg-dev file # cpack -G DEB reads the .deb's dependencies off the binaries (dpkg-shlibdeps)
  lintian # tests/cli/deb.sh: the kiln and kiln-dev packages have no lintian errors
)
if [ "${1:-}" = "fuzz" ]; then packages+=(clang libclang-rt-14-dev); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then missing+=("$p"); fi
done
# Node.js runs the real-model reference (ONNX Runtime from npm); any installed node 18+ will do.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then missing+=(nodejs npm); fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update
$sudo apt-get install -y --no-install-recommends "${missing[@]}"
