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
  // OIHW weight (N, C, Kh, Kw) of a convolution with `groups` groups → [G·C1·Kh·Kw, Cout/16, 16,
  // C0]
  // (om.md §5.3). Groups are packed e at a time along the diagonal of one block, e = min(lcm(
  // lcm(C, C0) / C, lcm(N/groups, 16) / (N/groups)), groups); C1 = ceil(e·C / C0), Cout =
  // ceil(e·N/groups / 16)·16, G = ceil(groups / e). W[g·N/groups + n][c][kh][kw] goes to row
  // (g / e)·C1·Kh·Kw + ((g % e)·C + c) / C0 · Kh·Kw + kh·Kw + kw, column (g % e)·N/groups + n, and
  // lane ((g % e)·C + c) % C0. With groups = 1 this is the plain FRACTAL_Z:
  // [(c / C0)·Kh·Kw + kh·Kw + kw][n / 16][n % 16][c % C0].
  FractalZ,
};

// The heavy dims of a 4-D plain tensor (`groups` only matters for FRACTAL_Z).
std::vector<int64_t> heavyDims(HeavyLayout layout, const std::vector<int64_t>& plainDims,
                               int64_t c0, int64_t groups = 1);
// Rearranges `elementBytes`-sized elements of a plain tensor into the heavy layout (padding 0)
// and back.
std::vector<uint8_t> toHeavy(HeavyLayout layout, const uint8_t* plain,
                             const std::vector<int64_t>& plainDims, size_t elementBytes, int64_t c0,
                             int64_t groups = 1);
std::vector<uint8_t> fromHeavy(HeavyLayout layout, const uint8_t* heavy,
                               const std::vector<int64_t>& plainDims, size_t elementBytes,
                               int64_t c0, int64_t groups = 1);

// `format_for_int` packs the primary format in bits 0–7 and a sub-format (FRACTAL_Z: the group
// count) in bits 8–23 (om.md §1.12).
int64_t packFormat(int primary, int64_t subFormat);
int64_t subFormatOf(int64_t packedFormat);

} // namespace kiln::om
