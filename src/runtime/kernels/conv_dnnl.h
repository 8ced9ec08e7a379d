// Float32 2-D convolution through oneDNN (Debian libdnnl-dev) when kiln is built with it
// (KILN_HAVE_DNNL); bench/dnnl_conv measures it against im2col + OpenBLAS (bench/results.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::rt::dnnl_conv {

struct Conv2d {
  int64_t batch, channels, height, width, filters, outHeight, outWidth;
  int64_t kernel[2], strides[2], dilations[2], padBegin[2], padEnd[2];
};

// True when oneDNN is built in (the caller keeps its own path otherwise).
bool available();

// The weights rearranged into the primitive's layout, kept by the caller between calls when the
// weight tensor is constant (the same values at the same address on every call). Reused while the
// source pointer and the geometry (and thread count) stay those it was made for.
struct PackedWeights {
  const float* source = nullptr;
  std::array<int64_t, 20> key{};
  std::vector<uint8_t> bytes; // the layout's bytes start at the first 64-byte boundary
  size_t size = 0;
};

// y = conv(x, w) + bias (bias may be null) over NCHW / OIHW float tensors, group 1. False when
// oneDNN is absent or refuses the shape; y is then untouched. `packed` (may be null) is used and
// refreshed only for a constant w.
bool run(int threads, const Conv2d& c, const float* x, const float* w, const float* bias, float* y,
         PackedWeights* packed = nullptr);

} // namespace kiln::rt::dnnl_conv
