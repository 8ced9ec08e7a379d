// Float32 2-D convolution through oneDNN (Debian libdnnl-dev) when kiln is built with it
// (KILN_HAVE_DNNL); bench/dnnl_conv measures it against im2col + OpenBLAS (bench/results.md).
#pragma once

#include <cstdint>

namespace kiln::rt::dnnl_conv {

struct Conv2d {
  int64_t batch, channels, height, width, filters, outHeight, outWidth;
  int64_t kernel[2], strides[2], dilations[2], padBegin[2], padEnd[2];
};

// True when oneDNN is built in (the caller keeps its own path otherwise).
bool available();

// y = conv(x, w) + bias (bias may be null) over NCHW / OIHW float tensors, group 1. False when
// oneDNN is absent or refuses the shape; y is then untouched.
bool run(int threads, const Conv2d& c, const float* x, const float* w, const float* bias, float* y);

} // namespace kiln::rt::dnnl_conv
