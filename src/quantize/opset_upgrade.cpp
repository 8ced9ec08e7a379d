// Raises a model's ONNX opset to 13 for `kiln quantize`: per-channel DequantizeLinear needs 13, and
// many exported models (PP-OCR's cls at 9, det at 11) are older. Ops whose meaning is the same from
// the model's version to 13 are kept; the few whose attributes became inputs are rewritten; any
// other op refuses the raise with its name, so nothing changes meaning silently.
#include <algorithm>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "kiln/passes/keep_dtype.h"
#include "kiln/quantize.h"
#include "kiln/support/display.h"

namespace kiln {
namespace {

// The first version from which an op means the same as at opset 13 (from the ONNX operator
// changelog: later versions only added types or attributes whose defaults keep the old meaning).
const std::map<std::string, int64_t>& sameUpTo13Since() {
  static const std::map<std::string, int64_t> since = {{"Abs", 6},
                                                       {"Add", 7},
                                                       {"And", 7},
                                                       {"ArgMax", 1},
                                                       {"ArgMin", 1},
                                                       {"AveragePool", 7},
                                                       {"BatchNormalization", 9},
                                                       {"Cast", 6},
                                                       {"Ceil", 6},
                                                       {"Clip", 11},
                                                       {"Concat", 4},
                                                       {"Constant", 1},
                                                       {"ConstantOfShape", 9},
                                                       {"Conv", 1},
                                                       {"ConvTranspose", 1},
                                                       {"Div", 7},
                                                       {"Dropout", 12},
                                                       {"Elu", 6},
                                                       {"Equal", 7},
                                                       {"Erf", 9},
                                                       {"Exp", 6},
                                                       {"Expand", 8},
                                                       {"Flatten", 1},
                                                       {"Floor", 6},
                                                       {"Gather", 1},
                                                       {"Gemm", 7},
                                                       {"GlobalAveragePool", 1},
                                                       {"GlobalMaxPool", 1},
                                                       {"Greater", 7},
                                                       {"HardSigmoid", 6},
                                                       {"Identity", 1},
                                                       {"InstanceNormalization", 6},
                                                       {"LeakyRelu", 6},
                                                       {"Less", 7},
                                                       {"Log", 6},
                                                       {"LRN", 1},
                                                       {"MatMul", 1},
                                                       {"Max", 8},
                                                       {"MaxPool", 8},
                                                       {"Mean", 8},
                                                       {"Min", 8},
                                                       {"Mul", 7},
                                                       {"Neg", 6},
                                                       {"Not", 1},
                                                       {"Or", 7},
                                                       {"Pad", 11},
                                                       {"Pow", 7},
                                                       {"PRelu", 7},
                                                       {"Range", 11},
                                                       {"Reciprocal", 6},
                                                       {"ReduceL2", 1},
                                                       {"ReduceMax", 1},
                                                       {"ReduceMean", 1},
                                                       {"ReduceMin", 1},
                                                       {"ReduceProd", 1},
                                                       {"ReduceSum", 13},
                                                       {"Relu", 6},
                                                       {"Reshape", 5},
                                                       {"Resize", 11},
                                                       {"Shape", 1},
                                                       {"Sigmoid", 6},
                                                       {"Sign", 9},
                                                       {"Sin", 7},
                                                       {"Cos", 7},
                                                       {"Slice", 10},
                                                       {"Softmax", 13},
                                                       {"LogSoftmax", 13},
                                                       {"Softplus", 1},
                                                       {"Split", 13},
                                                       {"Sqrt", 6},
                                                       {"Squeeze", 13},
                                                       {"Sub", 7},
                                                       {"Sum", 8},
                                                       {"Tanh", 6},
                                                       {"Tile", 6},
                                                       {"TopK", 10},
                                                       {"Transpose", 1},
                                                       {"Unsqueeze", 13},
                                                       {"Where", 9}};
  return since;
}

Value* intsInitializer(Graph& graph, const std::string& base, const std::vector<int64_t>& values) {
  return graph.addInitializer(
      graph.uniqueName(base),
      Tensor::fromValues<int64_t>(DType::Int64, {int64_t(values.size())}, values));
}

// Clip before 11 holds min/max as attributes; from 11 they are inputs.
void clipAttributesToInputs(Graph& graph, Node& node) {
  const Attribute* lo = node.attribute("min");
  const Attribute* hi = node.attribute("max");
  const float low = lo ? lo->asFloat() : std::numeric_limits<float>::lowest();
  const float high = hi ? hi->asFloat() : std::numeric_limits<float>::max();
  const std::string base = keepDtypeNodeName(node);
  node.addInput(graph.addInitializer(graph.uniqueName(base + "_min"),
                                     Tensor::fromValues<float>(DType::Float32, {}, {low})));
  node.addInput(graph.addInitializer(graph.uniqueName(base + "_max"),
                                     Tensor::fromValues<float>(DType::Float32, {}, {high})));
  node.removeAttribute("min");
  node.removeAttribute("max");
}

// Slice before 10 holds starts/ends/axes as attributes; from 10 they are inputs.
void sliceAttributesToInputs(Graph& graph, Node& node) {
  const std::string base = keepDtypeNodeName(node);
  for (const char* name : {"starts", "ends", "axes"}) {
    const Attribute* a = node.attribute(name);
    if (!a) break; // axes may be absent: every axis from 0
    node.addInput(intsInitializer(graph, base + "_" + name, a->asInts()));
  }
  for (const char* name : {"starts", "ends", "axes"})
    node.removeAttribute(name);
}

// Squeeze / Unsqueeze / ReduceSum (`axes`) and Split (`split`) hold before 13 as an attribute what
// is an optional input from 13 on (Split's input 1, the others' input 1).
void listAttributeToInput(Graph& graph, Node& node, const char* name) {
  const Attribute* a = node.attribute(name);
  if (!a) return; // absent: the input stays absent too, with the same default
  node.addInput(intsInitializer(graph, keepDtypeNodeName(node) + "_" + name, a->asInts()));
  node.removeAttribute(name);
}

const std::map<std::string, const char*>& listAttributesBecomingInputs() {
  static const std::map<std::string, const char*> ops = {
      {"Squeeze", "axes"}, {"Unsqueeze", "axes"}, {"ReduceSum", "axes"}, {"Split", "split"}};
  return ops;
}

// Softmax before 13 flattens to 2-D at `axis` (default 1); from 13 it normalizes along `axis`
// (default -1). Over the last axis the two agree. The rank comes from the input's shape or, when
// the model gives none there, the output's (the same shape).
bool softmaxOverLastAxis(const Node& node) {
  const Attribute* axis = node.attribute("axis");
  const int64_t value = axis ? axis->asInt() : 1;
  if (value == -1) return true;
  for (const Value* v : {node.input(0), node.output(0)})
    if (v && v->shape().hasRank()) return value == static_cast<int64_t>(v->shape().rank()) - 1;
  return false;
}

} // namespace

Expected<std::vector<std::string>> raiseOpsetTo13(Model& model) {
  const int64_t from = model.opsetVersion("");
  std::vector<std::string> notes;
  if (from >= 13) return notes;
  Graph& graph = *model.graph;
  // Check every node before changing any, so a refusal leaves the model as it was.
  std::map<std::string, std::string> refused; // op type -> first node
  for (const auto& node : graph.nodes()) {
    if (!node->domain().empty() && node->domain() != "ai.onnx") continue;
    if (!node->subgraphs().empty()) {
      refused.emplace(node->opType(), keepDtypeNodeName(*node));
      continue;
    }
    const std::string& op = node->opType();
    auto since = sameUpTo13Since().find(op);
    const bool rewritable = (op == "Clip" && from >= 6) || (op == "Slice" && from >= 1) ||
                            (listAttributesBecomingInputs().count(op) && from >= 2) ||
                            ((op == "Softmax" || op == "LogSoftmax") && softmaxOverLastAxis(*node));
    if (rewritable || (since != sameUpTo13Since().end() && since->second <= from)) continue;
    refused.emplace(op, keepDtypeNodeName(*node));
  }
  if (!refused.empty()) {
    std::string list;
    for (const auto& [op, node] : refused)
      list += fmt::format("{}{} (first '{}')", list.empty() ? "" : ", ", displayName(op),
                          displayName(node));
    return Status(ErrorCode::UnsupportedFormat,
                  fmt::format("{}: opset {} must be raised to 13 for per-channel "
                              "DequantizeLinear, and kiln cannot raise these ops: {}",
                              model.sourcePath, from, list),
                  "convert the model to opset 13 first (onnx.version_converter), then quantize");
  }
  size_t rewritten = 0;
  for (const auto& node : graph.nodes()) {
    const std::string& op = node->opType();
    if (op == "Clip" && from < 11) {
      clipAttributesToInputs(graph, *node);
      ++rewritten;
    } else if (op == "Slice" && from < 10) {
      sliceAttributesToInputs(graph, *node);
      ++rewritten;
    } else if (auto list = listAttributesBecomingInputs().find(op);
               list != listAttributesBecomingInputs().end()) {
      if (node->attribute(list->second)) ++rewritten;
      listAttributeToInput(graph, *node, list->second);
    } else if (op == "Softmax" || op == "LogSoftmax") {
      node->setAttribute("axis", Attribute::ofInt(-1));
      ++rewritten;
    }
  }
  for (OpsetImport& opset : model.opsets)
    if (opset.domain.empty() || opset.domain == "ai.onnx") opset.version = 13;
  // Opset 13 is defined from IR version 7 on; readers refuse the pair with an older IR.
  model.irVersion = std::max<int64_t>(model.irVersion, 7);
  notes.push_back(
      rewritten ? fmt::format("opset raised from {} to 13 for per-channel DequantizeLinear ({} "
                              "node(s) rewritten: Clip/Slice/Squeeze/Unsqueeze/Split/ReduceSum "
                              "attributes to inputs, Softmax axis)",
                              from, rewritten)
                : fmt::format("opset raised from {} to 13 for per-channel DequantizeLinear (every "
                              "op means the same there)",
                              from));
  return notes;
}

} // namespace kiln
