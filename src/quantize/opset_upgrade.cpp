// Raises a model's ONNX opset to 13 for `kiln quantize`: per-channel DequantizeLinear needs 13, and
// many exported models (PP-OCR's cls at 9, det at 11) are older. onnx's version converter does the
// raise (kiln/frontend/opset_upgrade.h), so every op goes through its adapters.
#include <fmt/format.h>

#include "kiln/frontend/opset_upgrade.h"
#include "kiln/quantize.h"

namespace kiln {

Expected<std::vector<std::string>> raiseOpsetTo13(Model& model) {
  const int64_t from = model.opsetVersion("");
  std::vector<std::string> notes;
  if (from >= 13) return notes;
  auto raised = upgradeOnnxOpset(model, 13);
  if (!raised)
    return Status(ErrorCode::UnsupportedFormat,
                  fmt::format("{}: opset {} must be raised to 13 for per-channel DequantizeLinear: "
                              "{}",
                              model.sourcePath, from, raised.status().message()),
                  "convert the model to opset 13 first (onnx.version_converter), then quantize");
  model = raised.take();
  notes.push_back(fmt::format(
      "opset raised from {} to 13 for per-channel DequantizeLinear (onnx's version converter)",
      from));
  return notes;
}

} // namespace kiln
