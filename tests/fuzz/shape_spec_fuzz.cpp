// libFuzzer entry point: arbitrary text as --input_shape (ATC) / --inputShape (converter_lite),
// with ATC's dynamic gear flags, must parse or give a coded Status, never a crash; a spec that
// validates against a small model is applied by the conversion pipeline.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/shape_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::quietLogs();
  if (size == 0) return 0;
  // First byte: dialect and which gear flag the second line fills. Then newline-separated fields:
  // the shape text, then the gear flag's value.
  const uint8_t mode = data[0];
  std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string shapeText = rest, gearText;
  if (size_t nl = rest.find('\n'); nl != std::string::npos) {
    shapeText = rest.substr(0, nl);
    gearText = rest.substr(nl + 1);
  }
  const auto dialect = (mode & 1) ? kiln::ShapeDialect::ConverterLite : kiln::ShapeDialect::Atc;
  auto spec = kiln::parseShapeSpec(shapeText, dialect);
  if (spec) {
    for (const auto& entry : spec->inputs) {
      std::string dims = entry.dimsText();
      for (const auto& dim : entry.dims)
        dims += dim.toString();
      (void)dims;
    }
  }
  if (dialect == kiln::ShapeDialect::Atc && !gearText.empty()) {
    kiln::DynamicProfiles profiles;
    switch ((mode >> 1) % 3) {
    case 0:
      profiles.batchSize = gearText;
      break;
    case 1:
      profiles.imageSize = gearText;
      break;
    default:
      profiles.dims = gearText;
      break;
    }
    profiles.inputFormat = (mode & 8) ? "NHWC" : (mode & 16) ? "ND" : "NCHW";
    auto status = kiln::validateDynamicProfiles(profiles, shapeText, spec ? &*spec : nullptr);
    (void)status;
  }
  if (!spec) return 0;
  kiln::Model model = kiln::fuzz::fixtureModel();
  std::vector<kiln::Status> problems = kiln::validateShapeSpec(*spec, *model.graph);
  for (const auto& entry : spec->inputs)
    (void)kiln::findSpecInput(entry, *model.graph);
  if (!problems.empty() || spec->hasDynamic()) return 0;
  // A spec that fits the model: the pipeline fixes the inputs to it and infers shapes.
  kiln::ConversionOptions options;
  options.inputShapes = &*spec;
  auto ran = kiln::runConversionPipeline(model, options);
  if (ran) kiln::fuzz::runIfSmall(model);
  return 0;
}
