// quant ops: facts every consumer shares (the executor's kernels and decompose-quant).
#pragma once

#include <cstdint>

#include "kiln/ir/dtype.h"

namespace kiln::ops {

// The integer range of a quantized code dtype (4-, 8- and 16-bit); false for other dtypes.
bool quantCodeRange(DType d, int64_t& lo, int64_t& hi);

// The scale / zero-point index of element `k` quantized along an axis of `channels` (elements
// `inner` apart): per slice, or with `blockSize` > 0 per block (opset 21: the parameters keep the
// data's rank with that axis counted in ceil(channels / blockSize) blocks).
inline int64_t quantParamIndex(int64_t k, int64_t inner, int64_t channels, int64_t blockSize) {
  if (blockSize <= 0) return (k / inner) % channels;
  const int64_t blocks = (channels + blockSize - 1) / blockSize;
  return (k / (inner * channels) * blocks + (k / inner) % channels / blockSize) * inner + k % inner;
}

// MindSpore Lite's DynamicQuant (converter_lite DYNAMIC_QUANT, formats/ms.md §3.4) as the .ms
// reader raises it: one IR node in this domain, run by the executor as the runtime runs it.
//   y: int8, scale: float32, zero_point: int32 = kiln.ms::DynamicQuant(x: float32)
//     {symmetric: int, prefer_axes: ints}
// prefer_axes empty: one range for the whole tensor (scale and zero_point are scalars); else one
// per index of those axes (scale and zero_point keep x's rank with 1 on the other axes).
inline constexpr const char* kMsDomain = "kiln.ms";
inline constexpr const char* kMsDynamicQuantOp = "DynamicQuant";

} // namespace kiln::ops
