// The Ascend "heavy" data layouts the .om backend writes (docs/formats/om.md §5.3): NC1HWC0 for
// convolution feature maps and FRACTAL_Z for convolution weights. Pure index math on raw bytes,
// so the writer (NCHW/OIHW → heavy) and the reader (heavy → NCHW/OIHW) share one definition.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/ir/dtype.h"

namespace kiln::om {

constexpr int64_t kFractalN0 = 16; // FRACTAL_Z's N0: output channels per cube tile

// C0 (channels per cube tile) for `type`: 16 for fp16/bf16/fp32, 32 for int8/uint8; 0 when kiln
// writes no heavy format for the type.
int64_t cubeC0(DType type);

enum class HeavyLayout {
  // NCHW feature map → [N, ceil(C / C0), H, W, C0]; element (n, c, h, w) goes to
  // [n][c / C0][h][w][c % C0].
  Nc1hwc0,
  // OIHW (N, C, Kh, Kw) weight → [ceil(C / C0)·Kh·Kw, ceil(N / 16), 16, C0]; W[n][c][kh][kw] goes
  // to
  // [(c / C0)·Kh·Kw + kh·Kw + kw][n / 16][n % 16][c % C0].
  FractalZ,
};

// The heavy dims of a 4-D plain tensor.
std::vector<int64_t> heavyDims(HeavyLayout layout, const std::vector<int64_t>& plainDims,
                               int64_t c0);
// Rearranges `elementBytes`-sized elements of a plain tensor into the heavy layout (padding 0)
// and back.
std::vector<uint8_t> toHeavy(HeavyLayout layout, const uint8_t* plain,
                             const std::vector<int64_t>& plainDims, size_t elementBytes,
                             int64_t c0);
std::vector<uint8_t> fromHeavy(HeavyLayout layout, const uint8_t* heavy,
                               const std::vector<int64_t>& plainDims, size_t elementBytes,
                               int64_t c0);

} // namespace kiln::om
