// Up-converting a model to a newer ONNX opset with onnx's version converter (for rewrites that
// emit ops in a newer opset's form than the model imports, such as AIPP preprocessing).
#pragma once

#include <cstdint>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

// The same model with its default-domain opset raised to `targetOpset` by onnx's version
// converter (each op rewritten through the adapters between the two versions: Clip's and Pad's
// attributes become inputs, Upsample becomes Resize, ...). Weights are copied. A model already at
// or above the target comes back unchanged. What the converter cannot convert is K4002
// UnsupportedFormat naming the converter's reason.
Expected<Model> upgradeOnnxOpset(const Model& model, int64_t targetOpset);

} // namespace kiln
