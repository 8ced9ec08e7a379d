// conv ops: the decisions every consumer shares (auto_pad SAME padding, how each takes FP16
// conversion).
#include <algorithm>

#include "ops/conv.h"
#include "ops/precision.h"

namespace kiln::ops {

KILN_OP_FP16("Conv", kFp16White | kFp16Cube);
KILN_OP_FP16("ConvTranspose", kFp16White | kFp16Cube);

AxisPads samePadding(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, bool upper) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - in);
  const int64_t small = total / 2;
  const int64_t begin = upper ? small : total - small;
  return {begin, total - begin};
}

} // namespace kiln::ops
