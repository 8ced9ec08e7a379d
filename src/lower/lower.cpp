// Lowers a model for a target and prints the result (kiln/lower.h).
#include "kiln/lower.h"

#include <optional>

#include <fmt/format.h>

#include "kiln/backends/converter_config.h"
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
  ConverterConfig config;
  if (!options.configFile.empty()) {
    if (name != "ms")
      return Status(ErrorCode::BadFlag, "--config is a converter_lite config: it applies to .ms",
                    "use --target ms, or drop --config");
    KILN_ASSIGN_OR_RETURN(config, parseConverterConfigFile(options.configFile));
  }
  // The config's weight quant or dynamic quant, as converter_lite (ms_convert.cpp) applies it.
  WeightQuantOptions weightQuant;
  MsWriteOptions msWrite;
  bool perRow = false;
  const bool weightOnly = weightQuantOptionsFor(config, weightQuant);
  const bool dynamic = !weightOnly && dynamicQuantOptionsFor(config, weightQuant, perRow);
  if (weightOnly) {
    msWrite.weightQuantBits = weightQuant.bitNum;
    msWrite.encodeWeights = config.enableEncode;
  }
  if (dynamic) {
    msWrite.dynamicQuant = perRow ? MsWriteOptions::DynamicQuant::ActivationChannelWeightLayer
                                : MsWriteOptions::DynamicQuant::ActivationLayerWeightChannel;
    msWrite.encodeWeights = false;
  }
  ConversionOptions conversion;
  conversion.inputShapes = spec ? &*spec : nullptr;
  conversion.target = options.target;
  conversion.weightQuant = weightOnly || dynamic ? &weightQuant : nullptr;
  auto ran = runConversionPipeline(model, conversion);
  if (!ran) return ran.status();
  if (name == "ms") {
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, buildMsBuffer(model, msWrite));
    return msBufferToText(bytes.data(), bytes.size());
  }
  OmWriteOptions write;
  if (!variant.empty()) write.socVersion = variant;
  write.modelName = model.graph ? model.graph->name() : std::string();
  return omLoweredText(model, write);
}

} // namespace kiln
