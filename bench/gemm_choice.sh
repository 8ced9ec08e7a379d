#!/usr/bin/env bash
# Builds and runs bench/gemm_choice.cpp twice: with the project's flags (-O2, baseline x86-64,
# which is what a kiln Release build gets) and with -march=native (what Eigen's
# header-only kernels could reach if kiln were built for the host only).
# Needs libopenblas-dev, libeigen3-dev, libdnnl-dev. Usage: bench/gemm_choice.sh [REPEAT]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
for flags in "-O2" "-O2 -march=native"; do
  c++ -std=c++20 $flags -DNDEBUG -I/usr/include/eigen3 "$here/gemm_choice.cpp" -o "$out/gemm_choice" \
    $(pkg-config --cflags --libs openblas) -ldnnl
  echo "### flags: $flags"
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$out/gemm_choice" "${1:-20}"
done
rm -rf "$out"
