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

// The precision gate (docs/accuracy.md): on each output, cosine at least `minCosine`; the mean
// relative error at most `maxMeanRelativeError` on the tensor before a final Sigmoid/Softmax/
// LogSoftmax (its logits, captured by name), on the output itself otherwise; that tensor's cosine
// is held to `minCosine` too. A trial's score is its worst ratio of error to allowance (1 - cosine
// against 1 - minCosine, MRE against its bound), so at most 1 meets the gate.
struct SensitivityGate {
  double maxMeanRelativeError = 0.005;
  double minCosine = 0.9999;
};

struct SensitivityOptions {
  SensitivityVariant variant = SensitivityVariant::WeightQuant;
  PrecisionOptions precision;     // Fp16: the mode and the user's own keep list
  WeightQuantOptions weightQuant; // WeightQuant: the options and the user's own skip list
  SensitivityMetric metric = SensitivityMetric::Cosine;
  // Cosine: at least this; mean relative error: at most this (a fraction, 0.005 = 0.5%).
  std::optional<double> target;
  // When set, replaces `metric` and `target`: trials are scored against the gate (lower is
  // better, at most 1 meets it) and the keep list is the shortest prefix that meets it.
  std::optional<SensitivityGate> gate;
  size_t threads = 1; // trials run in parallel; the report does not depend on it
  // The float model runs once and keeps its tensors, up to this many bytes (in the order they are
  // made, split evenly over the input sets), so that a trial runs only what its conversion
  // changes and what depends on it, reading the rest. Beyond the budget, trials recompute what
  // was not kept. 0: every trial runs the whole model (the same numbers, more time).
  uint64_t maxStoredBytes = 2ull << 30;
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
  size_t runs = 0; // model executions it took (a trial that runs part of the model counts one)
  uint64_t storedBytes = 0; // the float run's tensors kept for the trials
  // Nodes of the trials' models (one count per trial), and of those the nodes that ran: the
  // others' outputs were read from the float run.
  size_t trialNodes = 0, trialNodesRun = 0;
};

// `model` is the float model as the converting CLI sees it before the precision pass (after the
// default pipeline); it is not changed. Each trial re-imports a serialized copy, applies the
// variant's pass with a keep list and runs it on `inputs` in the executor: the nodes the pass
// changed and those downstream, fed from the float run's kept tensors
// (SensitivityOptions::maxStoredBytes).
Expected<SensitivityReport> analyzeSensitivity(const Model& model,
                                               const std::map<std::string, rt::RtValue>& inputs,
                                               const SensitivityOptions& options);
// The same over several input sets: an output's score is taken on every set (the gate's worst,
// a metric's mean).
Expected<SensitivityReport>
analyzeSensitivity(const Model& model,
                   const std::vector<std::map<std::string, rt::RtValue>>& inputSets,
                   const SensitivityOptions& options);

// The precision guard of the converting CLIs' FP16 modes where kiln picks the precision
// (docs/precision.md). Check (the default): the model is run in float32 and converted on seeded
// input sets (uniform in [-1, 1), integers 0; or the given samples) and a miss of `gate` is a
// warning with the numbers. Keep: the fewest nodes that make the conversion meet `gate` on those
// sets are found (analyzeSensitivity) and kept fp32. It never fails a conversion: what it could
// not do is a note.
enum class PrecisionGuardMode { Off, Check, Keep };

// KILN_PRECISION_GUARD=off|check|keep (default check): the drop-in CLIs take no kiln-only flags,
// so build scripts choose the guard's mode there.
PrecisionGuardMode precisionGuardMode();

struct PrecisionGuardOptions {
  PrecisionGuardMode mode = PrecisionGuardMode::Check;
  SensitivityGate gate;
  // Above this many multiply-adds in all (estimated from the static shapes: runs per set times
  // sets times one run's cost) the guard does not run and says so. Deterministic, unlike a time
  // limit: the same model gets the same decision on any machine.
  double maxTrialMultiplyAdds = 4e10;
  // Nor above this many bytes of weights (the trials copy them), nor when one run makes more than
  // four times as many bytes of values.
  uint64_t maxWeightBytes = 32ull << 20;
  const std::map<std::string, rt::RtValue>* inputs = nullptr; // sample inputs; else seeded
  // Seeded input sets (makeDeterministicInputs with seeds 0..n-1); the gate must hold on each.
  uint32_t seededSets = 4;
  size_t threads = 0; // 0: one per CPU, at most 8
};

struct PrecisionGuardResult {
  std::vector<std::string> keep; // node names to keep fp32 (keep-list names)
  std::vector<std::string> notes;
};

PrecisionGuardResult guardFp16Precision(const Model& model, const PrecisionOptions& precision,
                                        const PrecisionGuardOptions& options);

} // namespace kiln
