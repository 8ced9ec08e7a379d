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

// NCHW dims → NC1HWC0 dims [N, ceil(C / C0), H, W, C0].
std::vector<int64_t> nc1hwc0Dims(const std::vector<int64_t>& nchw, int64_t c0);
// OIHW (N, C, Kh, Kw) weight dims → FRACTAL_Z dims [ceil(C / C0)·Kh·Kw, ceil(N / 16), 16, C0].
std::vector<int64_t> fractalZDims(const std::vector<int64_t>& oihw, int64_t c0);

// Rearranges an NCHW tensor of `elementBytes`-sized elements into NC1HWC0; padded channels are 0.
std::vector<uint8_t> toNc1hwc0(const uint8_t* nchw, const std::vector<int64_t>& dims,
                               size_t elementBytes, int64_t c0);
std::vector<uint8_t> fromNc1hwc0(const uint8_t* heavy, const std::vector<int64_t>& nchwDims,
                                 size_t elementBytes, int64_t c0);

// Rearranges OIHW weights into FRACTAL_Z: W[n][c][kh][kw] goes to
// [(c / C0)·Kh·Kw + kh·Kw + kw][n / 16][n % 16][c % C0]; padded N and C are 0.
std::vector<uint8_t> toFractalZ(const uint8_t* oihw, const std::vector<int64_t>& dims,
                                size_t elementBytes, int64_t c0);
std::vector<uint8_t> fromFractalZ(const uint8_t* fractal, const std::vector<int64_t>& oihwDims,
                                  size_t elementBytes, int64_t c0);

} // namespace kiln::om
