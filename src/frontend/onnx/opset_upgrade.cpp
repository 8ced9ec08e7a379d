// Raises a model's default-domain opset through onnx's version converter (IR → ModelProto →
// ConvertVersion → IR), so a rewrite can add ops in the newer opset's form.
#include "kiln/frontend/opset_upgrade.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <exception>

#include "kiln/frontend/onnx.h"
#include "ops/validate.h"

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
      // Some adapters read shapes (Softmax 12 -> 13 needs its input's rank): infer them first,
      // as onnx's own convert_version expects a model with its shapes.
      ops::guardShapeInference();
      onnx::ShapeInferenceOptions options(/*check_type=*/false, /*error_mode=*/0,
                                          /*data_propagation=*/false);
      onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), options);
      upgraded = onnx::version_conversion::ConvertVersion(proto, static_cast<int>(targetOpset));
    } catch (const std::exception& e) {
      // The converter reports an op without an adapter (or an invalid model) by throwing.
      return makeError(ErrorCode::UnsupportedFormat,
                       "re-export the model with the newer opset from its framework",
                       "onnx's version converter cannot take the model from opset {} to {}: {}",
                       from, targetOpset, e.what());
    }
  }
  // The converter leaves the IR version; a reader refuses an opset newer than its IR defines
  // (the ONNX versioning table: opset 9 -> IR 4, 10 -> 5, 11 -> 6, 12-14 -> 7, 15-18 -> 8, 19-20 ->
  // 9).
  const int64_t opset = std::max(from, targetOpset);
  const int64_t neededIr = opset >= 21   ? 10
                           : opset >= 19 ? 9
                           : opset >= 15 ? 8
                           : opset >= 12 ? 7
                           : opset >= 11 ? 6
                           : opset >= 10 ? 5
                           : opset >= 9  ? 4
                                         : 3;
  if (upgraded.ir_version() < neededIr) upgraded.set_ir_version(neededIr);
  // Weights are inline after the export, so no external data is resolved ("" forbids it).
  KILN_ASSIGN_OR_RETURN(
      Model result,
      importOnnxProto(upgraded, model.sourcePath.empty() ? "model" : model.sourcePath, ""));
  result.sourcePath = model.sourcePath;
  result.sourceLayouts = model.sourceLayouts;
  return result;
}

} // namespace kiln
