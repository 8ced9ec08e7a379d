// `kiln lower`: a model lowered for a target and printed as stable text (golden tests and people
// reading what a conversion makes of each op).
#pragma once

#include <string>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

struct LowerOptions {
  std::string target = "ms"; // "ms", "om" or "om:<soc_version>"
  std::string inputShape;    // ATC grammar, as `kiln check --input-shape`
  // A converter_lite --configFile (ms only): its quant_type=WEIGHT_QUANT or DYNAMIC_QUANT is
  // applied as converter_lite applies it, so the text shows the quantized graph.
  std::string configFile;
};

// Runs the conversion pipeline (kiln/pipelines/conversion.h) on `model`, lowers it for the target
// and returns the text: `.ms` one line per tensor and node (op tables through the schema's
// reflection), `.om` the ModelDef in protobuf text form. Refusals are the backend's K7101/K7102
// or K8101/K8102 errors, listing every node.
Expected<std::string> lowerToText(Model& model, const LowerOptions& options);

} // namespace kiln
