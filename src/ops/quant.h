// quant ops: facts every consumer shares (the executor's kernels and decompose-quant).
#pragma once

#include <cstdint>

#include "kiln/ir/dtype.h"

namespace kiln::ops {

// The integer range of a quantized code dtype (4-, 8- and 16-bit); false for other dtypes.
bool quantCodeRange(DType d, int64_t& lo, int64_t& hi);

// MindSpore Lite's DynamicQuant (converter_lite DYNAMIC_QUANT, formats/ms.md §3.4) as the .ms
// reader raises it: one IR node in this domain, run by the executor as the runtime runs it.
//   y: int8, scale: float32, zero_point: int32 = kiln.ms::DynamicQuant(x: float32)
//     {symmetric: int, prefer_axes: ints}
// prefer_axes empty: one range for the whole tensor (scale and zero_point are scalars); else one
// per index of those axes (scale and zero_point keep x's rank with 1 on the other axes).
inline constexpr const char* kMsDomain = "kiln.ms";
inline constexpr const char* kMsDynamicQuantOp = "DynamicQuant";

} // namespace kiln::ops
