// The tensor an ONNX Constant node produces, read from whichever value attribute it carries.
#pragma once

#include <optional>

#include "kiln/ir/graph.h"

namespace kiln {

// From `value` (a tensor), `value_float(s)`, `value_int(s)` or `value_string(s)`; nullopt when the
// node carries none of them (for example only `sparse_value`).
std::optional<Tensor> constantNodeValue(const Node& node);

} // namespace kiln
