// Target backends (.ms, .om) plug into the tools here: reading their files into IR, the
// conformance/compare round trip (lower, write, read back) and per-node support checks.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/backends/lowering.h"
#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

struct RoundTripOptions {
  std::string variant;            // what follows ':' in "om:Ascend310P3" ("" for none)
  std::string precision = "fp32"; // fp32 or fp16 (the backend's FP16 conversion)
  std::string artifactPath; // also write the artifact here ("" for none): outside judges run it
};

// One entry of a backend's rule table: the ONNX op (lowering) or target op (raising) it is keyed
// by, and the family file that registers it.
struct RuleInfo {
  std::string key;
  std::string file;
};

// The entries of a backend's RuleTable (kiln/backends/lowering.h), for loweringRules/raisingRules.
template <typename Table> std::vector<RuleInfo> ruleInfosOf(const Table& table) {
  std::vector<RuleInfo> out;
  for (const auto& [key, rule] : table.all())
    out.push_back({key, rule.file});
  return out;
}

// A failed lowering's refusals as `kiln check` takes them: the rules' own, or, when the failure
// names no node (a graph input's dtype), one refusal for the model.
inline std::vector<lowering::Refusal> refusalsOf(const Status& status,
                                                 std::vector<lowering::Refusal> refusals) {
  if (!status.isOk() && refusals.empty())
    refusals.push_back({nullptr, "model", status.message(), false});
  return refusals;
}

struct TargetHooks {
  std::string name;                    // "ms", "om": the --via / --target name
  std::vector<std::string> extensions; // file extensions this target reads, e.g. ".ms"
  // Reads a file of this format into IR the executor runs.
  std::function<Expected<Model>(const std::string& path)> read;
  // Rewrites the nodes this target refuses into standard ops it takes (RNN/GRU/LSTM unrolled), in
  // place; the conversion pipeline runs it after simplification when it converts for this target
  // (ConversionOptions::target). Returns whether the model changed.
  std::function<Expected<bool>(Model& model, const std::string& variant)> prepare;
  // Passes (by registry name) the conversion pipeline runs after `prepare` when it converts for
  // this target, their notes collected with the others: what the target's own converter does to
  // the models it takes (.ms: demote-float64).
  std::vector<std::string> preparePasses;
  // Lowers `model` (ONNX-semantics IR, pipeline already run), serializes it, reads the bytes back
  // and returns executable IR. A model with ops that do not lower fails with the backend's
  // "unsupported op" code (conformance counts that as a skip that names the ops).
  std::function<Expected<Model>(Model model, const RoundTripOptions& options)> roundTrip;
  // Why the target cannot take this node ("" when it can); `variant` as in RoundTripOptions,
  // `opset` the model's opset for the node's domain.
  std::function<std::string(const Node& node, const std::string& variant, int64_t opset)>
      unsupportedReason;
  // Every node the target refuses, found by lowering `model` (the conversion pipeline already
  // run) without writing: the rule checks and what only lowering finds. Empty when it lowers. A
  // refusal that no node owns (a graph input's dtype) has node == nullptr.
  std::function<std::vector<lowering::Refusal>(const Model& model, const std::string& variant)>
      lowerRefusals;
  // The rule tables, for docs/ops.md and the coverage test.
  std::function<std::vector<RuleInfo>()> loweringRules;
  std::function<std::vector<RuleInfo>()> raisingRules;
  // Whether the target's converter refuses a model whose shape inference conflicts (atc does, as
  // ATC fails in InferShape; converter_lite converts it): `kiln check --target` reports conflicts
  // as problems or as warnings accordingly.
  bool refusesShapeConflicts = false;
  // Codes that mean "does not lower" rather than "broken".
  std::vector<ErrorCode> unsupportedCodes;
};

// Called from a static initializer in the backend's own file (see KILN_REGISTER_TARGET).
bool registerTarget(TargetHooks hooks);
// "ms" or "om:Ascend310P3" → the target named before ':' (nullptr when unknown).
const TargetHooks* findTarget(const std::string& nameAndVariant);
const TargetHooks* findTargetForExtension(const std::string& extension);
std::vector<std::string> targetNames();

} // namespace kiln

#define KILN_REGISTER_TARGET(id, makeHooks)                                                        \
  static const bool kilnTargetRegistered_##id = ::kiln::registerTarget(makeHooks())
