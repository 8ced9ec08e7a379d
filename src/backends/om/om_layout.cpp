// The last touches before a lowered model is written: what ATC's model builder and serializer do
// to every ModelDef, so tools that read ATC's files read kiln's the same way.
//  - every TensorDescriptor carries `shape`, an empty one for a scalar (readers call it blindly);
//  - tensor `size` is padded the way GraphEngine pads memory: rounded up to 32 bytes plus 32;
//  - WEIGHTS_DATA starts constants at byte 512, each on a 512-byte boundary, and ends 32 bytes
//    past the last one rounded up to 512;
//  - ModelDef.custom_version and the header's platform_version hold the platform version;
//  - each op names its inputs and outputs (`_input_name_key` / `_input_name_value`, and the
//    output pair), the IR port names where kiln knows them, GraphEngine's generic names otherwise.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "om_internal.h"

namespace kiln::om {
namespace {

using ge::proto::AttrDef;
using ge::proto::OpDef;
using ge::proto::TensorDescriptor;

constexpr int64_t kMemPad = 32;
constexpr uint64_t kWeightsStart = 512;
constexpr uint64_t kWeightsBoundary = 512;

int64_t paddedSize(int64_t bytes) { return (bytes + kMemPad - 1) / kMemPad * kMemPad + kMemPad; }
uint64_t roundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

void finishDesc(TensorDescriptor* d) {
  d->mutable_shape(); // present even with no dims (a scalar)
  if (d->size() > 0) d->set_size(paddedSize(d->size()));
}

template <typename Fn> void forEachDesc(OpDef& op, Fn fn) {
  for (TensorDescriptor& d : *op.mutable_input_desc())
    fn(&d);
  for (TensorDescriptor& d : *op.mutable_output_desc())
    fn(&d);
  for (auto& [name, attr] : *op.mutable_attr()) {
    if (attr.value_case() == AttrDef::kT) fn(attr.mutable_t()->mutable_desc());
    if (attr.value_case() == AttrDef::kTd) fn(attr.mutable_td());
  }
}

const std::map<std::string, OmPorts>& irPorts() {
  static const std::map<std::string, OmPorts> table = [] {
    std::map<std::string, OmPorts> t;
    for (const char* unary : {"Relu",          "Relu6",     "Sigmoid",    "Tanh",
                              "Abs",           "Exp",       "Log",        "Sqrt",
                              "Rsqrt",         "Neg",       "Floor",      "Ceil",
                              "Round",         "Sign",      "Reciprocal", "Erf",
                              "Sin",           "Cos",       "Tan",        "Asin",
                              "Acos",          "Atan",      "Sinh",       "Cosh",
                              "Asinh",         "Acosh",     "Atanh",      "Softplus",
                              "Softsign",      "HardSwish", "Mish",       "Elu",
                              "Celu",          "Selu",      "LeakyRelu",  "ThresholdedRelu",
                              "Gelu",          "Swish",     "LogicalNot", "IsNan",
                              "IsInf",         "Cast",      "Identity",   "Muls",
                              "Adds",          "Square",    "SoftmaxV2",  "MaxPool",
                              "MaxPoolV3",     "AvgPool",   "AvgPoolV2",  "MaxPool3D",
                              "AvgPool3D",     "Tril",      "Triu",       "GlobalAveragePool",
                              "GlobalMaxPool", "LRN",       "Flatten",    "SpaceToDepth",
                              "DepthToSpace",  "Shape",     "Size",       "NonZero",
                              "Invert",        "ZerosLike", "OnesLike"})
      t[unary] = {{"x"}, {"y"}};
    for (const char* binary :
         {"Add",      "Sub",          "Mul",        "RealDiv",    "Div",      "Pow",
          "Maximum",  "Minimum",      "Equal",      "NotEqual",   "Less",     "LessEqual",
          "Greater",  "GreaterEqual", "LogicalAnd", "LogicalOr",  "FloorMod", "Mod",
          "FloorDiv", "BitwiseAnd",   "BitwiseOr",  "BitwiseXor", "Xlogy",    "SquaredDifference",
          "Atan2",    "TruncateDiv"})
      t[binary] = {{"x1", "x2"}, {"y"}};
    for (const char* reduce : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"})
      t[reduce] = {{"x", "axes"}, {"y"}};
    for (const char* shift : {"LeftShift", "RightShift"})
      t[shift] = {{"x", "y"}, {"z"}};
    for (const char* scatter : {"TensorScatterUpdate", "TensorScatterAdd"})
      t[scatter] = {{"x", "indices", "updates"}, {"y"}};
    for (const char* deconv : {"Conv2DTranspose", "Conv3DTranspose"})
      t[deconv] = {{"input_size", "x", "filter", "bias", "offset_w"}, {"y"}};
    t["LogSoftmaxV2"] = {{"logits"}, {"logsoftmax"}};
    t["HardSigmoid"] = {{"input_x"}, {"output_y"}};
    t["Resize"] = {{"x", "roi", "scales", "sizes"}, {"y"}};
    t["ArgMin"] = {{"x", "dimension"}, {"y"}};
    t["NonMaxSuppressionV7"] = {
        {"boxes", "scores", "max_output_size", "iou_threshold", "score_threshold", "index_id"},
        {"selected_indices"}};
    t["GridSampler2D"] = {{"x", "grid"}, {"y"}};
    t["ScatterElements"] = {{"data", "indices", "updates"}, {"y"}};
    t["ReverseSequence"] = {{"x", "seq_lengths"}, {"y"}};
    t["InstanceNorm"] = {{"x", "gamma", "beta"}, {"y", "mean", "variance"}};
    t["Einsum"] = {{"x*"}, {"y"}};
    t["While"] = {{"input*"}, {"output*"}};
    t["If"] = {{"cond", "input*"}, {"output*"}};
    t["Case"] = {{"branch_index", "input*"}, {"output*"}};
    t["Data"] = {{"x"}, {"y"}};
    t["Const"] = {{}, {"y"}};
    t["NetOutput"] = {{"x*"}, {}};
    t["AddN"] = {{"x*"}, {"y"}};
    t["ConcatD"] = {{"x*"}, {"y"}};
    t["Conv2D"] = {{"x", "filter", "bias", "offset_w"}, {"y"}};
    t["Conv3D"] = {{"x", "filter", "bias", "offset_w"}, {"y"}};
    t["DepthwiseConv2D"] = {{"x", "filter", "bias", "offset_w"}, {"y"}};
    t["MatMul"] = {{"x1", "x2", "bias"}, {"y"}};
    t["MatMulV2"] = {{"x1", "x2", "bias", "offset_w"}, {"y"}};
    t["BatchMatMul"] = {{"x1", "x2", "bias"}, {"y"}};
    t["BatchMatMulV2"] = {{"x1", "x2", "bias", "offset_w"}, {"y"}};
    t["Reshape"] = {{"x", "shape"}, {"y"}};
    t["Transpose"] = {{"x", "perm"}, {"y"}};
    t["GatherV2"] = {{"x", "indices", "axis"}, {"y"}};
    t["GatherElements"] = {{"x", "index"}, {"y"}};
    t["GatherNd"] = {{"x", "indices"}, {"y"}};
    t["Tile"] = {{"x", "multiples"}, {"y"}};
    t["Expand"] = {{"x", "shape"}, {"y"}};
    t["Select"] = {{"condition", "x1", "x2"}, {"y"}};
    t["SelectV2"] = {{"condition", "then", "else"}, {"result"}};
    t["ClipByValue"] = {{"x", "clip_value_min", "clip_value_max"}, {"y"}};
    t["PRelu"] = {{"x", "weight"}, {"y"}};
    t["Squeeze"] = {{"x"}, {"y"}};
    t["Unsqueeze"] = {{"x"}, {"y"}};
    t["SqueezeV3"] = {{"x", "axes"}, {"y"}};
    t["UnsqueezeV3"] = {{"x", "axes"}, {"y"}};
    t["Range"] = {{"start", "limit", "delta"}, {"y"}};
    t["Fill"] = {{"dims", "value"}, {"y"}};
    t["TransData"] = {{"src"}, {"dst"}};
    t["BatchNorm"] = {{"x", "scale", "offset", "mean", "variance"},
                      {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2",
                       "reserve_space_3"}};
    t["LayerNorm"] = {{"x", "gamma", "beta"}, {"y", "mean", "variance"}};
    t["TopKV2"] = {{"x", "k"}, {"values", "indices"}};
    t["ArgMaxV2"] = {{"x", "dimension"}, {"y"}};
    t["Cumsum"] = {{"x", "axis"}, {"y"}};
    t["OneHot"] = {{"x", "depth", "on_value", "off_value"}, {"y"}};
    t["ReverseV2"] = {{"x", "axis"}, {"y"}};
    t["StridedSliceV2"] = {{"x", "begin", "end", "axes", "strides"}, {"y"}};
    t["PadV3"] = {{"x", "paddings", "constant_values"}, {"y"}};
    t["SplitVD"] = {{"x"}, {"y*"}};
    t["SplitV"] = {{"x", "size_splits", "split_dim"}, {"y*"}};
    return t;
  }();
  return table;
}

std::vector<std::string> portNames(const std::vector<std::string>* ir, size_t count,
                                   const char* generic) {
  std::vector<std::string> names;
  for (size_t i = 0; i < count; ++i) {
    if (ir && !ir->empty() && ir->back().back() == '*' && i + 1 >= ir->size()) {
      const std::string& stem = ir->back();
      names.push_back(fmt::format("{}{}", stem.substr(0, stem.size() - 1), i + 1 - ir->size()));
    } else if (ir && i < ir->size()) {
      names.push_back((*ir)[i]);
    } else {
      names.push_back(fmt::format("{}{}", generic, i));
    }
  }
  return names;
}

bool hasDynamicPort(const std::vector<std::string>& ports) {
  return std::any_of(ports.begin(), ports.end(),
                     [](const std::string& p) { return p.back() == '*'; });
}

// Absent optional inputs leave the op, as GraphEngine's own files show them: an op with fixed IR
// ports lists only the inputs it has and its name map says which ports those are (a placeholder in
// the middle fails the IR's type check); other ops keep inner placeholders (entries and descs stay
// index-aligned) and lose trailing ones. Returns each kept input's port slot.
std::vector<size_t> dropAbsentInputs(OpDef& op, const OmPorts* ports) {
  std::vector<std::string> data, control;
  for (const std::string& in : op.input())
    (isControlInput(in) ? control : data).push_back(in);
  std::vector<size_t> slots(data.size());
  for (size_t i = 0; i < slots.size(); ++i)
    slots[i] = i;
  if (op.type() == "Data" || static_cast<size_t>(op.input_desc_size()) != data.size()) return slots;
  auto absent = [&](size_t i) {
    return data[i].empty() && isPlaceholderDesc(op.input_desc(static_cast<int>(i)));
  };
  const bool named = ports && !hasDynamicPort(ports->inputs) && data.size() <= ports->inputs.size();
  size_t end = data.size();
  while (end > 0 && absent(end - 1))
    --end;
  std::vector<size_t> kept;
  for (size_t i = 0; i < end; ++i)
    if (!named || !absent(i)) kept.push_back(i);
  if (kept.size() == data.size()) return slots;
  google::protobuf::RepeatedPtrField<TensorDescriptor> descs;
  op.clear_input();
  for (size_t i : kept) {
    op.add_input(data[i]);
    *descs.Add() = op.input_desc(static_cast<int>(i));
  }
  for (const std::string& c : control)
    op.add_input(c);
  op.mutable_input_desc()->Swap(&descs);
  return kept;
}

void nameIndexAttrs(OpDef& op) {
  const OmPorts* ports = irPortsOf(op.type());
  const std::vector<size_t> slots = dropAbsentInputs(op, ports);
  auto put = [&](const char* keyAttr, const char* valueAttr,
                 const std::vector<std::string>& names) {
    if (names.empty()) return;
    std::vector<int64_t> indices(names.size());
    for (size_t i = 0; i < names.size(); ++i)
      indices[i] = static_cast<int64_t>(i);
    (*op.mutable_attr())[keyAttr] = attrStrings(names);
    (*op.mutable_attr())[valueAttr] = attrInts(indices);
  };
  std::vector<std::string> inputNames;
  if (ports && !hasDynamicPort(ports->inputs) && op.type() != "Data") {
    for (size_t slot : slots)
      inputNames.push_back(slot < ports->inputs.size() ? ports->inputs[slot]
                                                       : fmt::format("__input{}", slot));
  } else {
    inputNames = portNames(ports ? &ports->inputs : nullptr, slots.size(), "__input");
  }
  put("_input_name_key", "_input_name_value", inputNames);
  put("_output_name_key", "_output_name_value",
      portNames(ports ? &ports->outputs : nullptr, static_cast<size_t>(op.output_desc_size()),
                "__output"));
}

void relayWeights(LoweredModel& model) {
  if (model.weights.empty()) return;
  struct Stored {
    std::vector<TensorDescriptor*> descs;
    uint64_t offset = 0, size = 0;
  };
  std::map<uint64_t, Stored> byOffset; // constants may share bytes only if they share an offset
  for (auto& g : *model.modelDef.mutable_graph())
    for (OpDef& op : *g.mutable_op()) {
      if (op.type() != "Const" || op.output_desc_size() == 0) continue;
      TensorDescriptor* out = op.mutable_output_desc(0);
      Stored& s = byOffset[static_cast<uint64_t>(out->data_offset())];
      s.offset = static_cast<uint64_t>(out->data_offset());
      s.size = std::max<uint64_t>(s.size, static_cast<uint64_t>(out->weight_size()));
      s.descs.push_back(out);
      auto value = op.mutable_attr()->find("value");
      if (value != op.mutable_attr()->end() && value->second.value_case() == AttrDef::kT)
        s.descs.push_back(value->second.mutable_t()->mutable_desc());
    }
  // Offsets only: the bytes stay with their sources until the file is written.
  WeightsLayout laid;
  uint64_t end = kWeightsStart;
  for (auto& [old, s] : byOffset) {
    uint64_t at = roundUp(end, kWeightsBoundary);
    if (s.size)
      if (auto it = model.weights.pieces.find(old); it != model.weights.pieces.end()) {
        WeightSource source = it->second;
        source.size = s.size; // the descriptors' size: zeros past the source when longer
        laid.pieces[at] = std::move(source);
      }
    for (TensorDescriptor* d : s.descs)
      d->set_data_offset(static_cast<int64_t>(at));
    end = at + s.size;
  }
  laid.size = roundUp(end + kMemPad, kWeightsBoundary);
  model.weights = std::move(laid);
}

} // namespace

void fillPlaceholderDesc(TensorDescriptor* d) {
  d->set_dtype(ge::proto::DT_UNDEFINED);
  d->set_layout("RESERVED");
  d->mutable_shape();
  auto& attrs = *d->mutable_attr();
  attrs["format_for_int"] = attrI(formatFromName("RESERVED"));
  attrs["origin_format"] = attrS("RESERVED");
  attrs["origin_format_for_int"] = attrI(formatFromName("RESERVED"));
}

bool isPlaceholderDesc(const TensorDescriptor& d) {
  return d.dtype() == ge::proto::DT_UNDEFINED && d.layout() == "RESERVED";
}

const OmPorts* irPortsOf(const std::string& opType) {
  auto it = irPorts().find(opType);
  return it == irPorts().end() ? nullptr : &it->second;
}

std::optional<OpDef> withPortSlots(const OpDef& op) {
  const OmPorts* ports = irPortsOf(op.type());
  if (!ports || hasDynamicPort(ports->inputs) || op.type() == "Data") return std::nullopt;
  const AttrDef* keys = findAttr(op, "_input_name_key");
  const AttrDef* values = findAttr(op, "_input_name_value");
  if (!keys || !values || !keys->has_list() || !values->has_list()) return std::nullopt;
  std::vector<std::string> data, control;
  for (const std::string& in : op.input())
    (isControlInput(in) ? control : data).push_back(in);
  const auto& names = keys->list().s();
  const auto& indices = values->list().i();
  if (names.size() != indices.size() || static_cast<size_t>(names.size()) != data.size() ||
      op.input_desc_size() != names.size())
    return std::nullopt;
  // Entry k (desc k) is the port named at index k; a port nobody names is absent.
  std::vector<int> entryOfSlot(ports->inputs.size(), -1);
  bool moved = false;
  for (int k = 0; k < names.size(); ++k) {
    auto port = std::find(ports->inputs.begin(), ports->inputs.end(), names.Get(k));
    const int64_t entry = indices.Get(k);
    if (port == ports->inputs.end() || entry < 0 || entry >= names.size()) return std::nullopt;
    const size_t slot = static_cast<size_t>(port - ports->inputs.begin());
    if (entryOfSlot[slot] != -1) return std::nullopt;
    entryOfSlot[slot] = static_cast<int>(entry);
    moved = moved || slot != static_cast<size_t>(entry);
  }
  if (!moved) return std::nullopt;
  OpDef slotted = op;
  slotted.clear_input();
  slotted.clear_input_desc();
  size_t last = 0;
  for (size_t slot = 0; slot < entryOfSlot.size(); ++slot)
    if (entryOfSlot[slot] >= 0) last = slot + 1;
  for (size_t slot = 0; slot < last; ++slot) {
    const int entry = entryOfSlot[slot];
    slotted.add_input(entry >= 0 ? data[static_cast<size_t>(entry)] : std::string());
    TensorDescriptor* d = slotted.add_input_desc();
    if (entry >= 0)
      *d = op.input_desc(entry);
    else
      fillPlaceholderDesc(d);
  }
  for (const std::string& c : control)
    slotted.add_input(c);
  return slotted;
}

void layOutAsAtc(LoweredModel& model) {
  relayWeights(model);
  model.modelDef.set_custom_version(kPlatformVersion);
  for (auto& g : *model.modelDef.mutable_graph())
    for (OpDef& op : *g.mutable_op()) {
      forEachDesc(op, finishDesc);
      nameIndexAttrs(op);
    }
}

} // namespace kiln::om
