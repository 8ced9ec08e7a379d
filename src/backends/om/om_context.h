// The shared .om lowering / raising machinery the op family files (ops/<family>.cpp) build on.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/backends/lowering.h"
#include "kiln/backends/soc_versions.h"
#include "kiln/ir/graph.h"
#include "om_internal.h"

namespace kiln::om {

using ge::proto::AttrDef;
using ge::proto::OpDef;
using ge::proto::TensorDescriptor;
using lowering::OpContext;

// ONNX attribute ↔ AttrDef (generic rules keep the value, under GraphEngine's name).
std::optional<AttrDef> toAttrDef(const Attribute& a);
std::optional<Attribute> fromAttrDef(const AttrDef& a);

// Node attribute reading: `def` when the attribute is absent or of another kind.
int64_t nodeInt(const Node& n, const std::string& name, int64_t def);
float nodeFloat(const Node& n, const std::string& name, float def);
std::string nodeString(const Node& n, const std::string& name, const std::string& def);
std::optional<std::vector<int64_t>> nodeInts(const Node& n, const std::string& name);

std::optional<std::vector<int64_t>> tensorInts(const Tensor& t);
const Tensor* constInput(const Node& n, size_t i);
std::optional<std::vector<int64_t>> constInts(const Node& n, size_t i);
inline bool hasInput(const Node& n, size_t i) { return n.input(i) != nullptr; }
inline int64_t rankOf(const Value* v) {
  return v && v->shape().hasRank() ? static_cast<int64_t>(v->shape().rank()) : -1;
}
inline bool staticShape(const Value* v) {
  return v && v->shape().hasRank() && v->shape().isStatic();
}
inline bool isFloatType(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16 || t == DType::Float64;
}

// ONNX pads [b1, b2, ..., e1, e2, ...] ↔ GE pads [b1, e1, b2, e2, ...].
std::vector<int64_t> interleavePads(const std::vector<int64_t>& pads);
std::vector<int64_t> deinterleavePads(const std::vector<int64_t>& pads);
// Explicit ONNX-order pads for a conv/pool node, resolving auto_pad from the static input shape.
std::optional<std::vector<int64_t>> explicitPads(const Node& n, const std::vector<int64_t>& kernel,
                                                 const std::vector<int64_t>& strides,
                                                 const std::vector<int64_t>& dilations);
// [1, 1, v...]: per-spatial-axis values as NCHW lists.
std::vector<int64_t> withBatchChannel(const std::vector<int64_t>& v);

// ---------------------------------------------------------------------------------------------
// Lowering.

struct Port {
  std::string src; // "op:idx", "" for an omitted input
  DType dtype = DType::Undefined;
  Shape shape;
};

void fillDesc(TensorDescriptor* d, DType dtype, const Shape& shape, const std::string& layout);
// A desc's layout with the format attrs GE keeps beside it (format_for_int, origin_format...).
void setDescLayout(TensorDescriptor* d, const std::string& layout);

class Lowerer {
 public:
  Lowerer(const Model& model, const OmWriteOptions& options, const SocInfo* soc)
      : model_(model), options_(options), soc_(soc) {}
  // The whole model; `refusals`, when given, receives every node that cannot lower.
  Expected<LoweredModel> run(std::vector<lowering::Refusal>* refusals = nullptr);

  // For rules: the node being lowered.
  const Node* node = nullptr;
  int64_t opset = 0;

  Port in(size_t i) const {
    const Value* v = node->input(i);
    if (!v) return {};
    auto it = sources_.find(v);
    return it == sources_.end() ? Port{} : Port{it->second, v->dtype(), v->shape()};
  }
  // A new op named after the node (or `suffix`ed for helper ops of a decomposition).
  OpDef* op(const std::string& type, const std::string& suffix = "");
  void input(OpDef* o, const Port& p, const std::string& layout = "");
  Port output(OpDef* o, DType dtype, const Shape& shape, const std::string& valueName,
              const std::string& layout = "");
  // Outputs for every output of the node, bound to the node's values.
  void outputs(OpDef* o, const std::string& layout = "");
  void bind(const Value* v, const Port& p) { sources_[v] = p.src; }
  Port constant(const std::string& suffix, const Tensor& t) {
    return emitConst(uniqueOpName(nodeName_ + "_" + suffix), t);
  }
  Port constInts(const std::string& suffix, const std::vector<int64_t>& v) {
    return constant(suffix,
                    Tensor::fromValues<int64_t>(DType::Int64, {static_cast<int64_t>(v.size())}, v));
  }
  Port constScalar(const std::string& suffix, DType dtype, double value);
  // 1-D Conv / pooling run as their 2-D GE op over an [N, C, 1, L] view (GraphEngine has none).
  // `p` with a unit axis 2 (an Unsqueeze), described NCHW.
  Port unsqueezeH(const Port& p, const std::string& suffix);
  // Initializer input `i` viewed with `dims` (same bytes): its Const op is re-described when this
  // node is its only reader (no second copy of the weight), else a new Const.
  Port constView(size_t i, const std::vector<int64_t>& dims);
  // The node's output 0 through `producer`'s 4-D output (a unit axis 2) and a Squeeze.
  void squeezeHOutput(OpDef* producer);

  const OmWriteOptions& options() const { return options_; }
  const std::string& nodeName() const { return nodeName_; }
  // The int8 codes (uint8 codes shifted by -128) a quant rule (ops/quant.cpp) made for a value, so
  // the int8 ops reading it take them without a conversion back and forth.
  std::map<const Value*, Port> int8Codes;
  // The type a value of `t` has on the chip: float64 runs as float32 where the chip has no double
  // (graph inputs are cast on entry, outputs cast back: see Lowerer::run).
  DType onChip(DType t) const { return narrowF64_ && t == DType::Float64 ? DType::Float32 : t; }

  // --- subgraphs (control flow, ops/control_flow.cpp): a GraphDef of the model's flat list.
  struct SubgraphScope {
    ge::proto::GraphDef* graph = nullptr;
    std::map<const Value*, std::string> sources;
    const Node* node = nullptr;
    std::string nodeName;
  };
  // Starts GraphDef `name` (unique among op names): ops go there until endSubgraph.
  SubgraphScope beginSubgraph(const std::string& name);
  void endSubgraph(SubgraphScope scope);
  // Data op `index` of the current subgraph, for input `parentIndex` of the op holding it.
  Port subgraphData(const std::string& name, DType dtype, const Shape& shape, int64_t index,
                    int64_t parentIndex);
  // A Data op for input `index` of the current graph, its output named `name`.
  ge::proto::OpDef* addDataOp(const std::string& name, DType dtype, const Shape& shape,
                              const std::string& layout, int64_t index);
  // The ops of `g` (its initializers as Consts, then its nodes) into the current graph.
  Status lowerNodes(const Graph& g);
  // The current subgraph's NetOutput; `toParent` numbers its inputs as the parent's outputs.
  void subgraphOutput(const std::vector<Port>& outputs, bool toParent);
  const std::string& graphName() const { return graph_->name(); }
  Port source(const Value* v) const {
    auto it = sources_.find(v);
    return it == sources_.end() ? Port{} : Port{it->second, v->dtype(), v->shape()};
  }

 private:
  std::string uniqueOpName(const std::string& base);
  void reserveNodeNames(const Graph& g);
  Port emitConst(const std::string& name, const Tensor& t);
  std::string externalFileName(const std::string& opName);

  const Model& model_;
  const OmWriteOptions& options_;
  const SocInfo* soc_;
  ge::proto::GraphDef* graph_ = nullptr;
  LoweredModel out_;
  std::map<const Value*, std::string> sources_;
  std::set<std::string> opNames_;
  std::set<std::string> reserved_;
  std::set<std::string> externalNames_;
  std::string nodeName_;
  int64_t nextId_ = 0;
  int unnamed_ = 0;
  uint64_t memorySize_ = 0;
  bool narrowF64_ = false;
};

// ---------------------------------------------------------------------------------------------
// Raising.

class Raiser {
 public:
  Raiser(Graph& graph, const uint8_t* weights, size_t weightsSize, std::string baseDir,
         std::string displayName)
      : graph_(graph), weights_(weights), weightsSize_(weightsSize), baseDir_(std::move(baseDir)),
        displayName_(std::move(displayName)) {}

  Status raise(const ge::proto::GraphDef& g);

  Value* in(const OpDef& op, int i) const {
    if (i >= op.input_size() || op.input(i).empty()) return nullptr;
    auto it = sources_.find(op.input(i));
    return it == sources_.end() ? nullptr : it->second;
  }
  const Tensor* constIn(const OpDef& op, int i) const {
    Value* v = in(op, i);
    return v && v->isInitializer() ? &v->initializer() : nullptr;
  }
  std::optional<std::vector<int64_t>> constIntsIn(const OpDef& op, int i) const {
    const Tensor* t = constIn(op, i);
    return t ? tensorInts(*t) : std::nullopt;
  }
  // An ONNX node for `op` whose outputs are the op's outputs.
  Node* emit(const OpDef& op, const std::string& type, const std::vector<Value*>& inputs,
             int outputCount = -1);
  // A helper node of a multi-node expansion: one fresh output.
  Value* helper(const std::string& base, const std::string& type,
                const std::vector<Value*>& inputs) {
    Node* node = graph_.appendNode(type, inputs, {graph_.uniqueName(base)});
    node->setName(node->output(0)->name());
    return node->output(0);
  }
  // Re-points op output `i` at `value` (the last node of an expansion).
  void rebind(const OpDef& op, int i, Value* value) {
    sources_[fmt::format("{}:{}", op.name(), i)] = value;
  }
  Value* constInts(const std::string& base, const std::vector<int64_t>& v) {
    return graph_.addInitializer(
        graph_.uniqueName(base),
        Tensor::fromValues<int64_t>(DType::Int64, {static_cast<int64_t>(v.size())}, v));
  }
  Value* constTensor(const std::string& base, Tensor t) {
    return graph_.addInitializer(graph_.uniqueName(base), std::move(t));
  }
  Status unsupported(const OpDef& op, const std::string& why) const;
  static ValueType descType(const TensorDescriptor& d);
  // The NCHW/OIHW dims of a tensor stored in a heavy format (its origin_shape), else its dims.
  static std::vector<int64_t> plainDims(const TensorDescriptor& d);
  static bool heavyLayout(const TensorDescriptor& d) {
    return d.layout() == "NC1HWC0" || d.layout() == "FRACTAL_Z";
  }

  // Subgraphs (ops/control_flow.cpp).
  void setModelDef(const ge::proto::ModelDef* def) { modelDef_ = def; }
  const ge::proto::GraphDef* findGraph(const std::string& name) const {
    if (!modelDef_) return nullptr;
    for (const auto& g : modelDef_->graph())
      if (g.name() == name) return &g;
    return nullptr;
  }
  // A raiser for a subgraph of this graph (same weights, same model).
  Raiser child(Graph& graph) const {
    Raiser r(graph, weights_, weightsSize_, baseDir_, displayName_);
    r.modelDef_ = modelDef_;
    r.metadata_ = metadata_;
    return r;
  }
  // Model metadata the raised ops add (a gear model's kInputGearsKey).
  void setMetadata(std::vector<std::pair<std::string, std::string>>* metadata) {
    metadata_ = metadata;
  }
  void addMetadata(const std::string& key, const std::string& value) {
    if (metadata_) metadata_->emplace_back(key, value);
  }
  // Data `index` k reads bound[k] when set (an outer value) instead of becoming a graph input;
  // only the NetOutput inputs `keep` lists become graph outputs (all when empty).
  void bindData(std::vector<Value*> bound, std::vector<int> keep) {
    boundData_ = std::move(bound);
    keepOutputs_ = std::move(keep);
  }
  // An ONNX node whose `count` outputs are the op's outputs first..first+count-1.
  Node* emitOutputs(const OpDef& op, const std::string& type, const std::vector<Value*>& inputs,
                    int first, int count);

  Status raiseConst(const OpDef& op);
  Status raiseFileConstant(const OpDef& op);
  const std::string& displayName() const { return displayName_; }
  Graph& graph() { return graph_; }

 private:
  std::string outputName(const OpDef& op, int i);
  Expected<Tensor> weightTensor(const OpDef& op, const TensorDescriptor& desc,
                                const std::string& data);
  Expected<Tensor> plainTensor(const OpDef& op, const TensorDescriptor& desc, DType dtype,
                               const uint8_t* stored);

  Graph& graph_;
  const uint8_t* weights_;
  size_t weightsSize_;
  std::string baseDir_;
  std::string displayName_;
  std::map<std::string, Value*> sources_;
  const ge::proto::ModelDef* modelDef_ = nullptr;
  std::vector<std::pair<std::string, std::string>>* metadata_ = nullptr;
  std::vector<Value*> boundData_;
  std::vector<int> keepOutputs_;
};

// ---------------------------------------------------------------------------------------------
// Rule tables: one lowering rule per ONNX op, one raising rule per GE op type, registered from
// the family files' static initializers (function-local statics: safe in any init order).

using LoweringRule = lowering::LoweringRule<Lowerer>;
using RaisingRule = lowering::RaisingRule<Raiser, OpDef>;
using CheckFn = std::function<std::string(const Node&, const OpContext&)>;
using RaiseFn = std::function<Status(Raiser&, const OpDef&)>;

lowering::RuleTable<LoweringRule>& omLoweringRules();
lowering::RuleTable<RaisingRule>& omRaisingRules();

// A lowering rule from a check and a lowering that returns Status or nothing (then it cannot
// fail: everything it needs was settled by the check).
template <typename Lower>
LoweringRule makeLoweringRule(CheckFn check, Lower lower, const char* file) {
  LoweringRule rule;
  rule.check = std::move(check);
  rule.file = file;
  if constexpr (std::is_void_v<std::invoke_result_t<Lower&, Lowerer&, const Node&>>)
    rule.lower = [lower = std::move(lower)](Lowerer& l, const Node& n) -> Status {
      lower(l, n);
      return Status::ok();
    };
  else
    rule.lower = std::move(lower);
  return rule;
}
// For rules registered in a loop (several ONNX ops or GE types sharing one rule).
template <typename Lower>
void addLowering(const std::string& onnx, CheckFn check, Lower lower, const char* file) {
  omLoweringRules().add(onnx, makeLoweringRule(std::move(check), std::move(lower), file));
}
inline void addRaising(const std::string& geType, RaiseFn raise, const char* file) {
  omRaisingRules().add(geType, RaisingRule{std::move(raise), file});
}

std::string noCheck(const Node&, const OpContext&);

// A float16 ↔ float32 Cast at the float side of a QuantizeLinear / DequantizeLinear that
// ops/quant.cpp lowers: AscendQuant / AscendAntiQuant take or give the float16 themselves (as in an
// ATC model), so the Cast emits nothing.
bool castAbsorbedByQuant(const Node& cast);
// int8 Conv2D / MatMulV2 read back with integer arithmetic (ops/quant.cpp): `conv` receives the
// ConvInteger node, for the caller's window attributes.
Status raiseInt8Conv2D(Raiser& r, const OpDef& op, Node*& conv);
Status raiseInt8MatMul(Raiser& r, const OpDef& op);

// Inputs of ONNX `onnx` that its lowering reads at conversion time (scales, zero points, weights
// re-coded to int8): an initializer read only through such inputs gets no Const of its own.
void addFoldedInputs(const std::string& onnx, std::set<size_t> inputs);
bool foldedInput(const Node& user, size_t inputIndex);

// An op that maps 1:1 with inputs unchanged and attributes renamed (ONNX name → GE name): its
// lowering rule and the raising rule of `geType` (so each GE type belongs to one such op).
void simple(const std::string& onnx, const std::string& geType,
            std::vector<std::pair<std::string, std::string>> attrs = {}, int64_t minOpset = 7,
            CheckFn extra = noCheck, const char* file = "");

} // namespace kiln::om

// KILN_OM_LOWERING(op, check, lower): the lowering rule of ONNX `op` (variadic so the lambdas'
// commas need no parentheses).
#define KILN_OM_LOWERING(op, ...)                                                                  \
  KILN_REGISTER_RULE(::kiln::om::omLoweringRules(), op,                                            \
                     ::kiln::om::makeLoweringRule(__VA_ARGS__, __FILE__))
// KILN_OM_RAISING(geType, raise): the raising rule of GE op type `geType`.
#define KILN_OM_RAISING(geType, ...)                                                               \
  KILN_REGISTER_RULE(::kiln::om::omRaisingRules(), geType,                                         \
                     ::kiln::om::RaisingRule{__VA_ARGS__, __FILE__})
