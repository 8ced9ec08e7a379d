// Depthwise convolution loops with load-time ISA dispatch (conv_loops.h).
#include "conv_loops.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "half_steps.h"
#include "kiln/runtime/tensor_util.h"

namespace kiln::rt::convloops {
namespace {

#define KILN_CONV_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

// kVector floats; the compiler maps it to one zmm, two ymm or four xmm registers per clone.
typedef float Vec __attribute__((vector_size(kVector * sizeof(float))));
typedef float VecU __attribute__((vector_size(kVector * sizeof(float)), aligned(4)));

// Unaligned vector load and store (macros: a Vec argument or result would change the ABI
// between clones).
#define KILN_LOAD(p) (*reinterpret_cast<const VecU*>(p))
#define KILN_STORE(p, v) (*reinterpret_cast<VecU*>(p) = (v))

// An R x V tile of output vectors (R rows, V consecutive vectors of kVector columns starting at
// column ox): R * V independent sums in flight, so the adds do not wait on each other, while each
// lane still sums its taps in row-major order.
template <int R, int V>
__attribute__((always_inline)) inline void tile(const DepthwisePlane& g, const float* padded,
                                                const float* w, float bias, float* out, int64_t oy,
                                                int64_t ox) {
  Vec acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v)
      acc[r][v] = Vec{} + bias;
  const float* origin = padded + oy * g.sh * g.rowStride + ox;
  const int64_t rowStep = g.sh * g.rowStride;
  const int64_t count = g.kh * g.kw;
  const int64_t* taps = g.taps.data();
  for (int64_t t = 0; t < count; ++t) {
    const float wv = w[t];
    const float* base = origin + taps[t];
    for (int r = 0; r < R; ++r) {
      const float* row = base + r * rowStep;
      for (int v = 0; v < V; ++v)
        acc[r][v] = acc[r][v] + wv * KILN_LOAD(row + v * kVector);
    }
  }
  // Every sum leaves its register before the partial vectors are copied out: a sum live across
  // the copy's call would be kept in memory through the whole tap loop (a store-to-load chain
  // on every add).
  float tail[R][kVector];
  const int64_t last = ox + (V - 1) * kVector;
  const bool partial = last + kVector > g.ow;
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      if (partial && v == V - 1)
        KILN_STORE(tail[r], acc[r][v]);
      else
        KILN_STORE(out + (oy + r) * g.ow + ox + v * kVector, acc[r][v]);
    }
  if (partial)
    for (int r = 0; r < R; ++r)
      std::memcpy(out + (oy + r) * g.ow + last, tail[r],
                  static_cast<size_t>(g.ow - last) * sizeof(float));
}

// R output rows from row oy: the row's vectors in tiles of at most 8 / R vectors (8 sums in
// flight), then smaller tiles for what is left.
template <int R>
__attribute__((always_inline)) inline void rowsBlock(const DepthwisePlane& g, const float* padded,
                                                     const float* w, float bias, float* out,
                                                     int64_t oy) {
  constexpr int kMax = 8 / R;
  const int64_t vectors = (g.ow + kVector - 1) / kVector;
  int64_t v = 0;
  for (; v + kMax <= vectors; v += kMax)
    tile<R, kMax>(g, padded, w, bias, out, oy, v * kVector);
  if constexpr (kMax > 4)
    if (v + 4 <= vectors) {
      tile<R, 4>(g, padded, w, bias, out, oy, v * kVector);
      v += 4;
    }
  if constexpr (kMax > 2)
    if (v + 2 <= vectors) {
      tile<R, 2>(g, padded, w, bias, out, oy, v * kVector);
      v += 2;
    }
  if constexpr (kMax > 1)
    if (v < vectors) tile<R, 1>(g, padded, w, bias, out, oy, v * kVector);
}

} // namespace

void planDepthwise(DepthwisePlane& g) {
  const int64_t owPadded = (g.ow + kVector - 1) / kVector * kVector;
  g.rows = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1;
  g.cols = (owPadded - 1) * g.sw + (g.kw - 1) * g.dw + 1;
  g.rowStride = (g.cols + g.sw - 1) / g.sw + kVector; // slack: loads never leave the row
  g.phaseStride = g.rows * g.rowStride;
  g.taps.resize(static_cast<size_t>(g.kh * g.kw));
  for (int64_t ky = 0; ky < g.kh; ++ky)
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t c = kx * g.dw;
      g.taps[static_cast<size_t>(ky * g.kw + kx)] =
          (c % g.sw) * g.phaseStride + c / g.sw + ky * g.dh * g.rowStride;
    }
}

void padPlane(const DepthwisePlane& g, const float* in, int64_t h, int64_t w, int64_t pt,
              int64_t pl, float* padded, const uint16_t* inHalf) {
  if (inHalf && g.sw != 1) {
    // Strided: the plane is widened first (by vectors), then picked from as a float plane.
    thread_local std::vector<float> plane;
    const auto count = static_cast<size_t>(h * w);
    if (plane.size() < count) plane.resize(count);
    vec::widenHalvesAll(inHalf, plane.data(), h * w);
    padPlane(g, plane.data(), h, w, pt, pl, padded);
    return;
  }
  // Phase r, row y, index i holds padded column i * sw + r = input column i * sw + r - pl; only
  // the padding around the copied span is cleared.
  for (int64_t r = 0; r < g.sw; ++r) {
    const int64_t first = pl - r <= 0 ? 0 : (pl - r + g.sw - 1) / g.sw;
    const int64_t last =
        std::min(g.rowStride, w + pl - r <= 0 ? 0 : (w + pl - r + g.sw - 1) / g.sw);
    const int64_t lo = std::min(first, last);
    for (int64_t y = 0; y < g.rows; ++y) {
      float* dst = padded + r * g.phaseStride + y * g.rowStride;
      const int64_t iy = y - pt;
      if (iy < 0 || iy >= h) {
        std::fill(dst, dst + g.rowStride, 0.0f);
        continue;
      }
      std::fill(dst, dst + lo, 0.0f);
      if (inHalf) {
        const uint16_t* src = inHalf + iy * w - pl; // stride 1: one phase
        vec::widenHalvesAll(src + lo, dst + lo, last - lo);
        std::fill(dst + last, dst + g.rowStride, 0.0f);
        continue;
      }
      const float* src = in + iy * w + r - pl;
      if (g.sw == 1)
        std::memcpy(dst + lo, src + lo, static_cast<size_t>(last - lo) * sizeof(float));
      else
        for (int64_t i = lo; i < last; ++i)
          dst[i] = src[i * g.sw];
      std::fill(dst + last, dst + g.rowStride, 0.0f);
    }
  }
}

KILN_CONV_CLONES void depthwisePlane(const DepthwisePlane& g, const float* padded, const float* w,
                                     float bias, float* out) {
  int64_t oy = 0;
  for (; oy + 4 <= g.oh; oy += 4)
    rowsBlock<4>(g, padded, w, bias, out, oy);
  if (oy + 2 <= g.oh) {
    rowsBlock<2>(g, padded, w, bias, out, oy);
    oy += 2;
  }
  if (oy < g.oh) rowsBlock<1>(g, padded, w, bias, out, oy);
}

} // namespace kiln::rt::convloops
