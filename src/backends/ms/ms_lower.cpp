// Lowering a whole model to .ms (ms.md §4.5, §4.6): the op → rule table the families in ops/
// fill, activations fused into their producers, graph inputs and outputs, every refusal at once.
#include <cmath>

#include "ms_context.h"
#include "ops/attributes.h"
#include "ops/control_flow.h"

namespace kiln::ms {

namespace {

// Fused activation types (ms.md §4.6: the runtime fuses RELU and RELU6 only).
std::optional<int> fusableActivation(const Node& act) {
  if (act.opType() == "Relu") return fb::ActivationType_RELU;
  if (act.opType() != "Clip") return std::nullopt;
  // Constant bounds only; attributes before opset 11, inputs after.
  double lo = -std::numeric_limits<double>::infinity(), hi = -lo;
  if (act.attribute("min")) {
    auto a = ops::floatAttr(act, "min", 0);
    if (!a) return std::nullopt;
    lo = *a;
  }
  if (act.attribute("max")) {
    auto a = ops::floatAttr(act, "max", 0);
    if (!a) return std::nullopt;
    hi = *a;
  }
  for (size_t i = 1; i < 3; ++i) {
    const Value* v = act.input(i);
    if (!v) continue;
    if (!v->isInitializer() || v->isGraphInput()) return std::nullopt;
    auto s = scalarValue(v->initializer());
    if (!s) return std::nullopt;
    (i == 1 ? lo : hi) = *s;
  }
  if (lo != 0) return std::nullopt;
  if (std::isinf(hi) && hi > 0) return fb::ActivationType_RELU;
  if (hi == 6) return fb::ActivationType_RELU6;
  return std::nullopt;
}

// The graph inputs with dynamic dims, as a converter_lite --inputShape value to fill in:
// "x:<N>,3,<H>,<W>" ("" when every input is static).
std::string dynamicInputsSpec(const Graph& graph) {
  std::vector<std::string> specs;
  for (const Value* v : graph.inputs()) {
    if (v->isInitializer() || v->type().kind != TypeKind::Tensor) continue;
    if (v->shape().hasRank() && v->shape().isStatic()) continue;
    if (!v->shape().hasRank()) {
      specs.push_back(fmt::format("{}:<dims>", v->name()));
      continue;
    }
    std::vector<std::string> dims;
    for (const Dim& d : v->shape().dims())
      dims.push_back(d.isStatic()     ? std::to_string(d.value())
                     : d.isSymbolic() ? fmt::format("<{}>", d.symbol())
                                      : std::string("<?>"));
    specs.push_back(fmt::format("{}:{}", v->name(), fmt::join(dims, ",")));
  }
  return fmt::format("{}", fmt::join(specs, ";"));
}

// The model's node refusals as one status: K7101 when any is about the op itself; K7104 when the
// rest only need sizes the model's dynamic inputs leave open; else K7102.
Status refusalStatus(const Graph& graph, const std::vector<lowering::Refusal>& refusals) {
  std::vector<std::string> parts;
  bool anyOp = false, allDynamic = true;
  for (const auto& r : refusals) {
    parts.push_back(fmt::format("{}: {}", r.label, r.reason));
    anyOp = anyOp || r.isOp;
    allDynamic = allDynamic && r.dynamic;
  }
  const std::string message = fmt::format("{} node(s) cannot be lowered to MindSpore Lite ops: {}",
                                          refusals.size(), fmt::join(parts, "; "));
  if (anyOp)
    return Status(ErrorCode::MsLowerUnsupported, message,
                  "replace these ops in the exporter, or run `kiln check MODEL --target ms` to "
                  "see every unsupported node");
  const std::string spec = dynamicInputsSpec(graph);
  if (allDynamic && !spec.empty())
    return Status(ErrorCode::MsLowerDynamicShape, message,
                  fmt::format("these sizes depend on the model's dynamic input dims: fix them "
                              "with --inputShape=\"{}\" (kiln: --input-shape), numbers in place "
                              "of the <named> dims",
                              spec));
  return Status(ErrorCode::MsLowerBadAttribute, message,
                "change the attribute in the exporter or keep this model on another target");
}

// Every node of `graph` the rules refuse before lowering. Refusals from an op's own check are
// about a value (K7102); those common to every target (no rule, domain, attribute kinds) are
// about the op (K7101).
std::vector<lowering::Refusal> checkGraph(const Graph& graph, int64_t opset) {
  const lowering::OpContext context{opset, ""};
  auto refusals = lowering::collectUnsupported(graph, msLoweringRules(), context);
  for (auto& r : refusals)
    r.isOp = !r.byRule;
  return refusals;
}

} // namespace

// What to do about a sequence or optional at the graph's boundary (ops::boundaryKindReason).
constexpr const char* kBoundaryFix =
    "export the sequence's tensors as separate inputs/outputs (a sequence built and read inside "
    "the model with constant positions converts), or run the model on the CPU (kiln run)";

MsLoweringRules& msLoweringRules() {
  static MsLoweringRules rules(".ms lowering");
  return rules;
}

// A refused node's outputs get tensors of their own so that later nodes still lower (and report
// their own refusals); the graph is not written.
void LoweringContext::placeholders(const Node& n) {
  std::vector<const Value*> values(n.outputs().begin(), n.outputs().end());
  values.push_back(fusedOutput(n));
  for (const Value* v : values) {
    if (!v || alias_.count(v)) continue;
    Slots& s = slots_[v];
    if (s.onnx || s.nhwc) continue;
    MsTensor t;
    t.name = v->name();
    if (v->shape().hasRank())
      for (const Dim& d : v->shape().dims())
        t.dims.push_back(d.isStatic() ? static_cast<int32_t>(d.value()) : -1);
    s.onnx = addTensor(std::move(t));
  }
}

void LoweringContext::fuseActivations() {
  // Activations folded into their producer (RELU/RELU6 only, ms.md §4.6).
  static const std::set<std::string> fusers = {"Conv",    "ConvTranspose", "Gemm", "MatMul",
                                               "Add",     "Sub",           "Mul",  "Div",
                                               "MaxPool", "AveragePool"};
  for (const auto& node : graph_.nodes()) {
    if (!fusers.count(node->opType()) || node->outputs().size() != 1) continue;
    const Value* out = node->output(0);
    if (!out || out->isGraphOutput() || out->uses().size() != 1) continue;
    const Node* act = out->uses()[0].user;
    if (act->owner() != &graph_ || act->inputs().empty() || act->input(0) != out) continue;
    auto type = fusableActivation(*act);
    if (!type) continue;
    if (out->dtype() != DType::Undefined && !isFloatingPoint(out->dtype())) continue;
    fusedActivation_[node.get()] = {act, *type};
    folded_.insert(act);
  }
}

// Graph inputs keep their ONNX names, layout and dtype.
Status LoweringContext::lowerInputs() {
  out_.name = graph_.name();
  for (const Value* v : graph_.inputs()) {
    node_ = nullptr;
    if (v->isInitializer()) continue;
    MsTensor t;
    t.name = v->name();
    auto type = typeIdOf(v->dtype());
    if (!type || v->dtype() == DType::String)
      return Status(ErrorCode::MsLowerBadAttribute,
                    fmt::format("graph input '{}' has dtype {}, which .ms inputs cannot take",
                                v->name(), dtypeName(v->dtype())),
                    "cast the input to a numeric type in the exporter");
    t.dataType = *type;
    t.format = kFormatNCHW;
    if (v->shape().hasRank())
      for (const Dim& d : v->shape().dims())
        t.dims.push_back(d.isStatic() ? static_cast<int32_t>(d.value()) : -1);
    uint32_t id = addTensor(std::move(t));
    slots_[v].onnx = id;
    out_.inputs.push_back(id);
  }
  // The runtime refuses to load a model without inputs ("Model does not have inputs",
  // LiteModel::ModelVerify in src/litert/lite_model.cc): refused here, not written unusable.
  if (out_.inputs.empty())
    return Status(ErrorCode::MsLowerBadAttribute,
                  fmt::format("graph '{}' has no inputs: its outputs are constants, and the "
                              "MindSpore Lite runtime refuses to load a model without inputs",
                              graph_.name()),
                  "compute the constant outputs in the application, or give the model an input");
  return Status::ok();
}

// Graph outputs: ONNX layout under the ONNX name, produced by a node.
Status LoweringContext::lowerOutputs() {
  node_ = nullptr;
  for (const Value* v : graph_.outputs()) {
    const Value* src = resolve(v);
    const bool isInput =
        std::find(graph_.inputs().begin(), graph_.inputs().end(), src) != graph_.inputs().end();
    std::optional<uint32_t> produced;
    if (!constOf(src) && !isInput) {
      auto id = input(src, Layout::Onnx); // inserts the Transpose back from NHWC when needed
      if (!id) return id.status();
      if (std::find(out_.outputs.begin(), out_.outputs.end(), *id) == out_.outputs.end())
        produced = *id;
    }
    if (produced) {
      claimName(*produced, v->name());
      out_.outputs.push_back(*produced);
      continue;
    }
    // A constant, a graph input or a repeated output: copy it through a Reshape so the runtime
    // sees a node-produced output with the ONNX name.
    auto shape = staticShape(src);
    if (!shape)
      return Status(ErrorCode::MsLowerBadAttribute,
                    fmt::format("graph output '{}' is a copy of '{}' with an unknown shape",
                                v->name(), src->name()),
                    "give the output a static shape");
    auto x = input(src, Layout::Onnx);
    if (!x) return x.status();
    uint32_t s = intConst(*shape, v->name() + "_shape");
    MsTensor t;
    auto type = typeIdOf(v->dtype() == DType::Undefined ? src->dtype() : v->dtype());
    t.dataType = type ? *type : kTypeFloat32;
    for (int64_t d : *shape)
      t.dims.push_back(static_cast<int32_t>(d));
    t.name = v->name() + "_copy";
    uint32_t id = addTensor(std::move(t));
    claimName(id, v->name());
    emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {*x, s}, {id});
    out_.outputs.push_back(id);
  }
  return Status::ok();
}

uint32_t LoweringContext::newSubgraph(const std::string& name) {
  MsSubGraph sub;
  // The converter's naming (ms.md §4.2): subgraph_<index>_<graph name>.
  sub.name = fmt::format("subgraph_{}_{}", subgraphs_.size(), name);
  subgraphs_.push_back(std::move(sub));
  return static_cast<uint32_t>(subgraphs_.size() - 1);
}

LoweringContext::SubgraphScope LoweringContext::enterSubgraph(uint32_t index) {
  SubgraphScope saved{current_,    node_,      slots_, alias_, std::move(constCache_),
                      permToNhwc_, permToNchw_};
  constCache_.clear();
  permToNhwc_.reset();
  permToNchw_.reset();
  current_ = index;
  return saved;
}

void LoweringContext::leaveSubgraph(SubgraphScope scope) {
  current_ = scope.subgraph;
  node_ = scope.node;
  slots_ = std::move(scope.slots);
  alias_ = std::move(scope.alias);
  constCache_ = std::move(scope.constCache);
  permToNhwc_ = scope.permToNhwc;
  permToNchw_ = scope.permToNchw;
}

uint32_t LoweringContext::subgraphInput(uint32_t like, const std::string& name, const Value* v) {
  MsTensor t = out_.tensors[like];
  t.name = name;
  t.nodeType = kNodeCNode;
  t.data.reset();
  t.quantParams.clear();
  t.isQuantizedWeight = false;
  t.modelCodes = false;
  t.compressType = 0;
  uint32_t id = addTensor(std::move(t));
  subgraphs_[current_].inputs.push_back(id);
  if (v) {
    alias_.erase(v);
    slots_[v] = Slots{id, std::nullopt};
  }
  return id;
}

void LoweringContext::setSubgraphOutputs(std::vector<uint32_t> outputs) {
  subgraphs_[current_].outputs = std::move(outputs);
}

Status LoweringContext::lowerNodes(const Graph& g) {
  size_t position = 0;
  for (const auto& node : g.nodes()) {
    ++position;
    node_ = node.get();
    Status s = msLoweringRules().find(lowering::ruleKey(*node))->lower(*this, *node);
    if (!s)
      return Status(s.code(),
                    fmt::format("{}: {}", lowering::nodeLabel(*node, position), s.message()),
                    s.hint());
  }
  return Status::ok();
}

Expected<uint32_t> LoweringContext::subgraphResult(const Value* v,
                                                   const std::vector<uint32_t>& taken) {
  const Value* src = resolve(v);
  KILN_ASSIGN_OR_RETURN(uint32_t id, input(src, Layout::Onnx));
  const bool isConst = constOf(src).has_value();
  if (!isConst && std::find(taken.begin(), taken.end(), id) == taken.end()) return id;
  // A constant or a repeated result: a Reshape copies it into a tensor of its own.
  auto shape = staticShape(src);
  if (!shape)
    return bad("subgraph result '{}' is a copy of '{}' with an unknown shape", v->name(),
               src->name());
  uint32_t copy = intermediate(id, uniqueName(v->name() + "_result"));
  emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(),
       {id, intConst(*shape, v->name() + "_result_shape")}, {copy});
  return copy;
}

Expected<MsGraph> LoweringContext::run(std::vector<lowering::Refusal>* refusalsOut) {
  // 0. Inputs and outputs no .ms tensor can hold: nothing else matters until they are tensors.
  if (std::string r = ops::boundaryKindReason(graph_, ".ms"); !r.empty()) {
    if (refusalsOut) refusalsOut->clear();
    return Status(ErrorCode::MsLowerBadAttribute, r, kBoundaryFix);
  }
  // 1. What the rules refuse from the nodes alone, all at once.
  std::vector<lowering::Refusal> refusals = checkGraph(graph_, opset_);
  std::set<const Node*> refused;
  for (const auto& r : refusals)
    refused.insert(r.node);
  auto finish = [&](Status status) -> Status {
    if (refusalsOut) *refusalsOut = refusals;
    return refusals.empty() ? status : refusalStatus(graph_, refusals);
  };

  fuseActivations();
  if (Status s = lowerInputs(); !s) return finish(s);

  // 2. Nodes in order; a node that fails leaves placeholders and the rest still lower, so every
  // refusal is reported at once.
  size_t position = 0;
  for (const auto& node : graph_.nodes()) {
    ++position;
    if (folded_.count(node.get())) continue;
    node_ = node.get();
    Status s = Status::ok();
    if (!refused.count(node.get()))
      s = msLoweringRules().find(lowering::ruleKey(*node))->lower(*this, *node);
    if (s.isOk() && !refused.count(node.get())) continue;
    if (!s.isOk()) {
      if (s.code() == ErrorCode::Internal) return finish(s);
      refusals.push_back({node.get(), lowering::nodeLabel(*node, position), s.message(),
                          s.code() == ErrorCode::MsLowerUnsupported, false,
                          s.code() == ErrorCode::MsLowerDynamicShape});
    }
    placeholders(*node);
  }
  node_ = nullptr;
  if (!refusals.empty()) return finish(Status::ok());

  if (Status s = lowerOutputs(); !s) return finish(s);
  if (Status s = legalizeDataTypes(); !s) return finish(s);
  if (subgraphs_.size() > 1) { // control flow: every subgraph, main first
    subgraphs_[0].name =
        fmt::format("subgraph_0_{}", graph_.name().empty() ? "main_graph" : graph_.name());
    subgraphs_[0].inputs = out_.inputs;
    subgraphs_[0].outputs = out_.outputs;
    out_.subgraphs = std::move(subgraphs_);
  }
  if (refusalsOut) refusalsOut->clear();
  return std::move(out_);
}

Expected<MsGraph> lowerToMs(const Model& model, const MsWriteOptions& options,
                            std::vector<lowering::Refusal>* refusals) {
  if (refusals) refusals->clear();
  if (!model.graph)
    return Status(ErrorCode::EmptyGraph, "model has no graph", "pass a model with a graph");
  LoweringContext context(model, options);
  return context.run(refusals);
}

} // namespace kiln::ms

namespace kiln {

std::string msUnsupportedReason(const Node& node, int64_t opset) {
  const lowering::OpContext context{opset, ""};
  const ms::MsLoweringRule* rule = ms::msLoweringRules().find(lowering::ruleKey(node));
  std::string reason = lowering::commonReason(node, context, rule != nullptr);
  if (reason.empty() && rule && rule->check) reason = rule->check(node, context);
  return reason;
}

} // namespace kiln
