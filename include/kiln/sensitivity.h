// Precision sensitivity (`kiln sensitivity`): how much each node's FP16 conversion or weight
// quantization costs at the model's outputs on given inputs, and the fewest nodes to leave in
// float so that an accuracy target is met. The answer is written in the peers' own formats (an ATC
// --keep_dtype file, a converter_lite config with skip_quant_node), so the drop-in CLIs use it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/value.h"
#include "kiln/support/status.h"

namespace kiln {

enum class SensitivityVariant {
  Fp16,       // convert-fp16 with SensitivityOptions::precision (keep list: node names)
  WeightQuant // quantize-weights with SensitivityOptions::weightQuant (keep list: skip_quant_node)
};

// Outputs are scored as MindSpore Lite's benchmark scores them (formats/ms.md §8.3): the mean over
// outputs of the cosine similarity, or of the mean relative error.
enum class SensitivityMetric { Cosine, MeanRelativeError };

struct SensitivityOptions {
  SensitivityVariant variant = SensitivityVariant::WeightQuant;
  PrecisionOptions precision;     // Fp16: the mode and the user's own keep list
  WeightQuantOptions weightQuant; // WeightQuant: the options and the user's own skip list
  SensitivityMetric metric = SensitivityMetric::Cosine;
  // Cosine: at least this; mean relative error: at most this (a fraction, 0.005 = 0.5%).
  std::optional<double> target;
  size_t threads = 1; // trials run in parallel; the report does not depend on it
};

struct NodeSensitivity {
  std::string node; // the name keep lists use (kiln/passes/keep_dtype.h keepDtypeNodeName)
  std::string opType;
  double score = 0; // output score with only this node converted
  double loss = 0;  // 1 - cosine, or the mean relative error, of that score
};

struct SensitivityReport {
  size_t candidates = 0;   // nodes the variant converts (unnamed quantized nodes excluded)
  double convertedAll = 0; // score with every candidate converted
  std::vector<NodeSensitivity> nodes; // worst (largest loss) first; ties by name
  // With a target: the worst-first prefix of `nodes` kept in float, the score measured with it,
  // and whether that score meets the target.
  std::vector<std::string> keep;
  double keptScore = 0;
  bool targetMet = false;
  // Parameter bytes of the float model and of the converted one with `keep` (or with nothing kept
  // when there is no target): what the list costs in size.
  uint64_t floatBytes = 0;
  uint64_t convertedBytes = 0;
  size_t runs = 0; // model executions it took
};

// `model` is the float model as the converting CLI sees it before the precision pass (after the
// default pipeline); it is not changed. Each trial re-imports a serialized copy, applies the
// variant's pass with a keep list and runs it on `inputs` in the executor.
Expected<SensitivityReport> analyzeSensitivity(const Model& model,
                                               const std::map<std::string, rt::RtValue>& inputs,
                                               const SensitivityOptions& options);

} // namespace kiln
