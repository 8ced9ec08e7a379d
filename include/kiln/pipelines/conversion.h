// The one assembly of the passes a conversion runs before a backend lowers the model, shared by
// atc, converter_lite, `kiln convert/lower/check`, conformance and sensitivity, so a model is
// prepared the same way whichever front-end converts or checks it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/passes/pass.h"

namespace kiln {

struct ConversionOptions {
  // Simplification: a named pipeline ("default", "none"), or `simplifyPasses` when the front-end
  // edits the list (converter_lite's fusion_blacklists / --optimize=none).
  std::string simplify = "default";
  std::vector<std::string> simplifyPasses;
  const ShapeSpec* inputShapes = nullptr; // fixed before shape inference
  // Runs after simplification (atc inserts AIPP ops, converter_lite makes inputs NHWC); its ops
  // are settled again when it changed the graph.
  std::function<Expected<bool>(Model&)> afterSimplify;
  // The target the model is converted for ("ms", "om:Ascend310P3"; "" for none): its `prepare`
  // hook (kiln/backends/target.h) rewrites what it refuses into ops it takes, after simplification.
  std::string target;
  // FP16 conversion (convert-fp16) when set and the mode changes anything.
  const PrecisionOptions* precision = nullptr;
  // Weight quantization (quantize-weights), last: it sees the final weights.
  const WeightQuantOptions* weightQuant = nullptr;
  PrecisionReport* precisionReport = nullptr;
};

// Whether `precision` asks convert-fp16 to change anything.
bool needsFp16Conversion(const PrecisionOptions& precision);

// Runs, in order: simplification (with the input shapes), afterSimplify, the target's prepare,
// convert-fp16,
// quantize-weights. Notes of every stage are collected in the result.
Expected<PipelineResult> runConversionPipeline(Model& model, const ConversionOptions& options);

} // namespace kiln
