// Lowering ONNX-semantics IR to GraphEngine ops (the op types ATC's ONNX parser produces) and
// raising them back: one rule table per direction, kept side by side so each pair stays inverse.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "kiln/backends/om_formats.h"
#include "kiln/backends/soc_versions.h"
#include "kiln/ir/constant.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/support/mapped_file.h"
#include "om_internal.h"

namespace kiln::om {
namespace {

using ge::proto::AttrDef;
using ge::proto::OpDef;
using ge::proto::TensorDescriptor;
using AttrMap = google::protobuf::Map<std::string, AttrDef>;

// The ONNX opset raised graphs are written in: every raise rule emits ops valid at this version
// (ReduceX/Squeeze/Split/Pad/Clip/Slice take their parameters as inputs).
constexpr int64_t kRaisedOpset = 18;

} // namespace

// ---------------------------------------------------------------------------------------------
// AttrDef construction and reading.

AttrDef attrI(int64_t v) {
  AttrDef a;
  a.set_i(v);
  return a;
}
AttrDef attrF(float v) {
  AttrDef a;
  a.set_f(v);
  return a;
}
AttrDef attrB(bool v) {
  AttrDef a;
  a.set_b(v);
  return a;
}
AttrDef attrS(const std::string& v) {
  AttrDef a;
  a.set_s(v);
  return a;
}
AttrDef attrInts(const std::vector<int64_t>& v) {
  AttrDef a;
  auto* list = a.mutable_list();
  list->set_val_type(AttrDef::ListValue::VT_LIST_INT);
  for (int64_t x : v)
    list->add_i(x);
  return a;
}
AttrDef attrFloats(const std::vector<float>& v) {
  AttrDef a;
  auto* list = a.mutable_list();
  list->set_val_type(AttrDef::ListValue::VT_LIST_FLOAT);
  for (float x : v)
    list->add_f(x);
  return a;
}
AttrDef attrStrings(const std::vector<std::string>& v) {
  AttrDef a;
  auto* list = a.mutable_list();
  list->set_val_type(AttrDef::ListValue::VT_LIST_STRING);
  for (const auto& x : v)
    list->add_s(x);
  return a;
}

const AttrDef* findAttr(const OpDef& op, const std::string& name) {
  auto it = op.attr().find(name);
  return it == op.attr().end() ? nullptr : &it->second;
}
int64_t getI(const OpDef& op, const std::string& name, int64_t def) {
  const AttrDef* a = findAttr(op, name);
  if (!a) return def;
  if (a->value_case() == AttrDef::kI) return a->i();
  if (a->value_case() == AttrDef::kB) return a->b();
  if (a->value_case() == AttrDef::kDt) return a->dt();
  return def;
}
float getF(const OpDef& op, const std::string& name, float def) {
  const AttrDef* a = findAttr(op, name);
  return a && a->value_case() == AttrDef::kF ? a->f() : def;
}
bool getB(const OpDef& op, const std::string& name, bool def) {
  const AttrDef* a = findAttr(op, name);
  if (!a) return def;
  if (a->value_case() == AttrDef::kB) return a->b();
  if (a->value_case() == AttrDef::kI) return a->i() != 0;
  return def;
}
std::string getS(const OpDef& op, const std::string& name, const std::string& def) {
  const AttrDef* a = findAttr(op, name);
  return a && a->value_case() == AttrDef::kS ? a->s() : def;
}
std::vector<int64_t> getInts(const OpDef& op, const std::string& name) {
  const AttrDef* a = findAttr(op, name);
  if (!a || a->value_case() != AttrDef::kList) return {};
  return {a->list().i().begin(), a->list().i().end()};
}

namespace {

// ONNX attribute → AttrDef (generic rules keep the value, under GraphEngine's name).
std::optional<AttrDef> toAttrDef(const Attribute& a) {
  switch (a.kind()) {
  case AttrKind::Int:
    return attrI(a.asInt());
  case AttrKind::Float:
    return attrF(a.asFloat());
  case AttrKind::String:
    return attrS(a.asString());
  case AttrKind::Ints:
    return attrInts(a.asInts());
  case AttrKind::Floats:
    return attrFloats(a.asFloats());
  case AttrKind::Strings:
    return attrStrings(a.asStrings());
  default:
    return std::nullopt;
  }
}
std::optional<Attribute> fromAttrDef(const AttrDef& a) {
  switch (a.value_case()) {
  case AttrDef::kI:
    return Attribute::ofInt(a.i());
  case AttrDef::kB:
    return Attribute::ofInt(a.b() ? 1 : 0);
  case AttrDef::kF:
    return Attribute::ofFloat(a.f());
  case AttrDef::kS:
    return Attribute::ofString(a.s());
  case AttrDef::kList:
    switch (a.list().val_type()) {
    case AttrDef::ListValue::VT_LIST_INT:
      return Attribute::ofInts({a.list().i().begin(), a.list().i().end()});
    case AttrDef::ListValue::VT_LIST_FLOAT:
      return Attribute::ofFloats({a.list().f().begin(), a.list().f().end()});
    case AttrDef::ListValue::VT_LIST_STRING:
      return Attribute::ofStrings({a.list().s().begin(), a.list().s().end()});
    default:
      if (a.list().i_size()) return Attribute::ofInts({a.list().i().begin(), a.list().i().end()});
      if (a.list().f_size()) return Attribute::ofFloats({a.list().f().begin(), a.list().f().end()});
      if (a.list().s_size())
        return Attribute::ofStrings({a.list().s().begin(), a.list().s().end()});
      return Attribute::ofInts({});
    }
  default:
    return std::nullopt;
  }
}

int64_t nodeInt(const Node& n, const std::string& name, int64_t def) {
  const Attribute* a = n.attribute(name);
  return a && a->kind() == AttrKind::Int ? a->asInt() : def;
}
float nodeFloat(const Node& n, const std::string& name, float def) {
  const Attribute* a = n.attribute(name);
  return a && a->kind() == AttrKind::Float ? a->asFloat() : def;
}
std::string nodeString(const Node& n, const std::string& name, const std::string& def) {
  const Attribute* a = n.attribute(name);
  return a && a->kind() == AttrKind::String ? a->asString() : def;
}
std::optional<std::vector<int64_t>> nodeInts(const Node& n, const std::string& name) {
  const Attribute* a = n.attribute(name);
  if (!a || a->kind() != AttrKind::Ints) return std::nullopt;
  return a->asInts();
}

std::optional<std::vector<int64_t>> tensorInts(const Tensor& t) {
  if (t.dtype() == DType::Int64) return t.copyValues<int64_t>();
  if (t.dtype() == DType::Int32) {
    auto v = t.copyValues<int32_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  return std::nullopt;
}
const Tensor* constInput(const Node& n, size_t i) {
  const Value* v = n.input(i);
  return v && v->isInitializer() ? &v->initializer() : nullptr;
}
std::optional<std::vector<int64_t>> constInts(const Node& n, size_t i) {
  const Tensor* t = constInput(n, i);
  return t ? tensorInts(*t) : std::nullopt;
}
bool hasInput(const Node& n, size_t i) { return n.input(i) != nullptr; }
int64_t rankOf(const Value* v) {
  return v && v->shape().hasRank() ? static_cast<int64_t>(v->shape().rank()) : -1;
}
bool staticShape(const Value* v) { return v && v->shape().hasRank() && v->shape().isStatic(); }

// ---------------------------------------------------------------------------------------------
// Lowering.

struct Port {
  std::string src; // "op:idx", "" for an omitted input
  DType dtype = DType::Undefined;
  Shape shape;
};

std::string layoutFor(const Shape& shape, const std::string& preferred) {
  if (!preferred.empty()) return preferred;
  return "ND";
}

void fillDesc(TensorDescriptor* d, DType dtype, const Shape& shape, const std::string& layout) {
  d->set_dtype(toGeDType(dtype).value_or(ge::proto::DT_UNDEFINED));
  std::vector<int64_t> dims;
  if (shape.hasRank())
    for (const Dim& dim : shape.dims())
      dims.push_back(dim.isStatic() ? dim.value() : -1);
  else
    dims.push_back(-2); // unknown rank
  for (int64_t x : dims)
    d->mutable_shape()->add_dim(x);
  d->set_layout(layout);
  int format = formatFromName(layout);
  auto& attrs = *d->mutable_attr();
  attrs["format_for_int"] = attrI(format);
  attrs["origin_format"] = attrS(layout);
  attrs["origin_format_for_int"] = attrI(format);
  attrs["origin_shape"] = attrInts(dims);
  attrs["origin_shape_initialized"] = attrB(true);
  d->set_device_type("NPU");
  if (shape.hasRank()) d->set_real_dim_cnt(static_cast<int64_t>(shape.rank()));
  if (shape.hasRank() && shape.isStatic())
    if (auto n = shape.elementCount())
      if (auto bytes = dtypeStorageBytes(dtype, *n)) d->set_size(static_cast<int64_t>(*bytes));
}

struct Rule;

class Lowerer {
 public:
  Lowerer(const Model& model, const OmWriteOptions& options, const SocInfo* soc)
      : model_(model), options_(options), soc_(soc) {}
  Expected<LoweredModel> run();

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
  OpDef* op(const std::string& type, const std::string& suffix = "") {
    OpDef* o = graph_->add_op();
    o->set_name(uniqueOpName(suffix.empty() ? nodeName_ : nodeName_ + "_" + suffix));
    o->set_type(type);
    o->set_id(nextId_++);
    o->set_stream_id(0);
    o->set_has_out_attr(true);
    return o;
  }
  void input(OpDef* o, const Port& p, const std::string& layout = "") {
    o->add_input(p.src);
    if (p.src.empty()) return;
    fillDesc(o->add_input_desc(), p.dtype, p.shape, layoutFor(p.shape, layout));
  }
  Port output(OpDef* o, DType dtype, const Shape& shape, const std::string& valueName,
              const std::string& layout = "") {
    auto* d = o->add_output_desc();
    fillDesc(d, dtype, shape, layoutFor(shape, layout));
    d->set_name(valueName);
    if (d->size() > 0) memorySize_ += static_cast<uint64_t>(d->size());
    return Port{fmt::format("{}:{}", o->name(), o->output_desc_size() - 1), dtype, shape};
  }
  // Outputs for every output of the node, bound to the node's values.
  void outputs(OpDef* o, const std::string& layout = "") {
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      const Value* v = node->output(i);
      if (!v) {
        o->add_output_desc();
        continue;
      }
      bind(v, output(o, v->dtype(), v->shape(), v->name(), layout));
    }
  }
  void bind(const Value* v, const Port& p) { sources_[v] = p.src; }
  Port constant(const std::string& suffix, const Tensor& t) {
    return emitConst(uniqueOpName(nodeName_ + "_" + suffix), t);
  }
  Port constInts(const std::string& suffix, const std::vector<int64_t>& v) {
    return constant(suffix,
                    Tensor::fromValues<int64_t>(DType::Int64, {static_cast<int64_t>(v.size())}, v));
  }
  Port constScalar(const std::string& suffix, DType dtype, double value);

  const OmWriteOptions& options() const { return options_; }
  const std::string& nodeName() const { return nodeName_; }

 private:
  // Node names are reserved for their own nodes: helper ops and constants never take them.
  std::string uniqueOpName(const std::string& base) {
    std::string name = base.empty() ? "op" : base;
    auto free = [&](const std::string& n) {
      return !opNames_.count(n) && (!reserved_.count(n) || n == nodeName_);
    };
    if (!free(name))
      for (int i = 1;; ++i) {
        std::string candidate = fmt::format("{}_{}", name, i);
        if (free(candidate)) {
          name = candidate;
          break;
        }
      }
    opNames_.insert(name);
    return name;
  }
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
  uint64_t memorySize_ = 0;
};

Port Lowerer::constScalar(const std::string& suffix, DType dtype, double value) {
  // ONNX Cast semantics (floats round to nearest, integers truncate); int64/uint64 limits that a
  // double cannot hold are built exactly by the callers.
  auto cast = rt::castTensor(Tensor::fromValues<double>(DType::Float64, {}, {value}), dtype);
  if (!cast) return {};
  return constant(suffix, std::move(*cast));
}

std::string Lowerer::externalFileName(const std::string& opName) {
  std::string safe;
  for (char c : opName)
    safe +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  std::string name = "weight_" + safe;
  for (int i = 1; !externalNames_.insert(name).second; ++i)
    name = fmt::format("weight_{}_{}", safe, i);
  return "weight/" + name;
}

Port Lowerer::emitConst(const std::string& name, const Tensor& t) {
  OpDef* o = graph_->add_op();
  o->set_name(name);
  o->set_id(nextId_++);
  o->set_has_out_attr(true);
  Shape shape = Shape::fromStatic(t.dims());
  auto* value = (*o->mutable_attr())["value"].mutable_t();
  fillDesc(value->mutable_desc(), t.dtype(), shape, "ND");
  auto* desc = o->add_output_desc();
  fillDesc(desc, t.dtype(), shape, "ND");
  desc->set_name(name);
  if (options_.externalWeight) {
    // --external_weight: a FileConstant naming its file beside the .om (om.md §1.16).
    o->set_type("FileConstant");
    std::string file = externalFileName(name);
    auto& attrs = *o->mutable_attr();
    attrs.erase("value");
    attrs["location"] = attrS(file);
    attrs["offset"] = attrI(0);
    attrs["length"] = attrI(static_cast<int64_t>(t.byteSize()));
    attrs["shape"] = attrInts(t.dims());
    attrs["dtype"] =
        attrI(geProtoToCxxDType(toGeDType(t.dtype()).value_or(ge::proto::DT_UNDEFINED)));
    out_.externalFiles.emplace_back(file, std::vector<uint8_t>(t.data(), t.data() + t.byteSize()));
  } else {
    o->set_type("Const");
    while (out_.weights.size() % kWeightAlign)
      out_.weights.push_back(0);
    int64_t offset = static_cast<int64_t>(out_.weights.size());
    out_.weights.insert(out_.weights.end(), t.data(), t.data() + t.byteSize());
    for (TensorDescriptor* d : {value->mutable_desc(), desc}) {
      d->set_data_offset(offset);
      d->set_weight_size(static_cast<int64_t>(t.byteSize()));
    }
  }
  return Port{name + ":0", t.dtype(), shape};
}

// A lowering rule: `check` says why a node cannot lower ("" when it can); `lower` emits the ops.
struct Rule {
  std::function<std::string(const Node&, int64_t opset)> check;
  std::function<void(Lowerer&, const Node&)> lower;
};

// A raising rule: GraphEngine op → ONNX node(s).
class Raiser;
using RaiseFn = std::function<Status(Raiser&, const OpDef&)>;

std::map<std::string, Rule>& lowerRules() {
  static std::map<std::string, Rule> rules;
  return rules;
}
std::map<std::string, RaiseFn>& raiseRules() {
  static std::map<std::string, RaiseFn> rules;
  return rules;
}

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
             int outputCount = -1) {
    int n = outputCount < 0 ? op.output_desc_size() : outputCount;
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i)
      names.push_back(outputName(op, i));
    Node* node = graph_.appendNode(type, inputs, names);
    node->setName(op.name());
    for (int i = 0; i < n; ++i) {
      if (i < op.output_desc_size()) node->output(i)->setType(descType(op.output_desc(i)));
      sources_[fmt::format("{}:{}", op.name(), i)] = node->output(i);
    }
    return node;
  }
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
  Status unsupported(const OpDef& op, const std::string& why) const {
    return Status(ErrorCode::OmReadUnsupported,
                  fmt::format("{}: op '{}' (type {}): {}", displayName_, op.name(), op.type(), why),
                  "kiln reads the GraphEngine ops it writes; convert the model again with kiln");
  }
  static ValueType descType(const TensorDescriptor& d) {
    DType dtype = fromGeDType(d.dtype()).value_or(DType::Undefined);
    if (d.shape().dim_size() == 1 && d.shape().dim(0) == -2) return ValueType::tensor(dtype, {});
    std::vector<Dim> dims;
    for (int64_t x : plainDims(d))
      dims.push_back(x >= 0 ? Dim::known(x) : Dim());
    return ValueType::tensor(dtype, Shape(dims));
  }

  // The NCHW/OIHW dims of a tensor stored in a heavy format (its origin_shape), else its dims.
  static std::vector<int64_t> plainDims(const TensorDescriptor& d) {
    if (heavyLayout(d))
      if (auto it = d.attr().find("origin_shape"); it != d.attr().end())
        return {it->second.list().i().begin(), it->second.list().i().end()};
    return {d.shape().dim().begin(), d.shape().dim().end()};
  }
  static bool heavyLayout(const TensorDescriptor& d) {
    return d.layout() == "NC1HWC0" || d.layout() == "FRACTAL_Z";
  }

  Status raiseConst(const OpDef& op);
  Status raiseFileConstant(const OpDef& op);
  const std::string& displayName() const { return displayName_; }
  Graph& graph() { return graph_; }

 private:
  std::string outputName(const OpDef& op, int i) {
    std::string name;
    if (i < op.output_desc_size()) name = op.output_desc(i).name();
    if (name.empty())
      name = op.output_desc_size() == 1 ? op.name() : fmt::format("{}:{}", op.name(), i);
    return graph_.uniqueName(name);
  }
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
};

Expected<Tensor> Raiser::weightTensor(const OpDef& op, const TensorDescriptor& desc,
                                      const std::string& data) {
  auto dtype = fromGeDType(desc.dtype());
  if (!dtype) return unsupported(op, fmt::format("constant of type {}", geDTypeName(desc.dtype())));
  std::vector<int64_t> dims(desc.shape().dim().begin(), desc.shape().dim().end());
  auto count = checkedElementCount(dims);
  auto bytes = count ? dtypeStorageBytes(*dtype, *count) : std::nullopt;
  if (!bytes) return unsupported(op, "constant with a dynamic or overflowing shape");
  if (*dtype == DType::String) return unsupported(op, "string constants");
  if (!data.empty()) {
    if (data.size() != *bytes)
      return Status(ErrorCode::OmFileInvalid,
                    fmt::format("{}: constant '{}' holds {} bytes, its shape needs {}",
                                displayName_, op.name(), data.size(), *bytes),
                    "the file is damaged; convert the model again");
    return plainTensor(op, desc, *dtype, reinterpret_cast<const uint8_t*>(data.data()));
  }
  uint64_t offset = static_cast<uint64_t>(desc.data_offset());
  if (desc.data_offset() < 0 || offset > weightsSize_ || *bytes > weightsSize_ - offset)
    return Status(ErrorCode::OmFileInvalid,
                  fmt::format("{}: constant '{}' refers to WEIGHTS_DATA bytes {}..{}, the "
                              "partition has {}",
                              displayName_, op.name(), offset, offset + *bytes, weightsSize_),
                  "the file is damaged; convert the model again");
  return plainTensor(op, desc, *dtype, weights_ + offset);
}

Expected<Tensor> Raiser::plainTensor(const OpDef& op, const TensorDescriptor& desc, DType dtype,
                                     const uint8_t* stored) {
  std::vector<int64_t> dims(desc.shape().dim().begin(), desc.shape().dim().end());
  size_t storedBytes = static_cast<size_t>(*dtypeStorageBytes(dtype, *checkedElementCount(dims)));
  if (desc.layout() != "FRACTAL_Z")
    return Tensor(dtype, dims, Buffer::owned(std::vector<uint8_t>(stored, stored + storedBytes)));
  // Weights ATC-style in FRACTAL_Z: back to OIHW for the executor.
  std::vector<int64_t> oihw = plainDims(desc);
  int64_t c0 = cubeC0(dtype);
  size_t elementBytes = static_cast<size_t>(dtypeStorageBytes(dtype, 1).value_or(0));
  int64_t groups = fractalGroups(desc);
  if (oihw.size() != 4 || c0 == 0 || elementBytes == 0 || oihw[0] <= 0 || oihw[1] <= 0 ||
      oihw[0] % groups != 0 || heavyDims(HeavyLayout::FractalZ, oihw, c0, groups) != dims)
    return Status(ErrorCode::OmFileInvalid,
                  fmt::format("{}: FRACTAL_Z constant '{}' has shape [{}], which does not hold "
                              "its origin shape [{}]",
                              displayName_, op.name(), fmt::join(dims, ","), fmt::join(oihw, ",")),
                  "the file is damaged; convert the model again");
  return Tensor(
      dtype, oihw,
      Buffer::owned(fromHeavy(HeavyLayout::FractalZ, stored, oihw, elementBytes, c0, groups)));
}

Status Raiser::raiseConst(const OpDef& op) {
  const AttrDef* value = findAttr(op, "value");
  if (!value || value->value_case() != AttrDef::kT)
    return unsupported(op, "Const without a tensor 'value'");
  const TensorDescriptor& desc = op.output_desc_size() ? op.output_desc(0) : value->t().desc();
  TensorDescriptor merged = value->t().desc();
  if (merged.data_offset() == 0 && desc.data_offset() != 0)
    merged.set_data_offset(desc.data_offset());
  auto tensor = weightTensor(op, merged, value->t().data());
  if (!tensor) return tensor.status();
  std::string name = graph_.uniqueName(op.output_desc_size() && !op.output_desc(0).name().empty()
                                           ? op.output_desc(0).name()
                                           : op.name());
  sources_[op.name() + ":0"] = graph_.addInitializer(name, tensor.take());
  return Status::ok();
}

Status Raiser::raiseFileConstant(const OpDef& op) {
  std::string location = getS(op, "location", getS(op, "file_path", ""));
  if (location.empty()) return unsupported(op, "FileConstant without a location");
  std::filesystem::path path = std::filesystem::path(baseDir_) / location;
  auto file = MappedFile::open(path.string());
  if (!file) return file.status();
  uint64_t offset = static_cast<uint64_t>(getI(op, "offset", 0));
  uint64_t length = static_cast<uint64_t>(getI(op, "length", (*file)->size()));
  if (offset > (*file)->size() || length > (*file)->size() - offset)
    return Status(ErrorCode::OmFileInvalid,
                  fmt::format("{}: FileConstant '{}' wants bytes {}..{} of '{}', which has {}",
                              displayName_, op.name(), offset, offset + length, path.string(),
                              (*file)->size()),
                  "copy the weight folder beside the .om again");
  if (!op.output_desc_size()) return unsupported(op, "FileConstant without an output");
  TensorDescriptor desc = op.output_desc(0);
  std::string data(reinterpret_cast<const char*>((*file)->data() + offset), length);
  auto tensor = weightTensor(op, desc, data);
  if (!tensor) return tensor.status();
  std::string name = graph_.uniqueName(desc.name().empty() ? op.name() : desc.name());
  sources_[op.name() + ":0"] = graph_.addInitializer(name, tensor.take());
  return Status::ok();
}

Status Raiser::raise(const ge::proto::GraphDef& g) {
  // Inputs: Data ops in `index` order.
  std::vector<const OpDef*> datas;
  const OpDef* netOutput = nullptr;
  std::map<std::string, const OpDef*> byName;
  for (const OpDef& op : g.op()) {
    byName[op.name()] = &op;
    if (op.type() == "Data" || op.type() == "RefData") datas.push_back(&op);
    if (op.type() == "NetOutput") netOutput = &op;
  }
  std::stable_sort(datas.begin(), datas.end(), [](const OpDef* a, const OpDef* b) {
    return getI(*a, "index", 0) < getI(*b, "index", 0);
  });
  for (const OpDef* op : datas) {
    Value* v = graph_.addValue(graph_.uniqueName(op->name()));
    if (op->output_desc_size())
      v->setType(descType(op->output_desc(0)));
    else if (op->input_desc_size())
      v->setType(descType(op->input_desc(0)));
    graph_.addInput(v);
    sources_[op->name() + ":0"] = v;
  }
  // The rest in dependency order (GraphDef order need not be topological).
  std::set<std::string> done;
  for (const OpDef* op : datas)
    done.insert(op->name());
  std::vector<const OpDef*> pending;
  for (const OpDef& op : g.op())
    if (!done.count(op.name()) && &op != netOutput) pending.push_back(&op);
  auto ready = [&](const OpDef& op) {
    for (const std::string& input : op.input()) {
      if (input.empty()) continue;
      std::string src = input.substr(0, input.rfind(':'));
      if (byName.count(src) && !done.count(src)) return false;
    }
    return true;
  };
  while (!pending.empty()) {
    bool progress = false;
    std::vector<const OpDef*> next;
    for (const OpDef* op : pending) {
      if (!ready(*op)) {
        next.push_back(op);
        continue;
      }
      for (int i = 0; i < op->input_size(); ++i) {
        const std::string& input = op->input(i);
        if (input.empty() || isControlInput(input)) continue;
        if (!sources_.count(input))
          return Status(ErrorCode::OmFileInvalid,
                        fmt::format("{}: op '{}' reads '{}', which no op produces", displayName_,
                                    op->name(), input),
                        "the file is damaged; convert the model again");
      }
      Status s;
      if (op->type() == "Const" || op->type() == "Constant")
        s = raiseConst(*op);
      else if (op->type() == "FileConstant")
        s = raiseFileConstant(*op);
      else if (auto it = raiseRules().find(op->type()); it != raiseRules().end())
        s = it->second(*this, *op);
      else
        s = unsupported(*op, "kiln has no ONNX equivalent for this op type");
      if (!s) return s;
      done.insert(op->name());
      progress = true;
    }
    if (!progress)
      return Status(
          ErrorCode::OmFileInvalid,
          fmt::format("{}: ops form a cycle (e.g. '{}')", displayName_, next.front()->name()),
          "the file is damaged; convert the model again");
    pending = std::move(next);
  }
  if (!netOutput)
    return Status(ErrorCode::OmFileInvalid,
                  fmt::format("{}: graph '{}' has no NetOutput op", displayName_, g.name()),
                  "the file is damaged; convert the model again");
  for (int i = 0; i < netOutput->input_size(); ++i) {
    const std::string& input = netOutput->input(i);
    if (input.empty() || isControlInput(input)) continue;
    auto it = sources_.find(input);
    if (it == sources_.end())
      return Status(
          ErrorCode::OmFileInvalid,
          fmt::format("{}: NetOutput reads '{}', which no op produces", displayName_, input),
          "the file is damaged; convert the model again");
    graph_.addOutput(it->second);
  }
  // Constants consumed as attributes leave initializers nothing reads.
  std::vector<Value*> unused;
  for (Value* v : graph_.initializers())
    if (!v->hasUses() && !v->isGraphOutput()) unused.push_back(v);
  for (Value* v : unused)
    graph_.removeInitializer(v);
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Rule helpers.

void addRule(const std::string& onnx, Rule rule) { lowerRules()[onnx] = std::move(rule); }
void addRaise(const std::string& ge, RaiseFn fn) { raiseRules()[ge] = std::move(fn); }

std::string noCheck(const Node&, int64_t) { return ""; }

// An op that maps 1:1 with inputs unchanged and attributes renamed (ONNX name → GE name).
void simple(const std::string& onnx, const std::string& geType,
            std::vector<std::pair<std::string, std::string>> attrs = {}, int64_t minOpset = 7,
            std::function<std::string(const Node&, int64_t)> extra = noCheck) {
  addRule(onnx, {[onnx, attrs, minOpset, extra](const Node& n, int64_t opset) -> std::string {
                   if (opset < minOpset)
                     return fmt::format("{} of opset {} (kiln lowers opset {} and later)", onnx,
                                        opset, minOpset);
                   for (const auto& [name, value] : n.attributes()) {
                     bool known = std::any_of(attrs.begin(), attrs.end(),
                                              [&](const auto& p) { return p.first == name; });
                     if (!known) return fmt::format("attribute '{}' of {}", name, onnx);
                   }
                   return extra(n, opset);
                 },
                 [geType, attrs](Lowerer& l, const Node& n) {
                   OpDef* o = l.op(geType);
                   for (size_t i = 0; i < n.inputs().size(); ++i)
                     l.input(o, l.in(i));
                   for (const auto& [onnxName, geName] : attrs)
                     if (const Attribute* a = n.attribute(onnxName))
                       if (auto def = toAttrDef(*a)) (*o->mutable_attr())[geName] = *def;
                   l.outputs(o);
                 }});
  if (raiseRules().count(geType)) return; // several ONNX ops may share a GE type (first wins)
  addRaise(geType, [onnx, attrs](Raiser& r, const OpDef& op) -> Status {
    std::vector<Value*> inputs;
    int last = op.input_size();
    while (last > 0 && op.input(last - 1).empty())
      --last;
    for (int i = 0; i < last; ++i)
      inputs.push_back(r.in(op, i));
    Node* node = r.emit(op, onnx, inputs);
    for (const auto& [onnxName, geName] : attrs)
      if (const AttrDef* a = findAttr(op, geName))
        if (auto attr = fromAttrDef(*a)) node->setAttribute(onnxName, *attr);
    return Status::ok();
  });
}

// ONNX pads [b1, b2, ..., e1, e2, ...] → GE pads [b1, e1, b2, e2, ...].
std::vector<int64_t> interleavePads(const std::vector<int64_t>& pads) {
  size_t n = pads.size() / 2;
  std::vector<int64_t> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(pads[i]);
    out.push_back(pads[i + n]);
  }
  return out;
}
std::vector<int64_t> deinterleavePads(const std::vector<int64_t>& pads) {
  size_t n = pads.size() / 2;
  std::vector<int64_t> out(pads.size());
  for (size_t i = 0; i < n; ++i) {
    out[i] = pads[2 * i];
    out[i + n] = pads[2 * i + 1];
  }
  return out;
}

// Explicit ONNX-order pads for a conv/pool node, resolving auto_pad from the static input shape.
std::optional<std::vector<int64_t>> explicitPads(const Node& n, const std::vector<int64_t>& kernel,
                                                 const std::vector<int64_t>& strides,
                                                 const std::vector<int64_t>& dilations) {
  size_t s = kernel.size();
  std::string autoPad = nodeString(n, "auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    auto pads = nodeInts(n, "pads").value_or(std::vector<int64_t>(2 * s, 0));
    if (pads.size() != 2 * s) return std::nullopt;
    return pads;
  }
  if (autoPad == "VALID") return std::vector<int64_t>(2 * s, 0);
  const Value* x = n.input(0);
  if (!staticShape(x)) return std::nullopt;
  auto dims = x->shape().staticDims();
  std::vector<int64_t> pads(2 * s, 0);
  for (size_t i = 0; i < s; ++i) {
    int64_t in = dims[2 + i];
    int64_t out = (in + strides[i] - 1) / strides[i];
    int64_t total =
        std::max<int64_t>(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - in);
    int64_t small = total / 2;
    pads[i] = autoPad == "SAME_LOWER" ? total - small : small;
    pads[i + s] = total - pads[i];
  }
  return pads;
}

std::vector<int64_t> withBatchChannel(const std::vector<int64_t>& v) {
  std::vector<int64_t> out{1, 1};
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

std::string spatialFormat(size_t spatial) { return spatial == 3 ? "NCDHW" : "NCHW"; }

// Conv → Conv2D / Conv3D.
void convRules() {
  addRule(
      "Conv",
      {[](const Node& n, int64_t) -> std::string {
         int64_t r = rankOf(n.input(0));
         const Value* w = n.input(1);
         if (r != 4 && r != 5)
           return fmt::format("Conv with a rank-{} input (2-D and 3-D convolutions lower)", r);
         if (rankOf(w) != r) return "Conv whose weight rank differs from the input's";
         if (!w->shape().isStatic()) return "Conv with a dynamic weight shape";
         std::string autoPad = nodeString(n, "auto_pad", "NOTSET");
         if (autoPad != "NOTSET" && autoPad != "VALID" && !staticShape(n.input(0)))
           return "Conv auto_pad SAME_* with a dynamic input shape";
         return "";
       },
       [](Lowerer& l, const Node& n) {
         size_t s = static_cast<size_t>(rankOf(n.input(0)) - 2);
         auto wdims = n.input(1)->shape().staticDims();
         std::vector<int64_t> kernel(wdims.begin() + 2, wdims.end());
         auto strides = nodeInts(n, "strides").value_or(std::vector<int64_t>(s, 1));
         auto dilations = nodeInts(n, "dilations").value_or(std::vector<int64_t>(s, 1));
         auto pads =
             explicitPads(n, kernel, strides, dilations).value_or(std::vector<int64_t>(2 * s, 0));
         std::string format = spatialFormat(s);
         OpDef* o = l.op(s == 3 ? "Conv3D" : "Conv2D");
         l.input(o, l.in(0), format);
         l.input(o, l.in(1), format);
         if (hasInput(n, 2)) l.input(o, l.in(2));
         auto& a = *o->mutable_attr();
         a["strides"] = attrInts(withBatchChannel(strides));
         a["dilations"] = attrInts(withBatchChannel(dilations));
         a["pads"] = attrInts(interleavePads(pads));
         a["groups"] = attrI(nodeInt(n, "group", 1));
         a["data_format"] = attrS(format);
         a["offset_x"] = attrI(0);
         l.outputs(o, format);
       }});
  for (const char* type : {"Conv2D", "Conv3D"})
    addRaise(type, [](Raiser& r, const OpDef& op) -> Status {
      std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1)};
      if (Value* b = r.in(op, 2)) inputs.push_back(b);
      Node* node = r.emit(op, "Conv", inputs);
      auto strides = getInts(op, "strides"), dilations = getInts(op, "dilations");
      auto pads = getInts(op, "pads");
      if (strides.size() < 3 || dilations.size() != strides.size() ||
          pads.size() != 2 * (strides.size() - 2))
        return r.unsupported(op, "strides/dilations/pads do not match the data format");
      node->setAttribute("strides", Attribute::ofInts({strides.begin() + 2, strides.end()}));
      node->setAttribute("dilations", Attribute::ofInts({dilations.begin() + 2, dilations.end()}));
      node->setAttribute("pads", Attribute::ofInts(deinterleavePads(pads)));
      node->setAttribute("group", Attribute::ofInt(getI(op, "groups", 1)));
      return Status::ok();
    });
}

// MaxPool → MaxPoolV3, AveragePool → AvgPoolV2 (2-D).
void poolRules() {
  auto check = [](const Node& n, int64_t opset) -> std::string {
    if (rankOf(n.input(0)) != 4)
      return fmt::format("{} with a rank-{} input (2-D pooling lowers)", n.opType(),
                         rankOf(n.input(0)));
    if (n.outputs().size() > 1 && n.output(1) &&
        (n.output(1)->hasUses() || n.output(1)->isGraphOutput()))
      return "MaxPool's Indices output";
    if (auto d = nodeInts(n, "dilations"))
      for (int64_t x : *d)
        if (x != 1) return "pooling with dilations";
    if (nodeInt(n, "storage_order", 0) != 0) return "MaxPool storage_order 1";
    std::string autoPad = nodeString(n, "auto_pad", "NOTSET");
    if (autoPad != "NOTSET" && autoPad != "VALID" && !staticShape(n.input(0)))
      return "pooling auto_pad SAME_* with a dynamic input shape";
    if (autoPad != "NOTSET" && autoPad != "VALID" && nodeInt(n, "ceil_mode", 0))
      return "pooling auto_pad SAME_* with ceil_mode";
    return "";
  };
  auto lower = [](Lowerer& l, const Node& n) {
    auto kernel = nodeInts(n, "kernel_shape").value_or(std::vector<int64_t>{1, 1});
    auto strides = nodeInts(n, "strides").value_or(std::vector<int64_t>(2, 1));
    auto pads = explicitPads(n, kernel, strides, {1, 1}).value_or(std::vector<int64_t>(4, 0));
    bool max = n.opType() == "MaxPool";
    OpDef* o = l.op(max ? "MaxPoolV3" : "AvgPoolV2");
    l.input(o, l.in(0), "NCHW");
    auto& a = *o->mutable_attr();
    a["ksize"] = attrInts(withBatchChannel(kernel));
    a["strides"] = attrInts(withBatchChannel(strides));
    a["padding_mode"] = attrS("CALCULATED");
    a["pads"] = attrInts(interleavePads(pads));
    a["data_format"] = attrS("NCHW");
    a["global_pooling"] = attrB(false);
    a["ceil_mode"] = attrB(nodeInt(n, "ceil_mode", 0) != 0);
    if (!max) a["exclusive"] = attrB(nodeInt(n, "count_include_pad", 0) == 0);
    OpDef* first = o;
    const Value* y = n.output(0);
    l.bind(y, l.output(first, y->dtype(), y->shape(), y->name(), "NCHW"));
  };
  addRule("MaxPool", {check, lower});
  addRule("AveragePool", {check, lower});
  for (const char* type : {"MaxPoolV3", "AvgPoolV2"})
    addRaise(type, [](Raiser& r, const OpDef& op) -> Status {
      bool max = op.type() == "MaxPoolV3";
      if (getB(op, "global_pooling", false)) {
        r.emit(op, max ? "GlobalMaxPool" : "GlobalAveragePool", {r.in(op, 0)});
        return Status::ok();
      }
      auto ksize = getInts(op, "ksize"), strides = getInts(op, "strides"),
           pads = getInts(op, "pads");
      if (ksize.size() != 4 || strides.size() != 4 || pads.size() != 4)
        return r.unsupported(op, "ksize/strides/pads are not NCHW 4-element lists");
      if (getS(op, "data_format", "NCHW") != "NCHW")
        return r.unsupported(op, "data_format " + getS(op, "data_format", ""));
      std::string mode = getS(op, "padding_mode", "CALCULATED");
      Node* node = r.emit(op, max ? "MaxPool" : "AveragePool", {r.in(op, 0)}, 1);
      node->setAttribute("kernel_shape", Attribute::ofInts({ksize[2], ksize[3]}));
      node->setAttribute("strides", Attribute::ofInts({strides[2], strides[3]}));
      if (mode == "SAME")
        node->setAttribute("auto_pad", Attribute::ofString("SAME_UPPER"));
      else if (mode == "VALID")
        node->setAttribute("auto_pad", Attribute::ofString("VALID"));
      else
        node->setAttribute("pads", Attribute::ofInts(deinterleavePads(pads)));
      node->setAttribute("ceil_mode", Attribute::ofInt(getB(op, "ceil_mode", false)));
      if (!max)
        node->setAttribute("count_include_pad", Attribute::ofInt(!getB(op, "exclusive", true)));
      return Status::ok();
    });
}

bool isFloatType(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16 || t == DType::Float64;
}

// MatMul → MatMulV2 (2-D) / BatchMatMulV2; Gemm → MatMulV2 (+ Muls, Add).
void matmulRules() {
  addRule("MatMul", {[](const Node& n, int64_t) -> std::string {
                       int64_t a = rankOf(n.input(0)), b = rankOf(n.input(1));
                       if (a < 2 || b < 2)
                         return fmt::format("MatMul with a rank-{} operand (ranks 2 and up lower)",
                                            std::min(a, b));
                       return "";
                     },
                     [](Lowerer& l, const Node& n) {
                       bool two = rankOf(n.input(0)) == 2 && rankOf(n.input(1)) == 2;
                       OpDef* o = l.op(two ? "MatMulV2" : "BatchMatMulV2");
                       l.input(o, l.in(0));
                       l.input(o, l.in(1));
                       auto& a = *o->mutable_attr();
                       if (two) {
                         a["transpose_x1"] = attrB(false);
                         a["transpose_x2"] = attrB(false);
                         a["offset_x"] = attrI(0);
                       } else {
                         a["adj_x1"] = attrB(false);
                         a["adj_x2"] = attrB(false);
                       }
                       l.outputs(o);
                     }});
  addRule("Gemm", {[](const Node& n, int64_t opset) -> std::string {
                     if (rankOf(n.input(0)) != 2 || rankOf(n.input(1)) != 2)
                       return "Gemm with operands that are not 2-D";
                     if (!isFloatType(n.input(0)->dtype())) return "Gemm on integer data";
                     if (opset < 7) return "Gemm of opset 6 or earlier";
                     return "";
                   },
                   [](Lowerer& l, const Node& n) {
                     float alpha = nodeFloat(n, "alpha", 1.0f), beta = nodeFloat(n, "beta", 1.0f);
                     const Value* y = n.output(0);
                     const Value* c = n.input(2);
                     // A constant 1-D C (scaled by beta offline) is MatMulV2's bias when alpha
                     // is 1.
                     bool biasInput = false;
                     Port bias;
                     if (c && alpha == 1.0f && c->isInitializer() && rankOf(c) == 1 &&
                         c->dtype() == DType::Float32 && staticShape(y) &&
                         c->shape().staticDims()[0] == y->shape().staticDims()[1]) {
                       biasInput = true;
                       if (beta == 1.0f) {
                         bias = l.in(2);
                       } else {
                         auto v = c->initializer().copyValues<float>();
                         for (float& x : v)
                           x *= beta;
                         bias = l.constant("bias", Tensor::fromValues<float>(
                                                       DType::Float32, c->initializer().dims(), v));
                       }
                     }
                     OpDef* mm = l.op("MatMulV2", biasInput || !c ? "" : "matmul");
                     l.input(mm, l.in(0));
                     l.input(mm, l.in(1));
                     if (biasInput) l.input(mm, bias);
                     auto& a = *mm->mutable_attr();
                     a["transpose_x1"] = attrB(nodeInt(n, "transA", 0) != 0);
                     a["transpose_x2"] = attrB(nodeInt(n, "transB", 0) != 0);
                     a["offset_x"] = attrI(0);
                     bool last = (biasInput || !c) && alpha == 1.0f;
                     Port p = l.output(mm, y->dtype(), y->shape(), last ? y->name() : "");
                     if (alpha != 1.0f) {
                       bool lastMul = biasInput || !c;
                       OpDef* mul = l.op("Muls", lastMul ? "" : "alpha");
                       l.input(mul, p);
                       (*mul->mutable_attr())["value"] = attrF(alpha);
                       p = l.output(mul, y->dtype(), y->shape(), lastMul ? y->name() : "");
                     }
                     if (c && !biasInput) {
                       Port cp = l.in(2);
                       if (beta != 1.0f) {
                         OpDef* mul = l.op("Muls", "beta");
                         l.input(mul, cp);
                         (*mul->mutable_attr())["value"] = attrF(beta);
                         cp = l.output(mul, c->dtype(), c->shape(), "");
                       }
                       OpDef* add = l.op("Add");
                       l.input(add, p);
                       l.input(add, cp);
                       p = l.output(add, y->dtype(), y->shape(), y->name());
                     }
                     l.bind(y, p);
                   }});
  addRaise("MatMulV2", [](Raiser& r, const OpDef& op) -> Status {
    bool ta = getB(op, "transpose_x1", false), tb = getB(op, "transpose_x2", false);
    Value* bias = r.in(op, 2);
    if (!ta && !tb && !bias) {
      r.emit(op, "MatMul", {r.in(op, 0), r.in(op, 1)}, 1);
      return Status::ok();
    }
    std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1)};
    if (bias) inputs.push_back(bias);
    Node* node = r.emit(op, "Gemm", inputs, 1);
    node->setAttribute("transA", Attribute::ofInt(ta));
    node->setAttribute("transB", Attribute::ofInt(tb));
    return Status::ok();
  });
  for (const char* type : {"BatchMatMulV2", "BatchMatMul"})
    addRaise(type, [](Raiser& r, const OpDef& op) -> Status {
      std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1)};
      const char* flags[2][2] = {{"adj_x1", "adj_x2"}, {"transpose_x1", "transpose_x2"}};
      for (int i = 0; i < 2; ++i) {
        bool t = getB(op, flags[0][i], false) || getB(op, flags[1][i], false);
        if (!t) continue;
        Value* x = inputs[i];
        int64_t rank = rankOf(x);
        if (rank < 2) return r.unsupported(op, "adjoint of an operand of unknown rank");
        std::vector<int64_t> perm(static_cast<size_t>(rank));
        std::iota(perm.begin(), perm.end(), 0);
        std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
        Value* tr = r.helper(op.name() + "_adj", "Transpose", {x});
        tr->producer()->setAttribute("perm", Attribute::ofInts(perm));
        inputs[i] = tr;
      }
      if (Value* bias = r.in(op, 2)) {
        Node* mm = r.emit(op, "MatMul", inputs, 1);
        Value* sum = r.helper(op.name() + "_bias", "Add", {mm->output(0), bias});
        r.rebind(op, 0, sum);
      } else {
        r.emit(op, "MatMul", inputs, 1);
      }
      return Status::ok();
    });
  addRaise("Muls", [](Raiser& r, const OpDef& op) -> Status {
    Value* x = r.in(op, 0);
    float value = getF(op, "value", 1.0f);
    Tensor scalar;
    if (x->dtype() == DType::Float32)
      scalar = Tensor::fromValues<float>(DType::Float32, {}, {value});
    else if (x->dtype() == DType::Float64)
      scalar = Tensor::fromValues<double>(DType::Float64, {}, {double(value)});
    else
      return r.unsupported(op, fmt::format("Muls on {}", dtypeName(x->dtype())));
    r.emit(op, "Mul", {x, r.constTensor(op.name() + "_value", scalar)}, 1);
    return Status::ok();
  });
}

// Softmax / LogSoftmax → SoftmaxV2 / LogSoftmaxV2 over one axis.
void softmaxRules() {
  for (const std::string onnx : {"Softmax", "LogSoftmax"}) {
    std::string geType = onnx == "Softmax" ? "SoftmaxV2" : "LogSoftmaxV2";
    addRule(onnx, {[](const Node& n, int64_t opset) -> std::string {
                     int64_t r = rankOf(n.input(0));
                     if (r < 0) return n.opType() + " with an input of unknown rank";
                     int64_t axis = nodeInt(n, "axis", opset >= 13 ? -1 : 1);
                     if (axis < 0) axis += r;
                     // Before opset 13 the input is coerced to 2-D at `axis`: one axis only when
                     // it is the last.
                     if (opset < 13 && axis != r - 1 && r > 0) {
                       if (!staticShape(n.input(0)))
                         return n.opType() + " (opset < 13) over several axes of a dynamic shape";
                     }
                     return "";
                   },
                   [geType](Lowerer& l, const Node& n) {
                     int64_t r = rankOf(n.input(0));
                     int64_t axis = nodeInt(n, "axis", l.opset >= 13 ? -1 : 1);
                     if (axis < 0) axis += r;
                     const Value* y = n.output(0);
                     if (l.opset >= 13 || axis == r - 1 || r == 0) {
                       OpDef* o = l.op(geType);
                       l.input(o, l.in(0));
                       (*o->mutable_attr())["axes"] = attrInts({axis});
                       l.outputs(o);
                       return;
                     }
                     auto dims = n.input(0)->shape().staticDims();
                     int64_t outer = 1, inner = 1;
                     for (int64_t i = 0; i < r; ++i)
                       (i < axis ? outer : inner) *= dims[static_cast<size_t>(i)];
                     Shape flat = Shape::fromStatic({outer, inner});
                     OpDef* r1 = l.op("Reshape", "flatten");
                     l.input(r1, l.in(0));
                     l.input(r1, l.constInts("flat_shape", {outer, inner}));
                     Port p = l.output(r1, y->dtype(), flat, "");
                     OpDef* o = l.op(geType, "2d");
                     l.input(o, p);
                     (*o->mutable_attr())["axes"] = attrInts({1});
                     p = l.output(o, y->dtype(), flat, "");
                     OpDef* r2 = l.op("Reshape");
                     l.input(r2, p);
                     l.input(r2, l.constInts("shape", dims));
                     l.bind(y, l.output(r2, y->dtype(), y->shape(), y->name()));
                   }});
    addRaise(geType, [onnx](Raiser& r, const OpDef& op) -> Status {
      auto axes = getInts(op, "axes");
      if (axes.size() > 1) return r.unsupported(op, "softmax over several axes");
      Node* node = r.emit(op, onnx, {r.in(op, 0)}, 1);
      node->setAttribute("axis", Attribute::ofInt(axes.empty() ? -1 : axes[0]));
      return Status::ok();
    });
  }
}

// Shape-moving ops: Reshape, Transpose, Concat, Split, Squeeze, Unsqueeze, Flatten, Gather, Slice.
void shapeRules() {
  addRule("Reshape", {[](const Node& n, int64_t) -> std::string {
                        if (staticShape(n.output(0))) return "";
                        if (nodeInt(n, "allowzero", 0))
                          return "Reshape allowzero with a dynamic result";
                        auto shape = constInts(n, 1);
                        if (!shape) return "Reshape to a computed shape whose result is dynamic";
                        for (int64_t d : *shape)
                          if (d == 0) return "Reshape copying dims (0) with a dynamic result";
                        return "";
                      },
                      [](Lowerer& l, const Node& n) {
                        OpDef* o = l.op("Reshape");
                        l.input(o, l.in(0));
                        // ATC settles the target shape: the static result, not the ONNX spec.
                        // With allowzero a 0 is a literal zero dim, as GraphEngine reads it.
                        auto given = constInts(n, 1);
                        bool literalZero = nodeInt(n, "allowzero", 0) && given &&
                                           std::count(given->begin(), given->end(), 0) > 0;
                        if (staticShape(n.output(0)) && !literalZero)
                          l.input(o, l.constInts("shape", n.output(0)->shape().staticDims()));
                        else
                          l.input(o, l.in(1));
                        (*o->mutable_attr())["axis"] = attrI(0);
                        (*o->mutable_attr())["num_axes"] = attrI(-1);
                        l.outputs(o);
                      }});
  addRaise("Reshape", [](Raiser& r, const OpDef& op) -> Status {
    // GraphEngine's Reshape takes 0 as a zero-size dim: ONNX's allowzero.
    r.emit(op, "Reshape", {r.in(op, 0), r.in(op, 1)}, 1)
        ->setAttribute("allowzero", Attribute::ofInt(1));
    return Status::ok();
  });
  addRule("Transpose", {noCheck, [](Lowerer& l, const Node& n) {
                          int64_t rank = rankOf(n.input(0));
                          std::vector<int64_t> perm;
                          if (auto p = nodeInts(n, "perm"))
                            perm = *p;
                          else
                            for (int64_t i = rank - 1; i >= 0; --i)
                              perm.push_back(i);
                          OpDef* o = l.op("Transpose");
                          l.input(o, l.in(0));
                          l.input(o, l.constInts("perm", perm));
                          l.outputs(o);
                        }});
  lowerRules()["Transpose"].check = [](const Node& n, int64_t) -> std::string {
    if (!nodeInts(n, "perm") && rankOf(n.input(0)) < 0) return "Transpose of unknown rank";
    return "";
  };
  addRaise("Transpose", [](Raiser& r, const OpDef& op) -> Status {
    auto perm = r.constIntsIn(op, 1);
    if (!perm) return r.unsupported(op, "perm is not a constant");
    r.emit(op, "Transpose", {r.in(op, 0)}, 1)->setAttribute("perm", Attribute::ofInts(*perm));
    return Status::ok();
  });
  addRaise("TransposeD", [](Raiser& r, const OpDef& op) -> Status {
    r.emit(op, "Transpose", {r.in(op, 0)}, 1)
        ->setAttribute("perm", Attribute::ofInts(getInts(op, "perm")));
    return Status::ok();
  });
  addRule("Concat", {noCheck, [](Lowerer& l, const Node& n) {
                       OpDef* o = l.op("ConcatD");
                       for (size_t i = 0; i < n.inputs().size(); ++i)
                         l.input(o, l.in(i));
                       (*o->mutable_attr())["concat_dim"] = attrI(nodeInt(n, "axis", 0));
                       (*o->mutable_attr())["N"] = attrI(static_cast<int64_t>(n.inputs().size()));
                       l.outputs(o);
                     }});
  addRaise("ConcatD", [](Raiser& r, const OpDef& op) -> Status {
    std::vector<Value*> inputs;
    for (int i = 0; i < op.input_size(); ++i)
      inputs.push_back(r.in(op, i));
    r.emit(op, "Concat", inputs, 1)
        ->setAttribute("axis", Attribute::ofInt(getI(op, "concat_dim", 0)));
    return Status::ok();
  });
  addRule("Split", {[](const Node& n, int64_t) -> std::string {
                      int64_t r = rankOf(n.input(0));
                      if (r < 0) return "Split of unknown rank";
                      int64_t axis = nodeInt(n, "axis", 0);
                      if (axis < 0) axis += r;
                      for (const Value* o : n.outputs())
                        if (!o || !o->shape().hasRank() || !o->shape()[size_t(axis)].isStatic())
                          return "Split whose part sizes are not static";
                      return "";
                    },
                    [](Lowerer& l, const Node& n) {
                      int64_t r = rankOf(n.input(0));
                      int64_t axis = nodeInt(n, "axis", 0);
                      if (axis < 0) axis += r;
                      std::vector<int64_t> sizes;
                      for (const Value* o : n.outputs())
                        sizes.push_back(o->shape()[size_t(axis)].value());
                      OpDef* o = l.op("SplitVD");
                      l.input(o, l.in(0));
                      auto& a = *o->mutable_attr();
                      a["size_splits"] = attrInts(sizes);
                      a["split_dim"] = attrI(axis);
                      a["num_split"] = attrI(static_cast<int64_t>(sizes.size()));
                      l.outputs(o);
                    }});
  addRaise("SplitVD", [](Raiser& r, const OpDef& op) -> Status {
    Node* node = r.emit(
        op, "Split", {r.in(op, 0), r.constInts(op.name() + "_split", getInts(op, "size_splits"))});
    node->setAttribute("axis", Attribute::ofInt(getI(op, "split_dim", 0)));
    return Status::ok();
  });
  // Squeeze / Unsqueeze: axes (attribute before opset 13, input after) become the attribute.
  addRule("Squeeze", {[](const Node& n, int64_t) -> std::string {
                        if (hasInput(n, 1) && !constInts(n, 1))
                          return "Squeeze axes computed at run time";
                        if (!hasInput(n, 1) && !nodeInts(n, "axes") && !staticShape(n.input(0)))
                          return "Squeeze without axes of a dynamic shape";
                        return "";
                      },
                      [](Lowerer& l, const Node& n) {
                        std::vector<int64_t> axes;
                        if (hasInput(n, 1))
                          axes = *constInts(n, 1);
                        else if (auto a = nodeInts(n, "axes"))
                          axes = *a;
                        else {
                          auto dims = n.input(0)->shape().staticDims();
                          for (size_t i = 0; i < dims.size(); ++i)
                            if (dims[i] == 1) axes.push_back(static_cast<int64_t>(i));
                        }
                        OpDef* o = l.op("Squeeze");
                        l.input(o, l.in(0));
                        (*o->mutable_attr())["axis"] = attrInts(axes);
                        l.outputs(o);
                      }});
  addRaise("Squeeze", [](Raiser& r, const OpDef& op) -> Status {
    r.emit(op, "Squeeze", {r.in(op, 0), r.constInts(op.name() + "_axes", getInts(op, "axis"))}, 1);
    return Status::ok();
  });
  addRule("Unsqueeze", {[](const Node& n, int64_t) -> std::string {
                          if (hasInput(n, 1) && !constInts(n, 1))
                            return "Unsqueeze axes computed at run time";
                          return "";
                        },
                        [](Lowerer& l, const Node& n) {
                          std::vector<int64_t> axes =
                              hasInput(n, 1) ? *constInts(n, 1)
                                             : nodeInts(n, "axes").value_or(std::vector<int64_t>{});
                          OpDef* o = l.op("Unsqueeze");
                          l.input(o, l.in(0));
                          (*o->mutable_attr())["axes"] = attrInts(axes);
                          l.outputs(o);
                        }});
  addRaise("Unsqueeze", [](Raiser& r, const OpDef& op) -> Status {
    r.emit(op, "Unsqueeze", {r.in(op, 0), r.constInts(op.name() + "_axes", getInts(op, "axes"))},
           1);
    return Status::ok();
  });
  simple("Flatten", "Flatten", {{"axis", "axis"}}, 1);
  // Gather → GatherV2 with the axis as a constant input.
  addRule("Gather", {noCheck, [](Lowerer& l, const Node& n) {
                       OpDef* o = l.op("GatherV2");
                       l.input(o, l.in(0));
                       l.input(o, l.in(1));
                       l.input(o, l.constInts("axis", {nodeInt(n, "axis", 0)}));
                       (*o->mutable_attr())["batch_dims"] = attrI(0);
                       l.outputs(o);
                     }});
  addRaise("GatherV2", [](Raiser& r, const OpDef& op) -> Status {
    auto axis = r.constIntsIn(op, 2);
    if (!axis || axis->size() != 1) return r.unsupported(op, "axis is not a constant scalar");
    r.emit(op, "Gather", {r.in(op, 0), r.in(op, 1)}, 1)
        ->setAttribute("axis", Attribute::ofInt((*axis)[0]));
    return Status::ok();
  });
  // Slice → StridedSliceV2 (begin, end, axes, strides inputs).
  addRule("Slice", {[](const Node& n, int64_t opset) -> std::string {
                      if (opset < 10 && !nodeInts(n, "starts")) return "Slice without starts";
                      return "";
                    },
                    [](Lowerer& l, const Node& n) {
                      OpDef* o = l.op("StridedSliceV2");
                      l.input(o, l.in(0));
                      if (l.opset < 10) {
                        l.input(o, l.constInts("begin", *nodeInts(n, "starts")));
                        l.input(o, l.constInts("end", *nodeInts(n, "ends")));
                        if (auto axes = nodeInts(n, "axes"))
                          l.input(o, l.constInts("axes", *axes));
                        else
                          l.input(o, Port{});
                        l.input(o, Port{});
                      } else {
                        for (size_t i = 1; i < 5; ++i)
                          l.input(o, l.in(i));
                      }
                      l.outputs(o);
                    }});
  addRaise("StridedSliceV2", [](Raiser& r, const OpDef& op) -> Status {
    std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1), r.in(op, 2), r.in(op, 3), r.in(op, 4)};
    while (!inputs.empty() && !inputs.back())
      inputs.pop_back();
    r.emit(op, "Slice", inputs, 1);
    return Status::ok();
  });
  // Pad → PadV3 (paddings in ONNX's begin-then-end order: paddings_contiguous false).
  addRule("Pad", {[](const Node& n, int64_t opset) -> std::string {
                    if (hasInput(n, 3)) return "Pad with axes";
                    std::string mode = nodeString(n, "mode", "constant");
                    if (mode != "constant" && mode != "reflect" && mode != "edge")
                      return "Pad mode " + mode;
                    return "";
                  },
                  [](Lowerer& l, const Node& n) {
                    OpDef* o = l.op("PadV3");
                    l.input(o, l.in(0));
                    if (l.opset < 11) {
                      l.input(o, l.constInts("paddings",
                                             nodeInts(n, "pads").value_or(std::vector<int64_t>{})));
                      float value = nodeFloat(n, "value", 0.0f);
                      l.input(o, l.constScalar("constant_values", n.input(0)->dtype(), value));
                    } else {
                      l.input(o, l.in(1));
                      l.input(o, l.in(2));
                    }
                    (*o->mutable_attr())["mode"] = attrS(nodeString(n, "mode", "constant"));
                    (*o->mutable_attr())["paddings_contiguous"] = attrB(false);
                    l.outputs(o);
                  }});
  lowerRules()["Pad"].check = [](const Node& n, int64_t opset) -> std::string {
    if (hasInput(n, 3)) return "Pad with axes";
    std::string mode = nodeString(n, "mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge") return "Pad mode " + mode;
    if (opset < 11 && n.input(0)->dtype() != DType::Float32 &&
        n.input(0)->dtype() != DType::Float64 && n.input(0)->dtype() != DType::Int64 &&
        n.input(0)->dtype() != DType::Int32)
      return "opset < 11 Pad on this data type";
    return "";
  };
  addRaise("PadV3", [](Raiser& r, const OpDef& op) -> Status {
    if (getB(op, "paddings_contiguous", true))
      return r.unsupported(op, "paddings in [begin, end] pairs");
    std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1)};
    if (Value* c = r.in(op, 2)) inputs.push_back(c);
    r.emit(op, "Pad", inputs, 1)
        ->setAttribute("mode", Attribute::ofString(getS(op, "mode", "constant")));
    return Status::ok();
  });
}

// ReduceSum/Mean/Max/Min/Prod → the GE op with an axes input and keep_dims.
void reduceRules() {
  // Reductions without a GraphEngine op of their own: an element-wise op before and/or after.
  struct Composite {
    const char* onnx;
    const char* reduce;
    const char* pre;
    const char* post;
  };
  static const Composite kComposite[] = {
      {"ReduceSum", "ReduceSum", "", ""},       {"ReduceMean", "ReduceMean", "", ""},
      {"ReduceMax", "ReduceMax", "", ""},       {"ReduceMin", "ReduceMin", "", ""},
      {"ReduceProd", "ReduceProd", "", ""},     {"ReduceSumSquare", "ReduceSum", "Square", ""},
      {"ReduceL1", "ReduceSum", "Abs", ""},     {"ReduceL2", "ReduceSum", "Square", "Sqrt"},
      {"ReduceLogSum", "ReduceSum", "", "Log"}, {"ReduceLogSumExp", "ReduceSum", "Exp", "Log"},
  };
  for (const Composite& c : kComposite) {
    const std::string onnx = c.onnx, reduce = c.reduce, pre = c.pre, post = c.post;
    addRule(
        onnx,
        {[](const Node& n, int64_t) -> std::string {
           if (hasInput(n, 1) && !constInts(n, 1)) return n.opType() + " axes computed at run time";
           bool axesGiven = (hasInput(n, 1) && !constInts(n, 1)->empty()) || nodeInts(n, "axes");
           if (!axesGiven && !nodeInt(n, "noop_with_empty_axes", 0) && rankOf(n.input(0)) < 0)
             return n.opType() + " over all axes of unknown rank";
           if (!axesGiven && nodeInt(n, "noop_with_empty_axes", 0) && n.opType() != "ReduceSum" &&
               n.opType() != "ReduceMean" && n.opType() != "ReduceMax" &&
               n.opType() != "ReduceMin" && n.opType() != "ReduceProd")
             return n.opType() + " with noop_with_empty_axes";
           return "";
         },
         [reduce, pre, post](Lowerer& l, const Node& n) {
           std::vector<int64_t> axes;
           if (hasInput(n, 1))
             axes = *constInts(n, 1);
           else if (auto a = nodeInts(n, "axes"))
             axes = *a;
           if (axes.empty() && nodeInt(n, "noop_with_empty_axes", 0)) {
             OpDef* o = l.op("Identity");
             l.input(o, l.in(0));
             l.outputs(o);
             return;
           }
           if (axes.empty())
             for (int64_t i = 0; i < rankOf(n.input(0)); ++i)
               axes.push_back(i);
           Port x = l.in(0);
           if (!pre.empty()) {
             OpDef* p = l.op(pre, "pre");
             l.input(p, x);
             x = l.output(p, x.dtype, x.shape, "");
           }
           OpDef* o = l.op(reduce, post.empty() ? "" : "reduce");
           l.input(o, x);
           l.input(o, l.constInts("axes", axes));
           (*o->mutable_attr())["keep_dims"] = attrB(nodeInt(n, "keepdims", 1) != 0);
           if (post.empty()) {
             l.outputs(o);
             return;
           }
           const Value* y = n.output(0);
           Port r = l.output(o, y->dtype(), y->shape(), "");
           OpDef* q = l.op(post);
           l.input(q, r);
           l.outputs(q);
         }});
    if (onnx != reduce) continue;
    addRaise(onnx, [onnx](Raiser& r, const OpDef& op) -> Status {
      Value* axes = r.in(op, 1);
      if (!axes) axes = r.constInts(op.name() + "_axes", getInts(op, "axes"));
      Node* node = r.emit(op, onnx, {r.in(op, 0), axes}, 1);
      node->setAttribute("keepdims", Attribute::ofInt(getB(op, "keep_dims", false)));
      return Status::ok();
    });
  }
  for (const std::string onnx : {"ArgMax", "ArgMin"}) {
    std::string geType = onnx == "ArgMax" ? "ArgMaxV2" : "ArgMin";
    addRule(onnx, {[](const Node& n, int64_t) -> std::string {
                     if (nodeInt(n, "select_last_index", 0))
                       return n.opType() + " select_last_index";
                     return "";
                   },
                   [geType](Lowerer& l, const Node& n) {
                     int64_t axis = nodeInt(n, "axis", 0);
                     bool keep = nodeInt(n, "keepdims", 1) != 0;
                     const Value* y = n.output(0);
                     OpDef* o = l.op(geType, keep ? "reduce" : "");
                     l.input(o, l.in(0));
                     l.input(o, l.constInts("dimension", {axis}));
                     (*o->mutable_attr())["dtype"] = attrI(geProtoToCxxDType(ge::proto::DT_INT64));
                     if (!keep) {
                       l.outputs(o);
                       return;
                     }
                     // GraphEngine's ArgMax drops the axis: keepdims is an Unsqueeze after it.
                     std::vector<Dim> reduced;
                     if (y->shape().hasRank())
                       for (size_t i = 0; i < y->shape().rank(); ++i)
                         if (static_cast<int64_t>(i) !=
                             (axis < 0 ? axis + int64_t(y->shape().rank()) : axis))
                           reduced.push_back(y->shape()[i]);
                     Port p = l.output(o, DType::Int64,
                                       y->shape().hasRank() ? Shape(reduced) : Shape(), "");
                     OpDef* u = l.op("Unsqueeze");
                     l.input(u, p);
                     int64_t rank = rankOf(n.input(0));
                     (*u->mutable_attr())["axes"] = attrInts({axis < 0 ? axis + rank : axis});
                     l.bind(y, l.output(u, y->dtype(), y->shape(), y->name()));
                   }});
    lowerRules()[onnx].check = [](const Node& n, int64_t) -> std::string {
      if (nodeInt(n, "select_last_index", 0)) return n.opType() + " select_last_index";
      if (nodeInt(n, "axis", 0) < 0 && rankOf(n.input(0)) < 0)
        return n.opType() + " of unknown rank";
      return "";
    };
    addRaise(geType, [onnx](Raiser& r, const OpDef& op) -> Status {
      auto axis = r.constIntsIn(op, 1);
      if (!axis || axis->size() != 1) return r.unsupported(op, "dimension is not a constant");
      Node* node = r.emit(op, onnx, {r.in(op, 0)}, 1);
      node->setAttribute("axis", Attribute::ofInt((*axis)[0]));
      node->setAttribute("keepdims", Attribute::ofInt(0));
      return Status::ok();
    });
  }
}

// Cast, Clip, TopK, Constant, Dropout, normalizations and the element-wise ops.
void miscRules() {
  addRule("Cast", {[](const Node& n, int64_t opset) -> std::string {
                     if (opset < 6) return "Cast of opset 5 or earlier";
                     auto to = dtypeFromOnnx(static_cast<int32_t>(nodeInt(n, "to", 0)));
                     if (!to || !toGeDType(*to)) return "Cast to this type";
                     return "";
                   },
                   [](Lowerer& l, const Node& n) {
                     OpDef* o = l.op("Cast");
                     l.input(o, l.in(0));
                     auto to = *dtypeFromOnnx(static_cast<int32_t>(nodeInt(n, "to", 0)));
                     (*o->mutable_attr())["dst_type"] = attrI(geProtoToCxxDType(*toGeDType(to)));
                     l.outputs(o);
                   }});
  addRaise("Cast", [](Raiser& r, const OpDef& op) -> Status {
    int proto = geCxxToProtoDType(static_cast<int>(getI(op, "dst_type", -1)));
    auto to = fromGeDType(proto);
    if (!to) return r.unsupported(op, "dst_type");
    r.emit(op, "Cast", {r.in(op, 0)}, 1)->setAttribute("to", Attribute::ofInt(dtypeToOnnx(*to)));
    return Status::ok();
  });
  addRule("Clip",
          {[](const Node& n, int64_t) -> std::string {
             DType t = n.input(0)->dtype();
             if (t == DType::BFloat16 || t == DType::Bool || (!isFloatingPoint(t) && !isInteger(t)))
               return std::string("Clip on ") + dtypeName(t);
             return "";
           },
           [](Lowerer& l, const Node& n) {
             DType t = n.input(0)->dtype();
             auto limit = [&](bool low) -> double {
               switch (t) {
               case DType::Int32:
                 return low ? std::numeric_limits<int32_t>::min()
                            : std::numeric_limits<int32_t>::max();
               case DType::Int8:
                 return low ? -128 : 127;
               case DType::UInt8:
                 return low ? 0 : 255;
               case DType::Int16:
                 return low ? -32768 : 32767;
               case DType::UInt16:
                 return low ? 0 : 65535;
               case DType::UInt32:
                 return low ? 0 : 4294967295.0;
               case DType::UInt64:
                 return 0; // the maximum is set exactly below
               default:
                 return low ? -std::numeric_limits<double>::infinity()
                            : std::numeric_limits<double>::infinity();
               }
             };
             auto bound = [&](size_t input, const char* attr, bool low, const char* name) -> Port {
               // Bounds are inputs from opset 11 on; kiln's passes may also leave them as the
               // older attributes (convert-fp16 keeps fp32 bounds that way), so take either.
               if (l.opset >= 11 && hasInput(n, input)) return l.in(input);
               if (n.attribute(attr)) return l.constScalar(name, t, nodeFloat(n, attr, 0));
               if (t == DType::Float16) {
                 uint16_t bits = low ? 0xFC00 : 0x7C00; // ∓inf
                 return l.constant(name, Tensor::fromValues<uint16_t>(DType::Float16, {}, {bits}));
               }
               if (t == DType::Int64) {
                 int64_t v = low ? std::numeric_limits<int64_t>::min()
                                 : std::numeric_limits<int64_t>::max();
                 return l.constant(name, Tensor::fromValues<int64_t>(t, {}, {v}));
               }
               if (t == DType::UInt64 && !low)
                 return l.constant(name, Tensor::fromValues<uint64_t>(
                                             t, {}, {std::numeric_limits<uint64_t>::max()}));
               return l.constScalar(name, t, limit(low));
             };
             OpDef* o = l.op("ClipByValue");
             l.input(o, l.in(0));
             l.input(o, bound(1, "min", true, "clip_value_min"));
             l.input(o, bound(2, "max", false, "clip_value_max"));
             l.outputs(o);
           }});
  addRaise("ClipByValue", [](Raiser& r, const OpDef& op) -> Status {
    r.emit(op, "Clip", {r.in(op, 0), r.in(op, 1), r.in(op, 2)}, 1);
    return Status::ok();
  });
  addRule("TopK", {[](const Node& n, int64_t opset) -> std::string {
                     if (opset < 10 && !n.attribute("k")) return "TopK without k";
                     return "";
                   },
                   [](Lowerer& l, const Node& n) {
                     OpDef* o = l.op("TopKV2");
                     l.input(o, l.in(0));
                     l.input(o, l.opset < 10 ? l.constInts("k", {nodeInt(n, "k", 1)}) : l.in(1));
                     auto& a = *o->mutable_attr();
                     a["dim"] = attrI(nodeInt(n, "axis", -1));
                     a["largest"] = attrB(nodeInt(n, "largest", 1) != 0);
                     a["sorted"] = attrB(nodeInt(n, "sorted", 1) != 0);
                     l.outputs(o);
                   }});
  addRaise("TopKV2", [](Raiser& r, const OpDef& op) -> Status {
    Node* node = r.emit(op, "TopK", {r.in(op, 0), r.in(op, 1)}, 2);
    node->setAttribute("axis", Attribute::ofInt(getI(op, "dim", -1)));
    node->setAttribute("largest", Attribute::ofInt(getB(op, "largest", true)));
    node->setAttribute("sorted", Attribute::ofInt(getB(op, "sorted", true)));
    return Status::ok();
  });
  // Dropout in inference is the identity; ONNX Identity is GraphEngine's Identity.
  addRule("Dropout", {[](const Node& n, int64_t) -> std::string {
                        if (n.outputs().size() > 1 && n.output(1) &&
                            (n.output(1)->hasUses() || n.output(1)->isGraphOutput()))
                          return "Dropout's mask output";
                        if (hasInput(n, 2)) {
                          const Tensor* t = constInput(n, 2);
                          if (!t || t->byteSize() < 1 || t->data()[0] != 0)
                            return "Dropout in training mode";
                        }
                        return "";
                      },
                      [](Lowerer& l, const Node& n) {
                        OpDef* o = l.op("Identity");
                        l.input(o, l.in(0));
                        const Value* y = n.output(0);
                        l.bind(y, l.output(o, y->dtype(), y->shape(), y->name()));
                      }});
  simple("Identity", "Identity", {}, 1);
  addRule("Constant",
          {[](const Node& n, int64_t) -> std::string {
             const Attribute* v = n.attribute("value");
             if (v && v->kind() == AttrKind::Tensor) return "";
             for (const char* a : {"value_float", "value_int", "value_floats", "value_ints"})
               if (n.attribute(a)) return "";
             return "Constant of this kind";
           },
           [](Lowerer& l, const Node& n) {
             l.bind(n.output(0), l.constant("value", *constantNodeValue(n)));
           }});
  addRule("BatchNormalization",
          {[](const Node& n, int64_t opset) -> std::string {
             if (opset < 7) return "BatchNormalization of opset 6 or earlier";
             if (nodeInt(n, "spatial", 1) != 1) return "BatchNormalization with spatial 0";
             if (nodeInt(n, "training_mode", 0)) return "BatchNormalization in training mode";
             for (size_t i = 1; i < n.outputs().size(); ++i)
               if (n.output(i) && (n.output(i)->hasUses() || n.output(i)->isGraphOutput()))
                 return "BatchNormalization's running statistics outputs";
             return "";
           },
           [](Lowerer& l, const Node& n) {
             OpDef* o = l.op("BatchNorm");
             for (size_t i = 0; i < 5; ++i)
               l.input(o, l.in(i), i == 0 && rankOf(n.input(0)) == 4 ? "NCHW" : "");
             auto& a = *o->mutable_attr();
             a["epsilon"] = attrF(nodeFloat(n, "epsilon", 1e-5f));
             a["data_format"] = attrS("NCHW");
             a["is_training"] = attrB(false);
             const Value* y = n.output(0);
             l.bind(y, l.output(o, y->dtype(), y->shape(), y->name()));
           }});
  addRaise("BatchNorm", [](Raiser& r, const OpDef& op) -> Status {
    std::vector<Value*> inputs;
    for (int i = 0; i < 5; ++i)
      inputs.push_back(r.in(op, i));
    r.emit(op, "BatchNormalization", inputs, 1)
        ->setAttribute("epsilon", Attribute::ofFloat(getF(op, "epsilon", 1e-5f)));
    return Status::ok();
  });
  addRule("LayerNormalization",
          {[](const Node& n, int64_t) -> std::string {
             for (size_t i = 1; i < n.outputs().size(); ++i)
               if (n.output(i) && (n.output(i)->hasUses() || n.output(i)->isGraphOutput()))
                 return "LayerNormalization's mean / inverse deviation outputs";
             if (nodeInt(n, "axis", -1) < 0 && rankOf(n.input(0)) < 0)
               return "LayerNormalization of unknown rank";
             return "";
           },
           [](Lowerer& l, const Node& n) {
             int64_t axis = nodeInt(n, "axis", -1);
             if (axis < 0) axis += rankOf(n.input(0));
             OpDef* o = l.op("LayerNorm");
             for (size_t i = 0; i < 3; ++i)
               l.input(o, l.in(i));
             auto& a = *o->mutable_attr();
             a["begin_norm_axis"] = attrI(axis);
             a["begin_params_axis"] = attrI(axis);
             a["epsilon"] = attrF(nodeFloat(n, "epsilon", 1e-5f));
             const Value* y = n.output(0);
             l.bind(y, l.output(o, y->dtype(), y->shape(), y->name()));
           }});
  addRaise("LayerNorm", [](Raiser& r, const OpDef& op) -> Status {
    std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1)};
    if (Value* b = r.in(op, 2)) inputs.push_back(b);
    Node* node = r.emit(op, "LayerNormalization", inputs, 1);
    node->setAttribute("axis", Attribute::ofInt(getI(op, "begin_norm_axis", -1)));
    node->setAttribute("epsilon", Attribute::ofFloat(getF(op, "epsilon", 1e-5f)));
    return Status::ok();
  });
  simple("InstanceNormalization", "InstanceNorm", {{"epsilon", "epsilon"}}, 6);

  // Division: RealDiv for floating point, TruncateDiv (C semantics, as ONNX) for integers.
  addRule("Div", {[](const Node& n, int64_t opset) -> std::string {
                    return opset < 7 && n.attribute("broadcast")
                               ? "Div with the opset 6 broadcast attribute"
                               : "";
                  },
                  [](Lowerer& l, const Node& n) {
                    OpDef* o = l.op(isFloatType(n.input(0)->dtype()) ? "RealDiv" : "TruncateDiv");
                    l.input(o, l.in(0));
                    l.input(o, l.in(1));
                    l.outputs(o);
                  }});
  for (const char* type : {"RealDiv", "TruncateDiv"})
    addRaise(type, [](Raiser& r, const OpDef& op) -> Status {
      r.emit(op, "Div", {r.in(op, 0), r.in(op, 1)}, 1);
      return Status::ok();
    });
  addRule("Mod", {[](const Node& n, int64_t opset) -> std::string {
                    return opset < 10 ? "Mod of opset 9 or earlier" : "";
                  },
                  [](Lowerer& l, const Node& n) {
                    OpDef* o = l.op(nodeInt(n, "fmod", 0) ? "Mod" : "FloorMod");
                    l.input(o, l.in(0));
                    l.input(o, l.in(1));
                    l.outputs(o);
                  }});
  addRaise("FloorMod", [](Raiser& r, const OpDef& op) -> Status {
    r.emit(op, "Mod", {r.in(op, 0), r.in(op, 1)}, 1);
    return Status::ok();
  });
  addRaise("Mod", [](Raiser& r, const OpDef& op) -> Status {
    r.emit(op, "Mod", {r.in(op, 0), r.in(op, 1)}, 1)->setAttribute("fmod", Attribute::ofInt(1));
    return Status::ok();
  });
  // Variadic Max/Min/Sum: Maximum/Minimum chains, AddN.
  for (const std::string onnx : {"Max", "Min", "Sum"}) {
    std::string geType = onnx == "Max" ? "Maximum" : onnx == "Min" ? "Minimum" : "AddN";
    addRule(onnx, {[](const Node& n, int64_t opset) -> std::string {
                     return opset < 6 ? n.opType() + " of opset 5 or earlier" : "";
                   },
                   [geType](Lowerer& l, const Node& n) {
                     const Value* y = n.output(0);
                     size_t count = n.inputs().size();
                     if (count == 1) {
                       OpDef* o = l.op("Identity");
                       l.input(o, l.in(0));
                       l.outputs(o);
                       return;
                     }
                     if (geType == "AddN") {
                       OpDef* o = l.op("AddN");
                       for (size_t i = 0; i < count; ++i)
                         l.input(o, l.in(i));
                       (*o->mutable_attr())["N"] = attrI(static_cast<int64_t>(count));
                       l.outputs(o);
                       return;
                     }
                     Port acc = l.in(0);
                     for (size_t i = 1; i < count; ++i) {
                       bool last = i + 1 == count;
                       OpDef* o = l.op(geType, last ? "" : std::to_string(i));
                       l.input(o, acc);
                       l.input(o, l.in(i));
                       acc = l.output(o, y->dtype(), last ? y->shape() : Shape(),
                                      last ? y->name() : "");
                     }
                     l.bind(y, acc);
                   }});
    addRaise(geType, [onnx](Raiser& r, const OpDef& op) -> Status {
      std::vector<Value*> inputs;
      for (int i = 0; i < op.input_size(); ++i)
        inputs.push_back(r.in(op, i));
      r.emit(op, onnx, inputs, 1);
      return Status::ok();
    });
  }

  for (const char* unary :
       {"Abs",     "Acos", "Acosh", "Asin",  "Asinh", "Atan", "Atanh",      "Ceil",     "Cos",
        "Cosh",    "Erf",  "Exp",   "Floor", "Log",   "Neg",  "Reciprocal", "Relu",     "Round",
        "Sigmoid", "Sign", "Sin",   "Sinh",  "Sqrt",  "Tan",  "Tanh",       "Softplus", "Softsign"})
    simple(unary, unary, {}, 1); // older attributes (consumed_inputs) fail the attribute check
  simple("IsNaN", "IsNan", {}, 9);
  simple("IsInf", "IsInf",
         {{"detect_negative", "detect_negative"}, {"detect_positive", "detect_positive"}}, 10);
  simple("Not", "LogicalNot", {}, 1);
  for (const char* binary : {"Add", "Sub", "Mul", "Pow", "Equal", "Less", "Greater"})
    simple(binary, binary, {}, 1); // opset < 7 `broadcast` fails the attribute check
  simple("LessOrEqual", "LessEqual", {}, 12);
  simple("GreaterOrEqual", "GreaterEqual", {}, 12);
  simple("And", "LogicalAnd");
  simple("Or", "LogicalOr");
  simple("Where", "Select", {}, 9);
  simple("LeakyRelu", "LeakyRelu", {{"alpha", "negative_slope"}}, 6);
  simple("Elu", "Elu", {{"alpha", "alpha"}}, 6);
  simple("Selu", "Selu", {{"alpha", "alpha"}, {"gamma", "scale"}}, 6);
  simple("Celu", "Celu", {{"alpha", "alpha"}}, 12);
  simple("HardSigmoid", "HardSigmoid", {{"alpha", "alpha"}, {"beta", "beta"}}, 6);
  simple("ThresholdedRelu", "ThresholdedRelu", {{"alpha", "threshold"}}, 10);
  simple("HardSwish", "HardSwish", {}, 14);
  simple("Mish", "Mish", {}, 18);
  simple("PRelu", "PRelu", {}, 9);
  simple("Expand", "Expand", {}, 8);
  simple("Tile", "Tile", {}, 6);
  simple("Shape", "Shape", {{"start", "start"}, {"end", "end"}}, 1);
  simple("Size", "Size", {}, 1);
  simple("Range", "Range", {}, 11);
  simple("CumSum", "Cumsum", {{"exclusive", "exclusive"}, {"reverse", "reverse"}}, 11);
  simple("Einsum", "Einsum", {{"equation", "equation"}}, 12);
  simple("GatherElements", "GatherElements", {{"axis", "dim"}}, 11);
  simple("GatherND", "GatherNd", {{"batch_dims", "batch_dims"}}, 12);
  simple("ScatterElements", "ScatterElements", {{"axis", "axis"}, {"reduction", "reduction"}}, 11);
  simple("ScatterND", "TensorScatterUpdate", {{"reduction", "reduction"}}, 11,
         [](const Node& n, int64_t) -> std::string {
           return nodeString(n, "reduction", "none") == "none" ? "" : "ScatterND with a reduction";
         });
  simple("OneHot", "OneHot", {{"axis", "axis"}}, 11);
  simple("NonZero", "NonZero", {}, 9);
  simple("DepthToSpace", "DepthToSpace", {{"blocksize", "block_size"}, {"mode", "mode"}}, 11);
  simple("SpaceToDepth", "SpaceToDepth", {{"blocksize", "block_size"}}, 1);
  simple("GlobalAveragePool", "GlobalAveragePool", {}, 1);
  simple("GlobalMaxPool", "GlobalMaxPool", {}, 1);
}

// CastLike → Cast, Trilu → Triu / Tril, Mean → AddN and Muls, Square (a reduction helper).
void extraRules() {
  // A layout change only (om_heavy_formats.cpp): the raised graph works on the plain tensor.
  addRaise("TransData", [](Raiser& r, const OpDef& op) -> Status {
    r.rebind(op, 0, r.in(op, 0));
    return Status::ok();
  });
  addRule("CastLike", {[](const Node& n, int64_t) -> std::string {
                         if (!n.input(1) || !toGeDType(n.input(1)->dtype()))
                           return "CastLike to this type";
                         return "";
                       },
                       [](Lowerer& l, const Node& n) {
                         OpDef* o = l.op("Cast");
                         l.input(o, l.in(0));
                         (*o->mutable_attr())["dst_type"] =
                             attrI(geProtoToCxxDType(*toGeDType(n.input(1)->dtype())));
                         l.outputs(o);
                       }});
  addRule("Trilu", {[](const Node& n, int64_t) -> std::string {
                      if (hasInput(n, 1) && !constInts(n, 1)) return "Trilu k computed at run time";
                      return "";
                    },
                    [](Lowerer& l, const Node& n) {
                      int64_t k = hasInput(n, 1) ? constInts(n, 1)->at(0) : 0;
                      OpDef* o = l.op(nodeInt(n, "upper", 1) ? "Triu" : "Tril");
                      l.input(o, l.in(0));
                      (*o->mutable_attr())["diagonal"] = attrI(k);
                      l.outputs(o);
                    }});
  for (const char* type : {"Triu", "Tril"})
    addRaise(type, [](Raiser& r, const OpDef& op) -> Status {
      Value* k =
          r.constTensor(op.name() + "_k",
                        Tensor::fromValues<int64_t>(DType::Int64, {}, {getI(op, "diagonal", 0)}));
      r.emit(op, "Trilu", {r.in(op, 0), k}, 1)
          ->setAttribute("upper", Attribute::ofInt(op.type() == "Triu"));
      return Status::ok();
    });
  addRule("Mean", {[](const Node& n, int64_t opset) -> std::string {
                     if (opset < 6) return "Mean of opset 5 or earlier";
                     if (n.output(0)->dtype() != DType::Float32) return "Mean on non-fp32 data";
                     return "";
                   },
                   [](Lowerer& l, const Node& n) {
                     const Value* y = n.output(0);
                     size_t count = n.inputs().size();
                     if (count == 1) {
                       OpDef* o = l.op("Identity");
                       l.input(o, l.in(0));
                       l.outputs(o);
                       return;
                     }
                     OpDef* sum = l.op("AddN", "sum");
                     for (size_t i = 0; i < count; ++i)
                       l.input(sum, l.in(i));
                     (*sum->mutable_attr())["N"] = attrI(static_cast<int64_t>(count));
                     Port p = l.output(sum, y->dtype(), y->shape(), "");
                     OpDef* mul = l.op("Muls");
                     l.input(mul, p);
                     (*mul->mutable_attr())["value"] = attrF(1.0f / static_cast<float>(count));
                     l.outputs(mul);
                   }});
  addRaise("Square", [](Raiser& r, const OpDef& op) -> Status {
    r.emit(op, "Mul", {r.in(op, 0), r.in(op, 0)}, 1);
    return Status::ok();
  });
}

// ConvTranspose → Conv2DTranspose (input_size, x, filter, bias); Resize → ResizeNearestNeighborV2 /
// ResizeBilinearV2 on the H and W of NCHW data.
void upsampleRules() {
  addRule("ConvTranspose",
          {[](const Node& n, int64_t) -> std::string {
             if (rankOf(n.input(0)) != 4) return "ConvTranspose that is not 2-D";
             if (!staticShape(n.input(1)) || !staticShape(n.output(0)))
               return "ConvTranspose with dynamic shapes";
             std::string autoPad = nodeString(n, "auto_pad", "NOTSET");
             if (autoPad != "NOTSET" && autoPad != "VALID") return "ConvTranspose auto_pad SAME_*";
             if (n.attribute("output_shape")) return "ConvTranspose with output_shape";
             return "";
           },
           [](Lowerer& l, const Node& n) {
             auto strides = nodeInts(n, "strides").value_or(std::vector<int64_t>{1, 1});
             auto dilations = nodeInts(n, "dilations").value_or(std::vector<int64_t>{1, 1});
             auto pads = nodeInts(n, "pads").value_or(std::vector<int64_t>(4, 0));
             auto outPad = nodeInts(n, "output_padding").value_or(std::vector<int64_t>{0, 0});
             if (nodeString(n, "auto_pad", "NOTSET") == "VALID") pads.assign(4, 0);
             OpDef* o = l.op("Conv2DTranspose");
             l.input(o, l.constInts("input_size", n.output(0)->shape().staticDims()));
             l.input(o, l.in(0), "NCHW");
             l.input(o, l.in(1), "NCHW");
             if (hasInput(n, 2)) l.input(o, l.in(2));
             auto& a = *o->mutable_attr();
             a["strides"] = attrInts(withBatchChannel(strides));
             a["dilations"] = attrInts(withBatchChannel(dilations));
             a["pads"] = attrInts(interleavePads(pads));
             a["groups"] = attrI(nodeInt(n, "group", 1));
             a["data_format"] = attrS("NCHW");
             a["output_padding"] = attrInts(withBatchChannel(outPad));
             a["offset_x"] = attrI(0);
             l.outputs(o, "NCHW");
           }});
  addRaise("Conv2DTranspose", [](Raiser& r, const OpDef& op) -> Status {
    std::vector<Value*> inputs{r.in(op, 1), r.in(op, 2)};
    if (Value* b = r.in(op, 3)) inputs.push_back(b);
    auto strides = getInts(op, "strides"), dilations = getInts(op, "dilations");
    auto pads = getInts(op, "pads"), outPad = getInts(op, "output_padding");
    if (strides.size() != 4 || dilations.size() != 4 || pads.size() != 4)
      return r.unsupported(op, "strides/dilations/pads are not NCHW lists");
    Node* node = r.emit(op, "ConvTranspose", inputs, 1);
    node->setAttribute("strides", Attribute::ofInts({strides[2], strides[3]}));
    node->setAttribute("dilations", Attribute::ofInts({dilations[2], dilations[3]}));
    node->setAttribute("pads", Attribute::ofInts(deinterleavePads(pads)));
    node->setAttribute("group", Attribute::ofInt(getI(op, "groups", 1)));
    if (outPad.size() == 4)
      node->setAttribute("output_padding", Attribute::ofInts({outPad[2], outPad[3]}));
    return Status::ok();
  });

  addRule("Resize",
          {[](const Node& n, int64_t opset) -> std::string {
             if (opset < 11) return "Resize of opset 10 or earlier";
             if (rankOf(n.input(0)) != 4 || !staticShape(n.input(0)) || !staticShape(n.output(0)))
               return "Resize that is not on static 4-D data";
             auto in = n.input(0)->shape().staticDims(), out = n.output(0)->shape().staticDims();
             if (in[0] != out[0] || in[1] != out[1]) return "Resize of the N or C axis";
             // With scales ONNX maps coordinates by the scale itself; GraphEngine by out / in.
             if (const Tensor* scales = constInput(n, 2);
                 scales && scales->dtype() == DType::Float32 && scales->elementCount() == 4) {
               auto v = scales->copyValues<float>();
               for (size_t i = 2; i < 4; ++i)
                 if (static_cast<double>(v[i]) * static_cast<double>(in[i]) !=
                     static_cast<double>(out[i]))
                   return "Resize by a scale that does not give a whole output size";
             } else if (hasInput(n, 2) && !hasInput(n, 3)) {
               return "Resize scales computed at run time";
             }
             std::string mode = nodeString(n, "mode", "nearest");
             std::string coord = nodeString(n, "coordinate_transformation_mode", "half_pixel");
             if (n.attribute("antialias") && nodeInt(n, "antialias", 0))
               return "Resize with antialias";
             if (n.attribute("axes")) return "Resize with axes";
             if (mode == "nearest") {
               std::string nearest = nodeString(n, "nearest_mode", "round_prefer_floor");
               bool legacy = coord == "asymmetric" && nearest == "floor";
               bool centers = coord == "half_pixel" && nearest == "round_prefer_ceil";
               bool corners = coord == "align_corners" && nearest == "round_prefer_ceil";
               if (!legacy && !centers && !corners)
                 return "Resize nearest with " + coord + " / " + nearest;
               return "";
             }
             if (mode == "linear") {
               if (coord != "asymmetric" && coord != "half_pixel" && coord != "align_corners")
                 return "Resize linear with " + coord;
               return "";
             }
             return "Resize mode " + mode;
           },
           [](Lowerer& l, const Node& n) {
             auto out = n.output(0)->shape().staticDims();
             std::string mode = nodeString(n, "mode", "nearest");
             std::string coord = nodeString(n, "coordinate_transformation_mode", "half_pixel");
             OpDef* o = l.op(mode == "nearest" ? "ResizeNearestNeighborV2" : "ResizeBilinearV2");
             l.input(o, l.in(0), "NCHW");
             l.input(o, l.constant("size",
                                   Tensor::fromValues<int32_t>(
                                       DType::Int32, {2},
                                       std::vector<int32_t>{int32_t(out[2]), int32_t(out[3])})));
             auto& a = *o->mutable_attr();
             a["align_corners"] = attrB(coord == "align_corners");
             a["half_pixel_centers"] = attrB(coord == "half_pixel");
             a["data_format"] = attrS("NCHW");
             l.outputs(o, "NCHW");
           }});
  for (const char* type : {"ResizeNearestNeighborV2", "ResizeBilinearV2"})
    addRaise(type, [](Raiser& r, const OpDef& op) -> Status {
      Value* x = r.in(op, 0);
      auto size = r.constIntsIn(op, 1);
      if (!size || size->size() != 2 || rankOf(x) != 4 || !x->shape()[0].isStatic() ||
          !x->shape()[1].isStatic())
        return r.unsupported(op, "size is not a constant [H, W] of 4-D data");
      bool nearest = op.type() == "ResizeNearestNeighborV2";
      bool corners = getB(op, "align_corners", false),
           centers = getB(op, "half_pixel_centers", false);
      Value* sizes =
          r.constInts(op.name() + "_sizes",
                      {x->shape()[0].value(), x->shape()[1].value(), (*size)[0], (*size)[1]});
      Node* node = r.emit(op, "Resize", {x, nullptr, nullptr, sizes}, 1);
      node->setAttribute("mode", Attribute::ofString(nearest ? "nearest" : "linear"));
      node->setAttribute("coordinate_transformation_mode",
                         Attribute::ofString(corners   ? "align_corners"
                                             : centers ? "half_pixel"
                                                       : "asymmetric"));
      if (nearest)
        node->setAttribute("nearest_mode",
                           Attribute::ofString(corners || centers ? "round_prefer_ceil" : "floor"));
      return Status::ok();
    });
}

const bool kRulesRegistered = [] {
  extraRules();
  upsampleRules();
  convRules();
  poolRules();
  matmulRules();
  softmaxRules();
  shapeRules();
  reduceRules();
  miscRules();
  return true;
}();

// ---------------------------------------------------------------------------------------------
// Whole-model lowering.

std::string dtypeReason(DType t, const SocInfo* soc, const std::string& socVersion) {
  if (t == DType::Undefined) return "";
  if (!toGeDType(t)) return fmt::format("data type {} has no GraphEngine equivalent", dtypeName(t));
  if (soc && !soc->supportsDType(t))
    return fmt::format("data type {} is not supported on {}", dtypeName(t), socVersion);
  return "";
}

} // namespace

// "" when the node lowers; otherwise why, and whether it is the op (K8101) or a value (K8102).
std::pair<std::string, bool> nodeReason(const Node& n, int64_t opset, const SocInfo* soc,
                                        const std::string& socVersion) {
  (void)kRulesRegistered;
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return {fmt::format("op {}::{} has no GraphEngine equivalent", n.domain(), n.opType()), true};
  auto it = lowerRules().find(n.opType());
  if (it == lowerRules().end())
    return {fmt::format("op {} has no GraphEngine lowering in kiln", n.opType()), true};
  if (!n.subgraphs().empty()) return {fmt::format("op {} with subgraphs", n.opType()), true};
  for (const Value* v : n.inputs())
    if (v) {
      if (v->type().kind != TypeKind::Tensor && v->type().kind != TypeKind::Unknown)
        return {fmt::format("input '{}' is not a tensor", v->name()), true};
      if (auto r = dtypeReason(v->dtype(), soc, socVersion); !r.empty())
        return {fmt::format("input '{}': {}", v->name(), r), false};
    }
  for (const Value* v : n.outputs())
    if (v) {
      if (v->type().kind != TypeKind::Tensor && v->type().kind != TypeKind::Unknown)
        return {fmt::format("output '{}' is not a tensor", v->name()), true};
      if (auto r = dtypeReason(v->dtype(), soc, socVersion); !r.empty())
        return {fmt::format("output '{}': {}", v->name(), r), false};
    }
  std::string r = it->second.check(n, opset);
  return {r, true};
}

namespace {

Expected<LoweredModel> Lowerer::run() {
  const Graph& g = *model_.graph;
  opset = model_.opsetVersion("");
  // Every problem at once: unsupported ops (K8101) take precedence over bad values (K8102).
  std::vector<std::string> unsupportedOps, badValues;
  size_t position = 0;
  for (const auto& n : g.nodes()) {
    ++position;
    auto [reason, isOp] = nodeReason(*n, opset, soc_, options_.socVersion);
    if (reason.empty()) continue;
    std::string label =
        n->name().empty() ? fmt::format("node #{}", position) : fmt::format("node '{}'", n->name());
    std::string line = fmt::format("{} ({}): {}", label, n->opType(), reason);
    (isOp ? unsupportedOps : badValues).push_back(line);
  }
  for (const Value* v : g.inputs())
    if (!v->isInitializer())
      if (auto r = dtypeReason(v->dtype(), soc_, options_.socVersion); !r.empty())
        badValues.push_back(fmt::format("graph input '{}': {}", v->name(), r));
  if (!unsupportedOps.empty()) {
    std::set<std::string> types;
    for (const auto& n : g.nodes())
      if (!nodeReason(*n, opset, soc_, options_.socVersion).first.empty())
        types.insert(n->opType());
    std::string list;
    for (const auto& t : types)
      list += (list.empty() ? "" : ", ") + t;
    return Status(ErrorCode::OmLowerUnsupported,
                  fmt::format("{}: {} node(s) do not lower to GraphEngine ops for {} ({}): {}",
                              model_.sourcePath.empty() ? g.name() : model_.sourcePath,
                              unsupportedOps.size(), options_.socVersion, list,
                              fmt::join(unsupportedOps, "; ")),
                  "replace these ops in the exporter, or check the model first with `kiln check "
                  "MODEL --target om:<soc>`");
  }
  if (!badValues.empty())
    return Status(ErrorCode::OmLowerBadAttribute,
                  fmt::format("{}: {}", model_.sourcePath.empty() ? g.name() : model_.sourcePath,
                              fmt::join(badValues, "; ")),
                  "change the data type or attribute, or pick a chip that supports it");

  std::string name = options_.modelName.empty() ? g.name() : options_.modelName;
  if (name.size() > 31) name.resize(31);
  if (name.empty()) name = "model";
  auto& def = out_.modelDef;
  def.set_name(name);
  def.set_version(kOmProtoVersion);
  graph_ = def.add_graph();
  graph_->set_name(name);
  for (const auto& n : g.nodes())
    if (!n->name().empty()) reserved_.insert(n->name()); // node names stay as they are
  opNames_.insert("Node_Output");

  // Data ops for the graph inputs, Const ops for the initializers.
  int64_t index = 0;
  for (const Value* v : g.inputs()) {
    if (v->isInitializer()) continue;
    OpDef* o = graph_->add_op();
    std::string opName = uniqueOpName(v->name());
    o->set_name(opName);
    o->set_type("Data");
    o->set_id(nextId_++);
    o->set_has_out_attr(true);
    o->add_input("");
    (*o->mutable_attr())["index"] = attrI(index);
    fillDesc(o->add_input_desc(), v->dtype(), v->shape(), rankOf(v) == 4 ? "NCHW" : "ND");
    auto* d = o->add_output_desc();
    fillDesc(d, v->dtype(), v->shape(), rankOf(v) == 4 ? "NCHW" : "ND");
    d->set_name(v->name());
    graph_->add_input(opName + ":0");
    sources_[v] = opName + ":0";
    out_.inputs.push_back({v->name(), v->dtype(), {}, rankOf(v) == 4 ? kFormatNchw : kFormatNd});
    for (const auto& x : d->shape().dim())
      out_.inputs.back().dims.push_back(x);
    ++index;
  }
  for (const Value* v : g.initializers()) {
    if (!v->hasUses() && !v->isGraphOutput()) continue;
    std::string opName = uniqueOpName(v->name());
    Port p = emitConst(opName, v->initializer());
    graph_->mutable_op(graph_->op_size() - 1)->mutable_output_desc(0)->set_name(v->name());
    sources_[v] = p.src;
  }
  int unnamed = 0;
  for (const auto& n : g.nodes()) {
    node = n.get();
    nodeName_ = n->name();
    while (nodeName_.empty() ||
           (n->name().empty() && (reserved_.count(nodeName_) || opNames_.count(nodeName_))))
      nodeName_ = fmt::format("{}_{}", n->opType(), unnamed++);
    reserved_.insert(nodeName_);
    lowerRules().at(n->opType()).lower(*this, *n);
  }
  OpDef* netOutput = graph_->add_op();
  netOutput->set_name("Node_Output");
  netOutput->set_type("NetOutput");
  netOutput->set_id(nextId_++);
  netOutput->set_has_out_attr(true);
  for (const Value* v : g.outputs()) {
    auto it = sources_.find(v);
    if (it == sources_.end())
      return Status(ErrorCode::Internal,
                    fmt::format("graph output '{}' was not lowered", v->name()),
                    "report this as a kiln bug");
    netOutput->add_input(it->second);
    auto* d = netOutput->add_input_desc();
    fillDesc(d, v->dtype(), v->shape(), rankOf(v) == 4 ? "NCHW" : "ND");
    d->set_name(v->name());
    IoTensor io{v->name(), v->dtype(), {}, rankOf(v) == 4 ? kFormatNchw : kFormatNd};
    for (const auto& x : d->shape().dim())
      io.dims.push_back(x);
    out_.outputs.push_back(std::move(io));
  }
  out_.memorySize = memorySize_;
  return std::move(out_);
}

} // namespace

Expected<LoweredModel> lowerModel(const Model& model, const OmWriteOptions& options) {
  const SocInfo* soc = findSoc(options.socVersion);
  if (!soc) return unknownSocError(options.socVersion);
  if (!model.graph)
    return Status(ErrorCode::EmptyGraph, "model has no graph", "import a model first");
  Lowerer lowerer(model, options, soc);
  auto lowered = lowerer.run();
  if (!lowered) return lowered;
  if (auto s = applyHeavyFormats(*lowered); !s) return s;
  return lowered;
}

Expected<Model> raiseModelDef(const ge::proto::ModelDef& modelDef, const uint8_t* weights,
                              size_t weightsSize, const std::string& baseDir,
                              const std::string& displayName) {
  (void)kRulesRegistered;
  if (modelDef.graph_size() == 0)
    return Status(ErrorCode::OmFileInvalid,
                  fmt::format("{}: the ModelDef holds no graph", displayName),
                  "the file is damaged; convert the model again");
  const auto& root = modelDef.graph(0);
  for (const auto& op : root.op())
    if (op.subgraph_name_size() > 0)
      return Status(
          ErrorCode::OmReadUnsupported,
          fmt::format("{}: op '{}' ({}) has subgraphs", displayName, op.name(), op.type()),
          "kiln reads single-graph models");
  Model model;
  model.irVersion = 8;
  model.opsets = {{"", kRaisedOpset}};
  model.producerName = "kiln";
  model.sourcePath = displayName;
  model.graph = std::make_shared<Graph>(root.name());
  Raiser raiser(*model.graph, weights, weightsSize, baseDir, displayName);
  if (auto s = raiser.raise(root); !s) return s;
  return model;
}

} // namespace kiln::om

namespace kiln {

std::string omUnsupportedReason(const Node& node, const std::string& socVersion, int64_t opset) {
  const SocInfo* soc = findSoc(socVersion);
  if (!soc) return fmt::format("--soc_version '{}' names no chip kiln knows", socVersion);
  return om::nodeReason(node, opset, soc, socVersion).first;
}

} // namespace kiln
