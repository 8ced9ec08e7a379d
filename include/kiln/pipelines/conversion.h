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
  // The target the model is converted for ("ms", "om", "om:Ascend310P3"; "" for none): after
  // simplification, expand-functions replaces the nodes it refuses by their ONNX function bodies
  // (when those lower), and the graph is simplified again; then the target's `prepare` hook
  // (kiln/backends/target.h) rewrites what it still refuses into ops it takes (RNNs unrolled), and
  // decompose-quant rewrites the quantized ONNX ops it refuses into float ops after fp16.
  std::string target;
  // Runs after simplification (atc inserts AIPP ops, converter_lite makes inputs NHWC); its ops
  // are settled again when it changed the graph.
  std::function<Expected<bool>(Model&)> afterSimplify;
  // FP16 conversion (convert-fp16) when set and the mode changes anything.
  const PrecisionOptions* precision = nullptr;
  // Called just before convert-fp16 with the model it will convert: nodes to keep fp32 besides
  // `precision`'s own list (the converting CLIs' precision guard, kiln/sensitivity.h); it adds
  // its notes to `notes`.
  std::function<std::vector<std::string>(const Model& model, const PrecisionOptions& precision,
                                         std::vector<std::string>& notes)>
      chooseFp16Keeps;
  // Weight quantization (quantize-weights), last: it sees the final weights.
  const WeightQuantOptions* weightQuant = nullptr;
  PrecisionReport* precisionReport = nullptr;
};

// Whether `precision` asks convert-fp16 to change anything.
bool needsFp16Conversion(const PrecisionOptions& precision);

// Runs, in order: fuse-qdq (for `target`), simplification (with the input shapes), expand-functions (for `target`),
// afterSimplify, the target's prepare (RNNs unrolled), convert-fp16, decompose-quant (for
// `target`), quantize-weights. Notes of every stage are collected in the result.
Expected<PipelineResult> runConversionPipeline(Model& model, const ConversionOptions& options);

} // namespace kiln
