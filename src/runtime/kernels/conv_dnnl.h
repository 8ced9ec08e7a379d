// Float32 2-D convolution through oneDNN (Debian libdnnl-dev) when kiln is built with it
// (KILN_HAVE_DNNL); bench/dnnl_conv measures it against im2col + OpenBLAS (bench/results.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/runtime/memory.h"

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
  const void* source = nullptr; // the weights' identity: their address, or the caller's id
  std::array<int64_t, 20> key{};
  std::vector<uint8_t> bytes; // the layout's bytes start at the first 64-byte boundary
  size_t size = 0;
};

// y = conv(x, w) + bias (bias may be null) over NCHW / OIHW float tensors, group 1. False when
// oneDNN is absent or refuses the shape; y is then untouched. `packed` (may be null) is used and
// refreshed only for a constant w.
// `weightsId` (with `packed`): what identifies the weights instead of w's address, for a caller
// that hands over float32 weights made for this call (float16 weights widened) while the packed
// copy stays that of the same constant.
// `xChannelsLast`: x holds the NCHW tensor's values in NHWC order. `yChannelsLast`: y is written
// in NHWC order; only when writesChannelsLast (false otherwise).
bool run(int threads, const Conv2d& c, const float* x, const float* w, const float* bias, float* y,
         PackedWeights* packed = nullptr, const void* weightsId = nullptr,
         bool xChannelsLast = false, bool yChannelsLast = false);

// True when oneDNN's primitive for c writes plain NHWC itself: run can then leave y channels-last
// at no cost (NCHW costs a layout copy).
bool writesChannelsLast(int threads, const Conv2d& c, bool hasBias);

// True when run would take every weight from `packed` (made for `weightsId` and this geometry),
// never reading w: the caller may then skip making w.
bool packedFor(const PackedWeights& packed, int threads, const Conv2d& c, bool hasBias,
               const void* weightsId);

// Integer 2-D convolution, group 1: acc[n, m, p] = sum (x - xz) * (w[m] - wz[m]) in int32, exact.
// x is uint8 (or int8 when xSigned); w is uint8 (or int8) [M, C, kh, kw] with per-filter zero
// points wz. oneDNN takes int8 weights only: they are held as w - base (base 128 for uint8) with
// one more all-ones filter whose sums of (x - xz) add the (base - wz[m]) part back. Used only on
// CPUs with VNNI, where oneDNN's int8 products are summed without intermediate saturation (on
// older CPUs its 16-bit pair sums could saturate, so the caller keeps its own exact path).
class Int8Conv;

// The prepared convolution for geometry c and these weights (reordered once), or nullptr when
// oneDNN is absent, the CPU has no VNNI or oneDNN refuses the shape.
std::shared_ptr<Int8Conv> prepareInt8(int threads, const Conv2d& c, bool xSigned,
                                      const uint8_t* w, bool wSigned, const int32_t* wz);
// Runs the prepared convolution on x with zero point xz. The sums land in `acc`, [N, channels,
// outHeight * outWidth] int32 in `accBytes` (the executor's scratch memory, owned by `out`):
// output (n, m, i) is acc[n, m, i] + corr[m] * acc[n, channels - 1, i] when corr is non-null,
// acc[n, m, i] otherwise. False when oneDNN fails.
struct Int8Result {
  Scratch<uint8_t> accBytes; // what `acc` points into (the executor's scratch memory)
  const int32_t* acc = nullptr;
  int64_t channels = 0;
  const int32_t* corr = nullptr;
};
bool runInt8(const Int8Conv& p, const uint8_t* x, int32_t xz, int threads, Int8Result& out);

} // namespace kiln::rt::dnnl_conv
