// Float32 depthwise convolution loops, built for AVX-512, AVX2 and the x86-64 baseline and picked
// at load time. Compiled with floating-point contraction off (as vec_loops.cpp), so every clone
// rounds each multiply and add alike and results do not depend on the machine.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::rt::convloops {

// One input plane, zero-padded and split by column phase (column i * sw + r of the padded plane
// is padded[r * phaseStride + y * rowStride + i]) so that every tap of a strided convolution
// reads consecutive floats.
struct DepthwisePlane {
  int64_t oh, ow, kh, kw, sh, sw, dh, dw;
  int64_t rowStride, phaseStride;
  // Padded rows and columns the plane needs (columns cover `ow` rounded up to kVector).
  int64_t rows, cols;
  // Per tap in row-major order: where it reads for output (0, 0) in the padded copy (its column's
  // phase and index, its row's offset); worked out once per convolution, not per plane.
  std::vector<int64_t> taps;
};

constexpr int64_t kVector = 16;

// Fills `geometry`'s rows/cols/strides and taps for an input of h x w with the given padding.
void planDepthwise(DepthwisePlane& g);

// Writes the zero-padded, phase-split copy of the h x w plane `in` (top/left padding pt, pl) into
// `padded` (g.sw * g.phaseStride floats). With `inHalf` the plane is float16 (`in` unused),
// widened row by row as it is copied (vec::widenHalves: NaN payloads are not kept).
void padPlane(const DepthwisePlane& g, const float* in, int64_t h, int64_t w, int64_t pt,
              int64_t pl, float* padded, const uint16_t* inHalf = nullptr);

// out[oy, ox] = bias + w[0, 0] * in(...) + w[0, 1] * in(...) + ... over the taps in row-major
// order, one multiply and one add each (padding taps add w * 0).
void depthwisePlane(const DepthwisePlane& g, const float* padded, const float* w, float bias,
                    float* out);

} // namespace kiln::rt::convloops
