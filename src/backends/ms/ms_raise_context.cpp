// .ms reader: verifies a MindSpore Lite FlatBuffer and rebuilds it as ONNX-semantics IR (NHWC ops
// wrapped in Transposes, KHWC weights as OIHW constants, quantized/float16 weights decoded, fused
// activations as their own nodes) so the existing executor and passes run it unchanged. Each .ms
// node is raised by its family's rule (ops/<family>_raise.cpp), found by PrimitiveType name.
#include "ms_raise_context.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/backends/ms_reader.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/support/checked_math.h"
#include "ops/validate.h"

namespace kiln::ms {

namespace {

// Opset of the rebuilt graph: axes/splits/pads travel as inputs, as the .ms ops carry them.
constexpr int64_t kOpset = 18;

const char* const kInvalidHint = "pass a complete .ms file written by converter_lite or kiln";
const char* const kUnsupportedHint =
    "convert the model again with kiln, or report the op so the reader learns it";

std::string primitiveName(msfb::PrimitiveType type) {
  const char* name = msfb::EnumNamePrimitiveType(type);
  if (name && *name) return name;
  return fmt::format("PrimitiveType#{}", static_cast<int>(type));
}

} // namespace

lowering::RuleTable<MsRaisingRule>& msRaisingRules() {
  static lowering::RuleTable<MsRaisingRule> table(".ms raising");
  return table;
}

std::string RaiseConstRequest::key() const {
  return fmt::format("{}|{}|{}", floatType ? int(*floatType) : -1, fmt::join(perm, ","),
                     channelAxis);
}

Status RaisingContext::invalidStatus(std::string message) {
  return Status(ErrorCode::MsFileInvalid, name_ + ": " + message, kInvalidHint);
}

Status RaisingContext::unsupportedStatus(std::string message) {
  return Status(ErrorCode::MsReadUnsupported, name_ + ": " + message, kUnsupportedHint);
}

std::string RaisingContext::tensorName(uint32_t i) const {
  const msfb::Tensor* t = tensor(i);
  return t->name() && t->name()->size() ? t->name()->str() : fmt::format("tensor_{}", i);
}

Status RaisingContext::checkIndices() {
  if (!meta_->allTensors()) return invalid("the model has no tensor list (allTensors)");
  if (!meta_->nodes()) return invalid("the model has no node list");
  // A graph without inputs (all constant) is kept: the runtime refuses it, kiln can still run it.
  if (!meta_->outputIndex() || meta_->outputIndex()->size() == 0)
    return invalid("the model has no graph outputs (outputIndex)");
  uint32_t count = meta_->allTensors()->size();
  for (uint32_t i = 0; i < count; ++i) {
    if (!meta_->allTensors()->Get(i)) return invalid("tensor {} is null", i);
    // Static dims must multiply to a size a tensor can have: a count that wraps would pass every
    // later size comparison and let kernels index past the data.
    std::vector<int64_t> known; // -1 is a dynamic dim
    for (int64_t d : dims(i))
      if (d >= 0) known.push_back(d);
    const DType dtype = ms::dtypeOfTypeId(tensor(i)->dataType()).value_or(DType::Undefined);
    auto extent =
        checkTensorExtent(known, dtypeBits(dtype), dtypeName(dtype), ErrorCode::MsFileInvalid,
                          fmt::format("{}: tensor '{}'", name_, tensorName(i)), kInvalidHint);
    if (!extent) return extent.status();
  }
  auto check = [&](const flatbuffers::Vector<uint32_t>* v, const std::string& where) -> Status {
    if (v)
      for (uint32_t i : *v)
        if (i >= count)
          return invalid("{} names tensor {}, but the model has {} tensors", where, i, count);
    return Status::ok();
  };
  KILN_TRY(check(meta_->inputIndex(), "inputIndex"));
  KILN_TRY(check(meta_->outputIndex(), "outputIndex"));
  for (uint32_t n = 0; n < meta_->nodes()->size(); ++n) {
    const msfb::CNode* node = meta_->nodes()->Get(n);
    if (!node) return invalid("node {} is null", n);
    std::string where = fmt::format("node '{}'", node->name() ? node->name()->str() : "");
    if (!node->primitive() || !node->primitive()->value())
      return invalid("{} has no primitive", where);
    KILN_TRY(check(node->inputIndex(), where + " inputIndex"));
    KILN_TRY(check(node->outputIndex(), where + " outputIndex"));
  }
  return Status::ok();
}

std::string RaisingContext::fresh(const std::string& base) {
  std::string candidate = base;
  while (reserved_.count(candidate) || g_->lookupValue(candidate))
    candidate = fmt::format("{}_{}", base, ++counter_);
  reserved_.insert(candidate);
  return candidate;
}

Node* RaisingContext::emitNode(const std::string& op, const std::vector<Value*>& inputs,
                               size_t outputs, Node::AttributeList attrs) {
  std::vector<std::string> names;
  for (size_t i = 0; i < outputs; ++i)
    names.push_back(fresh(nodeName_.empty() ? "ms" : nodeName_ + "/" + op));
  Node* n = g_->appendNode(op, inputs, names);
  for (Value* out : n->outputs())
    ownValues_.insert(out);
  n->setName(fresh(nodeName_.empty() ? op : nodeName_ + "/" + op));
  for (auto& [k, v] : attrs)
    n->setAttribute(k, std::move(v));
  n->addLocation(Location{nodeName_, opName_});
  return n;
}

Value* RaisingContext::constant(Tensor t, const std::string& base) {
  return g_->addInitializer(fresh(nodeName_.empty() ? base : nodeName_ + "/" + base), std::move(t));
}

Value* RaisingContext::scalar(float v, DType dt) {
  if (dt == DType::Float16)
    return constant(
        Tensor::fromValues(DType::Float16, {}, std::vector<uint16_t>{rt::floatToHalf(v)}));
  if (dt == DType::Float64)
    return constant(Tensor::fromValues(DType::Float64, {}, std::vector<double>{v}));
  return constant(Tensor::fromValues(DType::Float32, {}, std::vector<float>{v}));
}

Expected<Value*> RaisingContext::in(size_t pos, ConstRequest request) {
  if (pos >= inputCount())
    return nodeUnsupported(fmt::format("expects an input #{}, it has {}", pos, inputCount()));
  uint32_t i = inIndex(pos);
  if (isConstant(i)) {
    if (!request.floatType) request.floatType = floatType_;
    auto key = std::make_pair(i, request.key());
    if (auto it = constants_.find(key); it != constants_.end()) return it->second;
    KILN_ASSIGN_OR_RETURN(Tensor t, decodeConstant(i, request));
    std::string name = tensorName(i);
    Value* v = g_->addInitializer(g_->lookupValue(name) ? fresh(name) : name, std::move(t));
    constants_[key] = v;
    return v;
  }
  auto it = values_.find(i);
  if (it == values_.end())
    return invalid("node '{}' reads tensor '{}' before any node produces it", nodeName_,
                   tensorName(i));
  if (!request.perm.empty()) return transpose(it->second, request.perm);
  return it->second;
}

Expected<std::vector<int64_t>> RaisingContext::constInts(size_t pos) {
  if (pos >= inputCount() || !isConstant(inIndex(pos)))
    return nodeUnsupported(fmt::format("input #{} must be a constant", pos));
  KILN_ASSIGN_OR_RETURN(Tensor t, decodeConstant(inIndex(pos), {}));
  if (!isInteger(t.dtype()))
    return nodeUnsupported(
        fmt::format("input #{} must be an integer constant, it is {}", pos, dtypeName(t.dtype())));
  return rt::toInt64Vector(t);
}

Expected<std::vector<float>> RaisingContext::constFloats(size_t pos) {
  if (pos >= inputCount() || !isConstant(inIndex(pos)))
    return nodeUnsupported(fmt::format("input #{} must be a constant", pos));
  KILN_ASSIGN_OR_RETURN(Tensor t, decodeConstant(inIndex(pos), {DType::Float32, {}, -1}));
  std::vector<float> out;
  for (uint64_t k = 0; k < t.elementCount(); ++k)
    out.push_back(float(rt::elementAsDouble(t, k)));
  return out;
}

Expected<Value*> RaisingContext::int64Input(size_t pos) {
  if (pos < inputCount() && isConstant(inIndex(pos))) {
    KILN_ASSIGN_OR_RETURN(auto v, constInts(pos));
    std::vector<int64_t> d = dims(inIndex(pos));
    return constant(Tensor::fromValues(DType::Int64, d, v), "ms_ints");
  }
  KILN_ASSIGN_OR_RETURN(Value * v, in(pos));
  auto dt = ms::dtypeOfTypeId(tensor(inIndex(pos))->dataType());
  if (dt == DType::Int64) return v;
  return emit("Cast", {v}, {{"to", Attribute::ofInt(dtypeToOnnx(DType::Int64))}});
}

Status RaisingContext::bind(size_t outPos, Value* v) {
  if (!node_->outputIndex() || outPos >= node_->outputIndex()->size())
    return nodeUnsupported(fmt::format("produces {} outputs, the file lists {}", outPos + 1,
                                       node_->outputIndex() ? node_->outputIndex()->size() : 0));
  uint32_t i = node_->outputIndex()->Get(outPos);
  if (values_.count(i) || isConstant(i))
    return invalid("tensor '{}' is produced twice (node '{}')", tensorName(i), nodeName_);
  // Values that are not this node's own (an input passed through, a constant) get an Identity so
  // the output keeps its own name.
  if (!ownValues_.count(v) || bound_.count(v)) v = emit("Identity", {v});
  bound_.insert(v);
  std::string name = tensorName(i);
  std::string final = g_->lookupValue(name) ? fresh(name) : name;
  reserved_.insert(final);
  if (v->name() != final) g_->renameValue(v, final);
  if (auto dt = ms::dtypeOfTypeId(tensor(i)->dataType())) v->setDType(*dt);
  noteLayout(i, final);
  values_[i] = v;
  return Status::ok();
}

Expected<Value*> RaisingContext::activation(Value* x, msfb::ActivationType type, float alpha,
                                            float minVal, float maxVal, bool approximate) {
  DType ft = floatType();
  switch (type) {
  case msfb::ActivationType_NO_ACTIVATION:
    return x;
  case msfb::ActivationType_RELU:
    return emit("Relu", {x});
  case msfb::ActivationType_RELU6:
    return emit("Clip", {x, scalar(0, ft), scalar(6, ft)});
  case msfb::ActivationType_RELU1:
    return emit("Clip", {x, scalar(-1, ft), scalar(1, ft)});
  case msfb::ActivationType_SIGMOID:
    return emit("Sigmoid", {x});
  case msfb::ActivationType_TANH:
    return emit("Tanh", {x});
  case msfb::ActivationType_ABS:
    return emit("Abs", {x});
  case msfb::ActivationType_SOFTPLUS:
    return emit("Softplus", {x});
  case msfb::ActivationType_SOFTSIGN:
    return emit("Softsign", {x});
  case msfb::ActivationType_SIGN:
    return emit("Sign", {x});
  case msfb::ActivationType_SELU:
    return emit("Selu", {x});
  case msfb::ActivationType_LEAKY_RELU:
    return emit("LeakyRelu", {x}, {{"alpha", Attribute::ofFloat(alpha)}});
  case msfb::ActivationType_ELU:
    return emit("Elu", {x}, {{"alpha", Attribute::ofFloat(alpha)}});
  case msfb::ActivationType_THRESHOLDRELU:
    return emit("ThresholdedRelu", {x}, {{"alpha", Attribute::ofFloat(alpha)}});
  case msfb::ActivationType_HSWISH:
    return emit("HardSwish", {x});
  case msfb::ActivationType_HSIGMOID:
    return emit("HardSigmoid", {x},
                {{"alpha", Attribute::ofFloat(1.0f / 6)}, {"beta", Attribute::ofFloat(0.5f)}});
  case msfb::ActivationType_HARD_TANH:
    return emit("Clip", {x, scalar(minVal, ft), scalar(maxVal, ft)});
  case msfb::ActivationType_SWISH:
    return emit("Mul", {x, emit("Sigmoid", {x})});
  case msfb::ActivationType_GELU:
  case msfb::ActivationType_FAST_GELU: {
    Value* inner;
    if (approximate || type == msfb::ActivationType_FAST_GELU) {
      // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
      Value* cube = emit("Mul", {emit("Mul", {x, x}), x});
      Value* sum = emit("Add", {x, emit("Mul", {cube, scalar(0.044715f, ft)})});
      inner = emit("Tanh", {emit("Mul", {sum, scalar(0.7978845608f, ft)})});
    } else {
      inner = emit("Erf", {emit("Mul", {x, scalar(0.70710678118f, ft)})});
    }
    Value* onePlus = emit("Add", {inner, scalar(1, ft)});
    return emit("Mul", {emit("Mul", {x, scalar(0.5f, ft)}), onePlus});
  }
  default:
    return nodeUnsupported(
        fmt::format("activation type {} ({})", msfb::EnumNameActivationType(type), int(type)));
  }
}

// --- one-op raisings shared by several families ---

Status RaisingContext::binary(const std::string& op, msfb::ActivationType act) {
  KILN_ASSIGN_OR_RETURN(Value * a, in(0));
  KILN_ASSIGN_OR_RETURN(Value * b, in(1));
  Value* y = emit(op, {a, b});
  KILN_ASSIGN_OR_RETURN(y, activation(y, act));
  return bind(0, y);
}

Status RaisingContext::unary(const std::string& op, Node::AttributeList attrs) {
  KILN_ASSIGN_OR_RETURN(Value * x, in(0));
  return bind(0, emit(op, {x}, std::move(attrs)));
}

Status RaisingContext::readOp(const msfb::Primitive* p) {
  const MsRaisingRule* rule = msRaisingRules().find(primitiveName(p->value_type()));
  if (!rule) return nodeUnsupported("this op type has no reader");
  return rule->raise(*this, *p);
}

Status RaisingContext::readNode(const msfb::CNode* node) {
  node_ = node;
  ownValues_.clear();
  nodeName_ = node->name() ? node->name()->str() : "";
  opName_ = primitiveName(node->primitive()->value_type());
  auto qt = node->quantType();
  // Int8 kernels are read for the ops whose rules raise them (ops/conv.cpp, ops/matmul.cpp:
  // QLinearConv / QLinearMatMul over the codes); QUANT_DYNAMIC for the two ops converter_lite's
  // DYNAMIC_QUANT makes (ops/quant_dynamic.cpp): DynamicQuant and the int8 MatMulFusion after it.
  const auto type = node->primitive() ? node->primitive()->value_type() : msfb::PrimitiveType_NONE;
  const bool int8Rule = type == msfb::PrimitiveType_Conv2DFusion ||
                        type == msfb::PrimitiveType_MatMulFusion ||
                        type == msfb::PrimitiveType_QuantDTypeCast;
  const bool dynamicRead =
      qt == msfb::QuantType_QUANT_DYNAMIC &&
      (type == msfb::PrimitiveType_DynamicQuant || type == msfb::PrimitiveType_MatMulFusion);
  if (((qt == msfb::QuantType_QUANT_ALL || qt == msfb::QuantType_PostTraining) && !int8Rule) ||
      qt == msfb::QuantType_AwareTraining || (qt == msfb::QuantType_QUANT_DYNAMIC && !dynamicRead))
    return nodeUnsupported(fmt::format("quant type {} (int8 kernels) is not read; only float and "
                                       "weight-quantized nodes are",
                                       msfb::EnumNameQuantType(qt)));
  if (!node->outputIndex() || node->outputIndex()->size() == 0)
    return invalid("node '{}' has no outputs", nodeName_);
  // The node's float type: that of its first float input that is not a constant; when every
  // float input is a constant (Where choosing between two constants by a bool mask), that of its
  // first float output, so float16 constants are not read as float32 under a float16 output.
  auto floatOf = [&](uint32_t i) -> std::optional<DType> {
    auto dt = ms::dtypeOfTypeId(tensor(i)->dataType());
    if (dt && (*dt == DType::Float16 || *dt == DType::Float32 || *dt == DType::Float64)) return dt;
    return std::nullopt;
  };
  std::optional<DType> nodeFloat;
  for (size_t k = 0; k < inputCount() && !nodeFloat; ++k)
    if (!isConstant(inIndex(k))) nodeFloat = floatOf(inIndex(k));
  for (size_t k = 0; k < outputCount() && !nodeFloat; ++k)
    nodeFloat = floatOf(outIndex(k));
  floatType_ = nodeFloat.value_or(DType::Float32);
  return readOp(node->primitive());
}

Expected<Model> RaisingContext::read() {
  KILN_TRY(checkIndices());
  model_.producerName = "MindSpore Lite";
  model_.producerVersion = meta_->version() ? meta_->version()->str() : "";
  model_.opsets = {OpsetImport{"", kOpset}};
  model_.sourcePath = name_;
  model_.graph = std::make_shared<Graph>(meta_->name() ? meta_->name()->str() : "ms_graph");
  g_ = model_.graph.get();

  uint32_t count = meta_->allTensors()->size();
  for (uint32_t i = 0; i < count; ++i)
    reserved_.insert(tensorName(i));

  std::vector<uint32_t> order;
  auto subgraphs = meta_->subGraph();
  // Control flow: subgraph parameters are neither constants nor produced by a node.
  std::set<uint32_t> params;
  if (subgraphs)
    for (uint32_t s = 1; s < subgraphs->size(); ++s) {
      const msfb::SubGraph* sub = subgraphs->Get(s);
      if (!sub) return invalid("subgraph {} is null", s);
      if (sub->inputIndices())
        for (uint32_t i : *sub->inputIndices()) {
          if (i >= count) return invalid("subgraph {} names tensor {}", s, i);
          params.insert(i);
        }
      if (sub->nodeIndices())
        for (uint32_t n : *sub->nodeIndices())
          if (n >= meta_->nodes()->size())
            return invalid("subgraph {} names node {}, but the model has {} nodes", s, n,
                           meta_->nodes()->size());
    }
  if (subgraphs && subgraphs->size() >= 1 && subgraphs->Get(0) &&
      subgraphs->Get(0)->nodeIndices()) {
    for (uint32_t n : *subgraphs->Get(0)->nodeIndices()) {
      if (n >= meta_->nodes()->size())
        return invalid("subgraph 0 names node {}, but the model has {} nodes", n,
                       meta_->nodes()->size());
      order.push_back(n);
    }
  } else {
    for (uint32_t n = 0; n < meta_->nodes()->size(); ++n)
      order.push_back(n);
  }

  // Which tensors nodes produce; the rest that are not graph inputs are constants.
  std::set<uint32_t> produced, inputs;
  if (meta_->inputIndex()) inputs.insert(meta_->inputIndex()->begin(), meta_->inputIndex()->end());
  // Every node of every subgraph: a subgraph's nodes produce tensors too.
  std::vector<uint32_t> all = order;
  if (subgraphs && subgraphs->size() > 1) {
    all.clear();
    for (uint32_t n = 0; n < meta_->nodes()->size(); ++n)
      all.push_back(n);
  }
  for (uint32_t n : all) {
    const msfb::CNode* node = meta_->nodes()->Get(n);
    if (node->outputIndex())
      for (uint32_t o : *node->outputIndex())
        if (!produced.insert(o).second)
          return invalid("tensor '{}' is produced by more than one node", tensorName(o));
  }
  for (uint32_t n : all) {
    const msfb::CNode* node = meta_->nodes()->Get(n);
    if (node->inputIndex())
      for (uint32_t i : *node->inputIndex())
        if (!produced.count(i) && !inputs.count(i) && !params.count(i)) constant_.insert(i);
  }

  std::vector<uint32_t> inputOrder;
  if (meta_->inputIndex())
    inputOrder.assign(meta_->inputIndex()->begin(), meta_->inputIndex()->end());
  for (uint32_t i : inputOrder) {
    if (values_.count(i)) continue;
    const msfb::Tensor* t = tensor(i);
    auto dt = ms::dtypeOfTypeId(t->dataType());
    if (!dt)
      return unsupported("graph input '{}' has data type {}, which kiln does not read",
                         tensorName(i), t->dataType());
    if (produced.count(i)) return invalid("graph input '{}' is produced by a node", tensorName(i));
    std::vector<Dim> shape;
    for (int64_t d : dims(i))
      shape.push_back(d >= 0 ? Dim::known(d) : Dim());
    // An input that carries data has a default value (an ONNX initializer-backed input).
    Value* v;
    if ((t->data() && t->data()->size()) || t->externalData()) {
      KILN_ASSIGN_OR_RETURN(Tensor init, decodeConstant(i, {}));
      v = g_->addInitializer(tensorName(i), std::move(init));
    } else {
      v = g_->addValue(tensorName(i));
    }
    v->setType(ValueType::tensor(*dt, Shape(shape)));
    noteLayout(i, v->name());
    g_->addInput(v);
    values_[i] = v;
  }

  for (uint32_t n : order)
    KILN_TRY(readNode(meta_->nodes()->Get(n)));
  node_ = nullptr;
  nodeName_.clear();
  opName_.clear();

  for (uint32_t o : *meta_->outputIndex()) {
    Value* v = nullptr;
    if (auto it = values_.find(o); it != values_.end())
      v = it->second;
    else if (isConstant(o) || (!produced.count(o) && tensor(o)->data())) {
      KILN_ASSIGN_OR_RETURN(Tensor t, decodeConstant(o, {}));
      v = g_->addInitializer(fresh(tensorName(o)), std::move(t));
    }
    if (!v) return invalid("graph output '{}' is produced by no node", tensorName(o));
    if (auto dt = ms::dtypeOfTypeId(tensor(o)->dataType()); dt && v->dtype() == DType::Undefined)
      v->setDType(*dt);
    g_->addOutput(v);
  }
  return std::move(model_);
}

Expected<Value*> RaisingContext::valueOf(uint32_t t) {
  if (auto it = values_.find(t); it != values_.end()) return it->second;
  if (!isConstant(t))
    return invalid("node '{}' reads tensor '{}' before any node produces it", nodeName_,
                   tensorName(t));
  auto key = std::make_pair(t, RaiseConstRequest{}.key());
  if (auto it = constants_.find(key); it != constants_.end()) return it->second;
  KILN_ASSIGN_OR_RETURN(Tensor value, decodeConstant(t, {}));
  Value* v = g_->addInitializer(fresh(tensorName(t)), std::move(value));
  constants_[key] = v;
  return v;
}

Expected<std::shared_ptr<Graph>>
RaisingContext::readSubgraph(int64_t index, const std::vector<Value*>& bound, size_t dropTail,
                             const std::vector<uint32_t>& outputs) {
  const msfb::SubGraph* sub = subgraph(index);
  if (!sub || index == 0)
    return invalid("node '{}' names subgraph {}, which the model does not have", nodeName_, index);
  // What reading another subgraph changes, put back afterwards.
  Graph* savedGraph = g_;
  auto savedConstants = std::move(constants_);
  const msfb::CNode* savedNode = node_;
  auto savedOwn = ownValues_;
  std::string savedName = nodeName_, savedOp = opName_;
  DType savedFloat = floatType_;
  auto restore = [&] {
    g_ = savedGraph;
    constants_ = std::move(savedConstants);
    node_ = savedNode;
    ownValues_ = std::move(savedOwn);
    nodeName_ = std::move(savedName);
    opName_ = std::move(savedOp);
    floatType_ = savedFloat;
  };
  auto g = std::make_shared<Graph>(
      sub->name() ? sub->name()->str() : fmt::format("subgraph_{}", index), g_);
  g_ = g.get();
  constants_.clear();
  Status status = [&]() -> Status {
    if (sub->inputIndices())
      for (uint32_t k = 0; k < sub->inputIndices()->size(); ++k) {
        uint32_t t = sub->inputIndices()->Get(k);
        if (k < bound.size() && bound[k]) {
          values_[t] = bound[k];
          continue;
        }
        std::vector<Dim> shape;
        for (int64_t d : dims(t))
          shape.push_back(d >= 0 ? Dim::known(d) : Dim());
        Value* v = g_->addValue(fresh(tensorName(t)));
        if (auto dt = ms::dtypeOfTypeId(tensor(t)->dataType()))
          v->setType(ValueType::tensor(*dt, Shape(shape)));
        g_->addInput(v);
        values_[t] = v;
      }
    size_t count = sub->nodeIndices() ? sub->nodeIndices()->size() : 0;
    if (dropTail > count) return invalid("subgraph {} has too few nodes", index);
    for (size_t i = 0; i + dropTail < count; ++i)
      KILN_TRY(readNode(meta_->nodes()->Get(sub->nodeIndices()->Get(i))));
    for (uint32_t t : outputs) {
      KILN_ASSIGN_OR_RETURN(Value * v, valueOf(t));
      // ONNX subgraph results are values the subgraph defines, each once.
      if (v->owner() != g_ || std::count(g_->outputs().begin(), g_->outputs().end(), v)) {
        Node* copy = g_->appendNode("Identity", {v}, {fresh(tensorName(t) + "_result")});
        copy->output(0)->setType(v->type());
        v = copy->output(0);
      }
      g_->addOutput(v);
    }
    return Status::ok();
  }();
  restore();
  if (!status) return status;
  return g;
}

namespace {

Expected<Model> readBuffer(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                           const MappedFile* file, const std::string& displayName,
                           const std::string& baseDir) {
  if (!data || size < 8 || !msfb::MetaGraphBufferHasIdentifier(data))
    return Status(ErrorCode::MsFileInvalid,
                  fmt::format("{}: not a .ms file (no MSL2 identifier at bytes 4..7, {} bytes)",
                              displayName, size),
                  kInvalidHint);
  flatbuffers::Verifier verifier(data, size, ms::kVerifierMaxDepth, ms::kVerifierMaxTables);
  if (!msfb::VerifyMetaGraphBuffer(verifier))
    return Status(
        ErrorCode::MsFileInvalid,
        fmt::format("{}: not a valid .ms file (FlatBuffers verification failed, {} bytes)",
                    displayName, size),
        kInvalidHint);
  RaisingContext reader(msfb::GetMetaGraph(data), std::move(owner), file, displayName, baseDir);
  KILN_ASSIGN_OR_RETURN(Model model, reader.read());
  // The raised graph feeds the same executor and passes as an imported one: the same checks. A
  // node they refuse makes the file inconsistent, whoever wrote it.
  if (Status valid = ops::validateGraph(*model.graph, model); !valid)
    return Status(ErrorCode::MsFileInvalid, displayName + ": " + valid.message(), kInvalidHint);
  // What the writer spelled in several ops runs as the model it came from: each NHWC op comes back
  // as its NCHW ONNX op between two layout Transposes, which sink until they cancel (the graph
  // runs in the source's layout, activations right after their Conv where the executor fuses
  // them); Round, written as seven float ops, is one op again, and so is a float16 Cast written
  // with its pre-rounding; DynamicQuantizeLinear and ConvInteger, written as float ops over
  // integer-valued floats, run as those ops again.
  PassContext context;
  context.model = &model;
  for (const char* pass : {"fuse-round", "fuse-half-cast", "sink-transposes", "fuse-dynamic-quant"})
    if (auto changed = createPass(pass)->run(*model.graph, context); !changed)
      return changed.status();
  return model;
}

} // namespace

} // namespace kiln::ms

namespace kiln {

Expected<Model> readMsBuffer(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                             const std::string& displayName, const std::string& baseDir) {
  return ms::readBuffer(data, size, std::move(owner), nullptr, displayName, baseDir);
}

Expected<Model> readMsFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const MappedFile* raw = file.get();
  return ms::readBuffer(raw->data(), raw->size(), file, raw, path, dir);
}

} // namespace kiln
