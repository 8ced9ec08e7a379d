// What convolution and pooling windows mean, decided once for the executor and both backends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::ops {

struct AxisPads {
  int64_t begin = 0;
  int64_t end = 0;
};

// auto_pad SAME_UPPER / SAME_LOWER on one spatial axis: the total padding that gives
// ceil(in / stride) outputs, its odd pixel at the end (UPPER) or at the beginning (LOWER).
AxisPads samePadding(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, bool upper);

class NodeFacts;

// Why a window op's attributes are impossible (ops/validate.h): kernel_shape, strides and
// dilations >= 1 with one entry per spatial axis, pads >= 0 with two per axis, a known auto_pad,
// group >= 1. `dataInput` is X; `weightInput` W, whose rank gives the
// spatial rank when X's is unknown; `hasGroup` for the convolutions.
std::string windowReason(const NodeFacts& node, size_t dataInput, std::optional<size_t> weightInput,
                         bool hasGroup);

} // namespace kiln::ops
