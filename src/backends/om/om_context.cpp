// The shared .om lowering machinery: the Lowerer, rule tables, support checks (attribute helpers:
// om_attributes.cpp).
#include "om_context.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "kiln/ir/constant.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/support/display.h"
#include "ops/control_flow.h"
#include "ops/conv.h"

namespace kiln::om {

// ---------------------------------------------------------------------------------------------
// Lowering.

namespace {
std::string layoutFor(const Shape& shape, const std::string& preferred) {
  if (!preferred.empty()) return preferred;
  return "ND";
}
} // namespace

void setDescLayout(TensorDescriptor* d, const std::string& layout) {
  d->set_layout(layout);
  const int format = formatFromName(layout);
  auto& attrs = *d->mutable_attr();
  attrs["format_for_int"] = attrI(format);
  attrs["origin_format"] = attrS(layout);
  attrs["origin_format_for_int"] = attrI(format);
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
  setDescLayout(d, layout);
  auto& attrs = *d->mutable_attr();
  attrs["origin_shape"] = attrInts(dims);
  attrs["origin_shape_initialized"] = attrB(true);
  d->set_device_type("NPU");
  if (shape.hasRank()) d->set_real_dim_cnt(static_cast<int64_t>(shape.rank()));
  if (shape.hasRank() && shape.isStatic())
    if (auto n = shape.elementCount())
      if (auto bytes = dtypeStorageBytes(dtype, *n)) d->set_size(static_cast<int64_t>(*bytes));
}

OpDef* Lowerer::op(const std::string& type, const std::string& suffix) {
  OpDef* o = graph_->add_op();
  o->set_name(uniqueOpName(suffix.empty() ? nodeName_ : nodeName_ + "_" + suffix));
  o->set_type(type);
  o->set_id(nextId_++);
  o->set_stream_id(0);
  o->set_has_out_attr(true);
  return o;
}

void Lowerer::input(OpDef* o, const Port& p, const std::string& layout) {
  o->add_input(p.src);
  if (p.src.empty()) {
    // An absent optional input keeps its slot, as GraphEngine writes one: an input entry and a
    // placeholder desc (DT_UNDEFINED, format RESERVED), so entry i and desc i stay one port and
    // later inputs land on their own slots when GE rebuilds the node.
    fillPlaceholderDesc(o->add_input_desc());
    return;
  }
  fillDesc(o->add_input_desc(), onChip(p.dtype), p.shape, layoutFor(p.shape, layout));
}

Port Lowerer::output(OpDef* o, DType dtype, const Shape& shape, const std::string& valueName,
                     const std::string& layout) {
  auto* d = o->add_output_desc();
  fillDesc(d, onChip(dtype), shape, layoutFor(shape, layout));
  d->set_name(valueName);
  if (d->size() > 0) memorySize_ += static_cast<uint64_t>(d->size());
  return Port{fmt::format("{}:{}", o->name(), o->output_desc_size() - 1), dtype, shape};
}

void Lowerer::outputs(OpDef* o, const std::string& layout) {
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    const Value* v = node->output(i);
    if (!v) {
      o->add_output_desc();
      continue;
    }
    bind(v, output(o, v->dtype(), v->shape(), v->name(), layout));
  }
}

// Node names are reserved for their own nodes: helper ops and constants never take them.
std::string Lowerer::uniqueOpName(const std::string& base) {
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

Port Lowerer::emitConst(const std::string& name, const Tensor& given) {
  Tensor narrowed;
  if (onChip(given.dtype()) != given.dtype()) // float64 weights as float32 (onChip)
    if (auto cast = rt::castTensor(given, onChip(given.dtype()))) narrowed = std::move(*cast);
  const Tensor& t = narrowed.dtype() == DType::Undefined ? given : narrowed;
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
    // One file per weight, read whole: the IR's file_path (its location / offset / length are
    // GE framework attrs no public IR declares; kiln's reader still takes them).
    attrs["file_path"] = attrS(file);
    attrs["shape"] = attrInts(t.dims());
    attrs["dtype"] =
        attrDt(geProtoToCxxDType(toGeDType(t.dtype()).value_or(ge::proto::DT_UNDEFINED)));
    out_.externalFiles.emplace_back(file, WeightSource::of(t.buffer()));
  } else {
    // The bytes stay in the tensor's buffer until the file is written (WeightsLayout).
    o->set_type("Const");
    int64_t offset = static_cast<int64_t>(out_.weights.append(WeightSource::of(t.buffer())));
    for (TensorDescriptor* d : {value->mutable_desc(), desc}) {
      d->set_data_offset(offset);
      d->set_weight_size(static_cast<int64_t>(t.byteSize()));
    }
  }
  return Port{name + ":0", t.dtype(), shape};
}

// ---------------------------------------------------------------------------------------------
// Rule tables and shared rule helpers.

lowering::RuleTable<LoweringRule>& omLoweringRules() {
  static lowering::RuleTable<LoweringRule> rules("om lowering");
  return rules;
}
lowering::RuleTable<RaisingRule>& omRaisingRules() {
  static lowering::RuleTable<RaisingRule> rules("om raising");
  return rules;
}

std::string noCheck(const Node&, const OpContext&) { return ""; }

void simple(const std::string& onnx, const std::string& geType,
            std::vector<std::pair<std::string, std::string>> attrs, int64_t minOpset, CheckFn extra,
            const char* file) {
  addLowering(
      onnx,
      [onnx, attrs, minOpset, extra](const Node& n, const OpContext& context) -> std::string {
        if (context.opset < minOpset)
          return fmt::format("{} of opset {} (kiln lowers opset {} and later)", onnx, context.opset,
                             minOpset);
        for (const auto& attribute : n.attributes()) {
          // A named variable, not a structured binding: clang 14 cannot capture those.
          const std::string& name = attribute.first;
          bool known = std::any_of(attrs.begin(), attrs.end(),
                                   [&](const auto& p) { return p.first == name; });
          if (!known) return fmt::format("attribute '{}' of {}", name, onnx);
        }
        return extra(n, context);
      },
      [geType, attrs](Lowerer& l, const Node& n) {
        OpDef* o = l.op(geType);
        for (size_t i = 0; i < n.inputs().size(); ++i)
          l.input(o, l.in(i));
        for (const auto& [onnxName, geName] : attrs)
          if (const Attribute* a = n.attribute(onnxName))
            if (auto def = toAttrDef(*a)) (*o->mutable_attr())[geName] = *def;
        l.outputs(o);
      },
      file);
  addRaising(
      geType,
      [onnx, attrs](Raiser& r, const OpDef& op) -> Status {
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
      },
      file);
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
    const ops::AxisPads same =
        ops::samePadding(dims[2 + i], kernel[i], strides[i], dilations[i], autoPad != "SAME_LOWER");
    pads[i] = same.begin;
    pads[i + s] = same.end;
  }
  return pads;
}

std::vector<int64_t> withBatchChannel(const std::vector<int64_t>& v) {
  std::vector<int64_t> out{1, 1};
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

namespace {

// A layout change only (om_heavy_formats.cpp): the raised graph works on the plain tensor.
KILN_OM_RAISING("TransData", [](Raiser& r, const OpDef& op) -> Status {
  r.rebind(op, 0, r.in(op, 0));
  return Status::ok();
});

// ---------------------------------------------------------------------------------------------
// Whole-model lowering.

// Whether float64 runs as float32 on `soc` (it has no double; Lowerer::onChip).
bool narrowsFloat64(const SocInfo* soc) {
  return soc && !soc->supportsDType(DType::Float64) && soc->supportsDType(DType::Float32);
}

std::string dtypeReason(DType t, const SocInfo* soc, const std::string& socVersion) {
  if (t == DType::Undefined) return "";
  if (!toGeDType(t)) return fmt::format("data type {} has no GraphEngine equivalent", dtypeName(t));
  if (t == DType::Float64 && narrowsFloat64(soc)) return "";
  if (soc && !soc->supportsDType(t))
    return fmt::format("data type {} is not supported on {}", dtypeName(t), socVersion);
  return "";
}

// A value GraphEngine or the chip cannot hold ("" when none), and whether it is still the op's
// fault (a value that is not a tensor: K8101) or the value's (a data type: K8102).
std::pair<std::string, bool> valueReason(const Node& n, const SocInfo* soc,
                                         const std::string& socVersion) {
  // .om keeps names in protobuf `string` fields, which readers refuse unless they are UTF-8: said
  // here so `atc --mode=3` and `kiln check` report what the writer would refuse.
  if (!isValidUtf8(n.name()) || !isValidUtf8(n.opType()))
    return {"its name or op type is not valid UTF-8, which .om string fields require", false};
  for (const auto* list : {&n.inputs(), &n.outputs()})
    for (const Value* v : *list)
      if (v && !isValidUtf8(v->name()))
        return {fmt::format("value '{}' has a name that is not valid UTF-8, which .om string "
                            "fields require",
                            displayName(v->name())),
                false};
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
  return {"", true};
}

// om's words for an op GraphEngine has no counterpart for ("" when it has one): atc's E16002
// ("No ONNX parser is registered for optype") is keyed on "has no GraphEngine" (atc_convert.cpp).
std::string noGeOpReason(const Node& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return fmt::format("op {}::{} has no GraphEngine equivalent", n.domain(), n.opType());
  if (!omLoweringRules().find(lowering::ruleKey(n)))
    return fmt::format("op {} has no GraphEngine lowering in kiln", n.opType());
  return "";
}

// "" when the node lowers; otherwise why, and whether it is the op (K8101) or a value (K8102).
// The order: no GraphEngine op, the shared checks (attribute kinds, subgraphs), the values, the
// rule's own check.
std::pair<std::string, bool> nodeReason(const Node& n, const OpContext& context,
                                        const SocInfo* soc) {
  if (std::string r = noGeOpReason(n); !r.empty()) return {r, true};
  if (std::string r = lowering::commonReason(n, context, true); !r.empty()) return {r, true};
  if (auto v = valueReason(n, soc, context.variant); !v.first.empty()) return v;
  const LoweringRule* rule = omLoweringRules().find(lowering::ruleKey(n));
  return {rule->check ? rule->check(n, context) : "", true};
}

// Every node of `g` that cannot lower, in graph order, with nodeReason's answer: the shared walk
// (lowering::collectUnsupported) finds the op refusals, then om's words and value checks apply.
std::vector<lowering::Refusal> omRefusals(const Graph& g, const OpContext& context,
                                          const SocInfo* soc) {
  std::vector<lowering::Refusal> ops = lowering::collectUnsupported(g, omLoweringRules(), context);
  std::map<const Node*, const lowering::Refusal*> byNode;
  for (const lowering::Refusal& r : ops)
    byNode[r.node] = &r;
  std::vector<lowering::Refusal> refusals;
  size_t position = 0;
  for (const auto& n : g.nodes()) {
    ++position;
    auto it = byNode.find(n.get());
    lowering::Refusal refusal =
        it != byNode.end()
            ? *it->second
            : lowering::Refusal{n.get(), lowering::nodeLabel(*n, position), "", true};
    if (std::string r = noGeOpReason(*n); !r.empty()) {
      refusal.reason = r;
    } else if (it == byNode.end() || it->second->byRule) {
      // Refused by the rule's check only (or not at all): a bad value comes first.
      auto [reason, isOp] = valueReason(*n, soc, context.variant);
      if (!reason.empty()) refusal = {n.get(), refusal.label, reason, isOp};
    }
    if (!refusal.reason.empty()) refusals.push_back(std::move(refusal));
  }
  return refusals;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Whole-model lowering.

Expected<LoweredModel> Lowerer::run(std::vector<lowering::Refusal>* refusalsOut) {
  const Graph& g = *model_.graph;
  // Inputs and outputs no GraphEngine tensor can hold: nothing else matters until they are
  // tensors.
  if (std::string r = ops::boundaryKindReason(g, ".om"); !r.empty()) {
    if (refusalsOut) refusalsOut->clear();
    return Status(
        ErrorCode::OmLowerBadAttribute,
        fmt::format("{}: {}", model_.sourcePath.empty() ? g.name() : model_.sourcePath, r),
        "export the sequence's tensors as separate inputs/outputs (a sequence built and "
        "read inside the model with constant positions converts), or run the model on "
        "the CPU (kiln run)");
  }
  opset = model_.opsetVersion("");
  narrowF64_ = narrowsFloat64(soc_);
  // Every problem at once: unsupported ops (K8101) take precedence over bad values (K8102).
  std::vector<lowering::Refusal> refusals =
      omRefusals(g, OpContext{opset, options_.socVersion}, soc_);
  std::vector<std::string> unsupportedOps, badValues;
  for (const lowering::Refusal& r : refusals)
    (r.isOp ? unsupportedOps : badValues).push_back(fmt::format("{}: {}", r.label, r.reason));
  for (const Value* v : g.inputs())
    if (!v->isInitializer())
      if (auto r = dtypeReason(v->dtype(), soc_, options_.socVersion); !r.empty())
        badValues.push_back(fmt::format("graph input '{}': {}", v->name(), r));
  if (refusalsOut) *refusalsOut = refusals;
  if (!unsupportedOps.empty()) {
    std::set<std::string> types;
    for (const lowering::Refusal& r : refusals)
      types.insert(r.node->opType());
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
  reserveNodeNames(g); // node names (subgraphs' too) stay as they are
  opNames_.insert("Node_Output");

  // Data ops for the graph inputs, Const ops for the initializers.
  int64_t index = 0;
  std::vector<std::string> narrowed; // float64 values computed in float32, for the note
  std::map<const Value*, std::string> graphInputSources; // float64 inputs: the Data op itself
  for (const Value* v : g.inputs()) {
    if (v->isInitializer()) continue;
    const OpDef* data =
        addDataOp(v->name(), v->dtype(), v->shape(), rankOf(v) == 4 ? "NCHW" : "ND", index);
    const std::string opName = data->name();
    sources_[v] = opName + ":0";
    if (onChip(v->dtype()) != v->dtype()) {
      // float64 input: the Data op keeps the declared type, a Cast brings it to the chip's.
      nodeName_ = opName;
      OpDef* cast = op("Cast", "to_" + std::string(dtypeName(onChip(v->dtype()))));
      input(cast, Port{opName + ":0", onChip(v->dtype()), v->shape()});
      cast->mutable_input_desc(0)->Clear();
      fillDesc(cast->mutable_input_desc(0), v->dtype(), v->shape(), "ND");
      (*cast->mutable_attr())["dst_type"] =
          attrI(geProtoToCxxDType(*toGeDType(onChip(v->dtype()))));
      narrowed.push_back(fmt::format("input '{}'", v->name()));
      graphInputSources[v] = opName + ":0";
      sources_[v] = output(cast, v->dtype(), v->shape(), "").src;
    }
    out_.inputs.push_back({v->name(), v->dtype(), {}, rankOf(v) == 4 ? kFormatNchw : kFormatNd});
    for (const auto& x : data->output_desc(0).shape().dim())
      out_.inputs.back().dims.push_back(x);
    ++index;
  }
  if (Status s = lowerNodes(g); !s) return s;
  // float64 outputs computed in float32 are cast back, so the model keeps its declared types.
  for (const Value* v : g.outputs()) {
    auto it = sources_.find(v);
    if (it == sources_.end() || onChip(v->dtype()) == v->dtype()) continue;
    if (auto in = graphInputSources.find(v); in != graphInputSources.end()) {
      it->second = in->second; // a float64 input passed through: no round trip via float32
      continue;
    }
    const std::string src = it->second;
    const std::string producer = src.substr(0, src.rfind(':'));
    const int index = std::stoi(src.substr(src.rfind(':') + 1));
    for (OpDef& o : *graph_->mutable_op())
      if (o.name() == producer && index < o.output_desc_size() &&
          o.output_desc(index).name() == v->name())
        o.mutable_output_desc(index)->set_name(v->name() + "_" + dtypeName(onChip(v->dtype())));
    nodeName_ = producer;
    OpDef* cast = op("Cast", "to_" + std::string(dtypeName(v->dtype())));
    input(cast, Port{src, v->dtype(), v->shape()});
    (*cast->mutable_attr())["dst_type"] = attrI(geProtoToCxxDType(*toGeDType(v->dtype())));
    it->second = output(cast, v->dtype(), v->shape(), v->name()).src;
    TensorDescriptor* d = cast->mutable_output_desc(0);
    d->Clear();
    fillDesc(d, v->dtype(), v->shape(), "ND");
    d->set_name(v->name());
    narrowed.push_back(fmt::format("output '{}'", v->name()));
  }
  bool anyFloat64 = !narrowed.empty();
  for (const auto& n : g.nodes())
    for (const Value* v : n->outputs())
      anyFloat64 = anyFloat64 || (v && onChip(v->dtype()) != v->dtype());
  for (const Value* v : g.initializers())
    anyFloat64 = anyFloat64 || (v->hasUses() && onChip(v->dtype()) != v->dtype());
  if (anyFloat64)
    std::fprintf(stderr,
                 "kiln: note: %s has no float64: float64 values are computed in float32%s%s\n",
                 options_.socVersion.c_str(), narrowed.empty() ? "" : "; cast on the way: ",
                 fmt::format("{}", fmt::join(narrowed, ", ")).c_str());
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

void Lowerer::reserveNodeNames(const Graph& g) {
  for (const auto& n : g.nodes()) {
    if (!n->name().empty()) reserved_.insert(n->name());
    for (const Graph* sub : n->subgraphs())
      reserveNodeNames(*sub);
  }
}

namespace {
std::map<std::string, std::set<size_t>>& foldedInputs() {
  static std::map<std::string, std::set<size_t>> table;
  return table;
}
// True when every reader of `v` reads it at conversion time (foldedInput).
bool onlyFolded(const Value* v) {
  if (v->isGraphOutput()) return false;
  for (const Use& use : v->uses())
    if (!foldedInput(*use.user, use.inputIndex)) return false;
  return true;
}
} // namespace

void addFoldedInputs(const std::string& onnx, std::set<size_t> inputs) {
  foldedInputs()[onnx] = std::move(inputs);
}
bool foldedInput(const Node& user, size_t inputIndex) {
  auto it = foldedInputs().find(user.opType());
  return it != foldedInputs().end() && it->second.count(inputIndex) > 0;
}

Status Lowerer::lowerNodes(const Graph& g) {
  for (const Value* v : g.initializers()) {
    if (!v->hasUses() && !v->isGraphOutput()) continue;
    if (onlyFolded(v)) continue;
    std::string opName = uniqueOpName(v->name());
    Port p = emitConst(opName, v->initializer());
    graph_->mutable_op(graph_->op_size() - 1)->mutable_output_desc(0)->set_name(v->name());
    sources_[v] = p.src;
  }
  for (const auto& n : g.nodes()) {
    node = n.get();
    nodeName_ = n->name();
    while (nodeName_.empty() ||
           (n->name().empty() && (reserved_.count(nodeName_) || opNames_.count(nodeName_))))
      nodeName_ = fmt::format("{}_{}", n->opType(), unnamed_++);
    reserved_.insert(nodeName_);
    if (Status s = omLoweringRules().find(lowering::ruleKey(*n))->lower(*this, *n); !s) return s;
  }
  return Status::ok();
}

Lowerer::SubgraphScope Lowerer::beginSubgraph(const std::string& name) {
  SubgraphScope saved{graph_, sources_, node, nodeName_};
  graph_ = out_.modelDef.add_graph();
  graph_->set_name(uniqueOpName(name));
  return saved;
}

void Lowerer::endSubgraph(SubgraphScope scope) {
  graph_ = scope.graph;
  sources_ = std::move(scope.sources);
  node = scope.node;
  nodeName_ = std::move(scope.nodeName);
}

OpDef* Lowerer::addDataOp(const std::string& name, DType dtype, const Shape& shape,
                          const std::string& layout, int64_t index) {
  OpDef* o = graph_->add_op();
  const std::string opName = uniqueOpName(name);
  o->set_name(opName);
  o->set_type("Data");
  o->set_id(nextId_++);
  o->set_has_out_attr(true);
  o->add_input("");
  (*o->mutable_attr())["index"] = attrI(index);
  fillDesc(o->add_input_desc(), dtype, shape, layout);
  auto* d = o->add_output_desc();
  fillDesc(d, dtype, shape, layout);
  d->set_name(name);
  graph_->add_input(opName + ":0");
  return o;
}

Port Lowerer::subgraphData(const std::string& name, DType dtype, const Shape& shape, int64_t index,
                           int64_t parentIndex) {
  OpDef* o = addDataOp(name, dtype, shape, "ND", index);
  (*o->mutable_attr())["_parent_node_index"] = attrI(parentIndex);
  return Port{o->name() + ":0", dtype, shape};
}

void Lowerer::subgraphOutput(const std::vector<Port>& outputs, bool toParent) {
  OpDef* netOutput = graph_->add_op();
  netOutput->set_name(uniqueOpName(graph_->name() + "_Node_Output"));
  netOutput->set_type("NetOutput");
  netOutput->set_id(nextId_++);
  netOutput->set_has_out_attr(true);
  for (size_t i = 0; i < outputs.size(); ++i) {
    netOutput->add_input(outputs[i].src);
    auto* d = netOutput->add_input_desc();
    fillDesc(d, outputs[i].dtype, outputs[i].shape, "ND");
    if (toParent) (*d->mutable_attr())["_parent_node_index"] = attrI(static_cast<int64_t>(i));
    graph_->add_output(outputs[i].src);
  }
}

Expected<LoweredModel> lowerModel(const Model& model, const OmWriteOptions& options,
                                  std::vector<lowering::Refusal>* refusals) {
  if (refusals) refusals->clear();
  const SocInfo* soc = findSoc(options.socVersion);
  if (!soc) return unknownSocError(options.socVersion);
  if (!model.graph)
    return Status(ErrorCode::EmptyGraph, "model has no graph", "import a model first");
  Lowerer lowerer(model, options, soc);
  auto lowered = lowerer.run(refusals);
  if (!lowered) return lowered;
  legalizeDTypes(*lowered);
  if (auto s = applyHeavyFormats(*lowered); !s) return s;
  agreeEdgeFormats(*lowered);
  return lowered;
}

} // namespace kiln::om

namespace kiln {

std::string omUnsupportedReason(const Node& node, const std::string& socVersion, int64_t opset) {
  const SocInfo* soc = findSoc(socVersion);
  if (!soc) return fmt::format("--soc_version '{}' names no chip kiln knows", socVersion);
  return om::nodeReason(node, lowering::OpContext{opset, socVersion}, soc).first;
}

} // namespace kiln
