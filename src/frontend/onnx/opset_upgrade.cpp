// Raises a model's default-domain opset through onnx's version converter (IR → ModelProto →
// ConvertVersion → IR), so a rewrite can add ops in the newer opset's form.
#include "kiln/frontend/opset_upgrade.h"

#include <onnx/version_converter/convert.h>

#include <exception>

#include "kiln/frontend/onnx.h"

namespace kiln {

Expected<Model> upgradeOnnxOpset(const Model& model, int64_t targetOpset) {
  onnx::ModelProto proto;
  KILN_TRY(exportOnnx(model, proto));
  onnx::ModelProto upgraded;
  const int64_t from = model.opsetVersion("");
  if (from >= targetOpset) {
    upgraded = std::move(proto);
  } else {
    try {
      upgraded = onnx::version_conversion::ConvertVersion(proto, static_cast<int>(targetOpset));
    } catch (const std::exception& e) {
      // The converter reports an op without an adapter (or an invalid model) by throwing.
      return makeError(ErrorCode::UnsupportedFormat,
                       "re-export the model with the newer opset from its framework",
                       "onnx's version converter cannot take the model from opset {} to {}: {}",
                       from, targetOpset, e.what());
    }
  }
  // Weights are inline after the export, so no external data is resolved ("" forbids it).
  KILN_ASSIGN_OR_RETURN(
      Model result,
      importOnnxProto(upgraded, model.sourcePath.empty() ? "model" : model.sourcePath, ""));
  result.sourcePath = model.sourcePath;
  result.sourceLayouts = model.sourceLayouts;
  return result;
}

} // namespace kiln
