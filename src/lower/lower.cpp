// Lowers a model for a target and prints the result (kiln/lower.h).
#include "kiln/lower.h"

#include <optional>

#include <fmt/format.h>

#include "kiln/backends/ms.h"
#include "kiln/backends/ms_writer.h"
#include "kiln/backends/om.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/shape_spec.h"

namespace kiln {

Expected<std::string> lowerToText(Model& model, const LowerOptions& options) {
  const std::string name = options.target.substr(0, options.target.find(':'));
  const std::string variant = options.target.find(':') == std::string::npos
                                  ? std::string()
                                  : options.target.substr(options.target.find(':') + 1);
  if (name != "ms" && name != "om")
    return Status(ErrorCode::BadFlag, fmt::format("--target '{}' names no backend", options.target),
                  "use --target ms, om or om:<soc_version> (e.g. om:Ascend310P3)");
  if (name == "ms" && !variant.empty())
    return Status(ErrorCode::BadFlag,
                  fmt::format("--target '{}': ms takes no variant", options.target),
                  "use --target ms");
  std::optional<ShapeSpec> spec;
  if (!options.inputShape.empty()) {
    KILN_ASSIGN_OR_RETURN(spec, parseShapeSpec(options.inputShape, ShapeDialect::Atc));
  }
  ConversionOptions conversion;
  conversion.inputShapes = spec ? &*spec : nullptr;
  conversion.target = options.target;
  auto ran = runConversionPipeline(model, conversion);
  if (!ran) return ran.status();
  if (name == "ms") {
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, buildMsBuffer(model, MsWriteOptions{}));
    return msBufferToText(bytes.data(), bytes.size());
  }
  OmWriteOptions write;
  if (!variant.empty()) write.socVersion = variant;
  write.modelName = model.graph ? model.graph->name() : std::string();
  return omLoweredText(model, write);
}

} // namespace kiln
