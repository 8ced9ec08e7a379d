// quant ops: facts every consumer shares (the executor's kernels and decompose-quant).
#pragma once

#include <cstdint>

#include "kiln/ir/dtype.h"

namespace kiln::ops {

// The integer range of a quantized code dtype (4-, 8- and 16-bit); false for other dtypes.
bool quantCodeRange(DType d, int64_t& lo, int64_t& hi);

} // namespace kiln::ops
