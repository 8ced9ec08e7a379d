// What convolution and pooling windows mean, decided once for the executor and both backends.
#pragma once

#include <cstdint>

namespace kiln::ops {

struct AxisPads {
  int64_t begin = 0;
  int64_t end = 0;
};

// auto_pad SAME_UPPER / SAME_LOWER on one spatial axis: the total padding that gives
// ceil(in / stride) outputs, its odd pixel at the end (UPPER) or at the beginning (LOWER).
AxisPads samePadding(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, bool upper);

} // namespace kiln::ops
