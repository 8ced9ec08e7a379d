// Lowering ONNX-semantics IR to MindSpore Lite .ms ops (ms.md §4.5, §4.6, §5): layouts, weights,
// attribute tables, fused activations and weight-quant parameters.
#include "ms_lower.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "kiln/ir/constant.h"
#include "kiln_proto/ms_model_generated.h"
#include "ms_type_ids.h"

namespace kiln::ms {

namespace {

namespace fb = kiln::msfb;
using FBB = flatbuffers::FlatBufferBuilder;

// ONNX ops with an .ms lowering (the dispatch table in Lowering::lowerNode matches this list).
const std::set<std::string>& loweredOps() {
  static const std::set<std::string> ops = {"Abs",
                                            "Add",
                                            "And",
                                            "ArgMax",
                                            "ArgMin",
                                            "AveragePool",
                                            "BatchNormalization",
                                            "Cast",
                                            "Ceil",
                                            "Clip",
                                            "Concat",
                                            "Constant",
                                            "ConstantOfShape",
                                            "Conv",
                                            "ConvTranspose",
                                            "Cos",
                                            "CumSum",
                                            "DepthToSpace",
                                            "DequantizeLinear",
                                            "Div",
                                            "Dropout",
                                            "Elu",
                                            "Equal",
                                            "Erf",
                                            "Exp",
                                            "Expand",
                                            "Flatten",
                                            "Floor",
                                            "Gather",
                                            "GatherND",
                                            "Gelu",
                                            "Gemm",
                                            "GlobalAveragePool",
                                            "GlobalMaxPool",
                                            "Greater",
                                            "GreaterOrEqual",
                                            "HardSigmoid",
                                            "HardSwish",
                                            "Identity",
                                            "InstanceNormalization",
                                            "LRN",
                                            "LayerNormalization",
                                            "LeakyRelu",
                                            "Less",
                                            "LessOrEqual",
                                            "Log",
                                            "LogSoftmax",
                                            "LpNormalization",
                                            "MatMul",
                                            "Max",
                                            "MaxPool",
                                            "Min",
                                            "Mod",
                                            "Mul",
                                            "Neg",
                                            "Not",
                                            "Or",
                                            "PRelu",
                                            "Pad",
                                            "Pow",
                                            "Range",
                                            "Reciprocal",
                                            "ReduceL1",
                                            "ReduceL2",
                                            "ReduceMax",
                                            "ReduceMean",
                                            "ReduceMin",
                                            "ReduceProd",
                                            "ReduceSum",
                                            "ReduceSumSquare",
                                            "Relu",
                                            "Reshape",
                                            "Resize",
                                            "Round",
                                            "Shape",
                                            "Sigmoid",
                                            "Sin",
                                            "Size",
                                            "Slice",
                                            "Softmax",
                                            "Softplus",
                                            "SpaceToDepth",
                                            "Split",
                                            "Sqrt",
                                            "Squeeze",
                                            "Sub",
                                            "Sum",
                                            "Tanh",
                                            "Tile",
                                            "TopK",
                                            "Transpose",
                                            "Unsqueeze",
                                            "Upsample",
                                            "Where"};
  return ops;
}

enum class Layout { Onnx, Nhwc };

const std::vector<int64_t> kToNhwc = {0, 2, 3, 1}; // NCHW dims → NHWC dims
const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

// A constant as the lowering sees it: plain values, or integer codes with per-channel
// (scale, zero point) along `axis` from a DequantizeLinear the quantize-weights pass made.
struct Const {
  Tensor tensor;
  bool quantized = false;
  std::vector<float> scales;
  std::vector<int64_t> zeros;
  int64_t axis = 0;
  std::string name;
  // quantize-weights' bias correction: per-channel offsets added after dequantizing (the
  // QuantParam meanCorr); empty when none.
  std::vector<float> meanCorr;
};

std::vector<int64_t> intValues(const Tensor& t) {
  std::vector<int64_t> out;
  switch (t.dtype()) {
  case DType::Int64:
    return t.copyValues<int64_t>();
  case DType::Int32:
    for (int32_t v : t.copyValues<int32_t>())
      out.push_back(v);
    return out;
  case DType::Int16:
    for (int16_t v : t.copyValues<int16_t>())
      out.push_back(v);
    return out;
  case DType::Int8:
    for (int8_t v : t.copyValues<int8_t>())
      out.push_back(v);
    return out;
  case DType::UInt8:
    for (uint8_t v : t.copyValues<uint8_t>())
      out.push_back(v);
    return out;
  default:
    return out;
  }
}

std::optional<double> scalarValue(const Tensor& t) {
  if (t.elementCount() != 1) return std::nullopt;
  switch (t.dtype()) {
  case DType::Float32:
    return t.copyValues<float>()[0];
  case DType::Float64:
    return t.copyValues<double>()[0];
  case DType::Float16: {
    uint16_t h = t.copyValues<uint16_t>()[0];
    // IEEE half → float (normal, subnormal, inf/nan).
    uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float v;
    if (exp == 0)
      v = std::ldexp(static_cast<float>(mant), -24);
    else if (exp == 31)
      v = mant ? std::nanf("") : std::numeric_limits<float>::infinity();
    else
      v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
    return sign ? -v : v;
  }
  default: {
    auto ints = intValues(t);
    if (ints.size() == 1) return static_cast<double>(ints[0]);
    return std::nullopt;
  }
  }
}

// out[i] = in[perm[i]] on dims; data moved accordingly (any element size).
Tensor permuteTensor(const Tensor& t, const std::vector<int64_t>& perm) {
  const auto& dims = t.dims();
  const size_t rank = dims.size();
  std::vector<int64_t> outDims(rank);
  for (size_t i = 0; i < rank; ++i)
    outDims[i] = dims[static_cast<size_t>(perm[i])];
  const size_t elemSize = static_cast<size_t>(dtypeBits(t.dtype()) / 8);
  const uint64_t count = t.elementCount();
  std::vector<uint8_t> out(count * elemSize);
  std::vector<int64_t> inStrides(rank, 1);
  for (size_t i = rank; i-- > 1;)
    inStrides[i - 1] = inStrides[i] * dims[i];
  std::vector<int64_t> idx(rank, 0);
  const uint8_t* src = t.data();
  for (uint64_t o = 0; o < count; ++o) {
    int64_t offset = 0;
    for (size_t i = 0; i < rank; ++i)
      offset += idx[i] * inStrides[static_cast<size_t>(perm[i])];
    std::memcpy(out.data() + o * elemSize, src + static_cast<size_t>(offset) * elemSize, elemSize);
    for (size_t i = rank; i-- > 0;) {
      if (++idx[i] < outDims[i]) break;
      idx[i] = 0;
    }
  }
  return Tensor(t.dtype(), outDims, Buffer::owned(std::move(out)));
}

Tensor dequantize(const Const& c) {
  const auto& dims = c.tensor.dims();
  std::vector<int64_t> codes = intValues(c.tensor);
  int64_t inner = 1;
  for (size_t i = static_cast<size_t>(c.axis) + 1; i < dims.size(); ++i)
    inner *= dims[i];
  const int64_t channels = dims.empty() ? 1 : dims[static_cast<size_t>(c.axis)];
  std::vector<float> out(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) {
    size_t ch = c.scales.size() == 1
                    ? 0
                    : static_cast<size_t>((static_cast<int64_t>(i) / inner) % channels);
    int64_t zero = c.zeros.empty() ? 0 : c.zeros[c.zeros.size() == 1 ? 0 : ch];
    out[i] = static_cast<float>(codes[i] - zero) * c.scales[ch];
    if (!c.meanCorr.empty()) out[i] += c.meanCorr[ch];
  }
  return Tensor::fromValues<float>(DType::Float32, dims, out);
}

Tensor scaleFloat(const Tensor& t, double factor) {
  std::vector<float> v = t.copyValues<float>();
  for (float& x : v)
    x = static_cast<float>(x * factor);
  return Tensor::fromValues<float>(DType::Float32, t.dims(), v);
}

// Fused activation types (ms.md §4.6: the runtime fuses RELU and RELU6 only).
std::optional<int> fusableActivation(const Node& act) {
  if (act.opType() == "Relu") return fb::ActivationType_RELU;
  if (act.opType() != "Clip") return std::nullopt;
  // Constant bounds only; attributes before opset 11, inputs after.
  double lo = -std::numeric_limits<double>::infinity(), hi = -lo;
  if (const Attribute* a = act.attribute("min")) lo = a->asFloat();
  if (const Attribute* a = act.attribute("max")) hi = a->asFloat();
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

class Lowering {
 public:
  Lowering(const Model& model, const MsWriteOptions& options)
      : model_(model), graph_(*model.graph), options_(options), opset_(model.opsetVersion("")) {}

  Expected<MsGraph> run();

 private:
  struct Slots {
    std::optional<uint32_t> onnx, nhwc;
  };

  // --- errors
  template <typename... Args> Status bad(fmt::format_string<Args...> format, Args&&... args) {
    return Status(ErrorCode::MsLowerBadAttribute,
                  fmt::format("node '{}' ({}): {}", node_->name(), node_->opType(),
                              fmt::format(format, std::forward<Args>(args)...)),
                  "change the attribute in the exporter or keep this model on another target");
  }

  // --- values
  const Value* resolve(const Value* v) const {
    while (v) {
      auto it = alias_.find(v);
      if (it == alias_.end()) break;
      v = it->second;
    }
    return v;
  }
  std::optional<Const> constOf(const Value* v) const;
  int rankOf(const Value* v) const {
    v = resolve(v);
    if (auto c = constOf(v)) return static_cast<int>(c->tensor.dims().size());
    return v->shape().hasRank() ? static_cast<int>(v->shape().rank()) : -1;
  }
  std::optional<int64_t> dimOf(const Value* v, size_t i) const {
    v = resolve(v);
    if (auto c = constOf(v)) return c->tensor.dims()[i];
    if (!v->shape().hasRank() || i >= v->shape().rank() || !v->shape()[i].isStatic())
      return std::nullopt;
    return v->shape()[i].value();
  }
  std::optional<std::vector<int64_t>> staticShape(const Value* v) const {
    v = resolve(v);
    if (auto c = constOf(v)) return c->tensor.dims();
    if (!v->shape().hasRank() || !v->shape().isStatic()) return std::nullopt;
    return v->shape().staticDims();
  }
  bool availableNhwc(const Value* v) const {
    v = resolve(v);
    auto it = slots_.find(v);
    return it != slots_.end() && it->second.nhwc.has_value();
  }

  // --- tensors
  std::string uniqueName(const std::string& base) {
    std::string name = base.empty() ? std::string("tensor") : base;
    for (int i = 1; usedNames_.count(name); ++i)
      name = fmt::format("{}_{}", base, i);
    usedNames_.insert(name);
    return name;
  }
  uint32_t addTensor(MsTensor t) {
    t.name = uniqueName(t.name);
    out_.tensors.push_back(std::move(t));
    return static_cast<uint32_t>(out_.tensors.size() - 1);
  }
  // Gives tensor `id` the name `name`; a tensor already holding it is renamed out of the way.
  void claimName(uint32_t id, const std::string& name) {
    if (out_.tensors[id].name == name) return;
    for (auto& t : out_.tensors)
      if (t.name == name) t.name = uniqueName(name + "_0");
    out_.tensors[id].name = name;
    usedNames_.insert(name);
  }
  Expected<uint32_t> constTensor(const Tensor& t, const std::string& name, int format = 0);
  uint32_t intConst(const std::vector<int64_t>& values, const std::string& name,
                    std::optional<std::vector<int32_t>> dims = std::nullopt) {
    std::vector<int32_t> v;
    for (int64_t x : values)
      v.push_back(static_cast<int32_t>(std::clamp<int64_t>(x, std::numeric_limits<int32_t>::min(),
                                                           std::numeric_limits<int32_t>::max())));
    MsTensor t;
    t.name = name;
    t.nodeType = kNodeValue;
    t.dataType = kTypeInt32;
    t.dims = dims ? *dims : std::vector<int32_t>{static_cast<int32_t>(v.size())};
    std::vector<uint8_t> bytes(v.size() * 4);
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
    t.data = Buffer::owned(std::move(bytes));
    return addTensor(std::move(t));
  }
  uint32_t floatConst(const std::vector<float>& values, const std::string& name,
                      std::vector<int32_t> dims) {
    MsTensor t;
    t.name = name;
    t.nodeType = kNodeValue;
    t.dataType = kTypeFloat32;
    t.dims = std::move(dims);
    std::vector<uint8_t> bytes(values.size() * 4);
    if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    t.data = Buffer::owned(std::move(bytes));
    return addTensor(std::move(t));
  }
  // The .ms tensor holding `v` in `layout` (Transposes inserted as needed).
  Expected<uint32_t> input(const Value* v, Layout layout);
  // A constant operand of a binary op whose other operand is NHWC: rank-padded and permuted.
  Expected<uint32_t> broadcastConstNhwc(const Const& c);
  Expected<uint32_t> output(const Value* v, Layout layout);
  // Weight tensor: permuted by `perm`; quantized codes stay integers when their channel axis lands
  // on `preferredDim` (the runtime's per-channel dequant axis), else they are dequantized.
  Expected<uint32_t> weightTensor(const Value* v, const std::vector<int64_t>& perm,
                                  int64_t preferredDim, int format, bool* quantized);

  // --- nodes
  void emit(fb::PrimitiveType type, AttrBuilder attrs, std::vector<uint32_t> inputs,
            std::vector<uint32_t> outputs, bool quantized = false) {
    MsNode n;
    n.name = node_ ? node_->name() : std::string();
    if (n.name.empty())
      n.name = fmt::format("{}_{}", fb::EnumNamePrimitiveType(type), out_.nodes.size());
    // Ops a node expands into get distinct names (`name`, `name_1`, ...).
    for (int i = 1; !nodeNames_.insert(n.name).second; ++i)
      n.name = fmt::format("{}_{}", node_ ? node_->name() : std::string("node"), i);
    n.primitiveType = static_cast<uint8_t>(type);
    n.attributes = std::move(attrs);
    n.inputs = std::move(inputs);
    n.outputs = std::move(outputs);
    n.quantType = quantized ? 4 : 0;
    out_.nodes.push_back(std::move(n));
  }
  template <typename T> static AttrBuilder empty() {
    return [](FBB& b) { return typename T::Builder(b).Finish().Union(); };
  }
  int activationFor(const Node& n) const {
    auto it = fusedActivation_.find(&n);
    return it == fusedActivation_.end() ? fb::ActivationType_NO_ACTIVATION : it->second.second;
  }
  // The value a node's output 0 stands for after fusion (the activation's output when fused).
  const Value* fusedOutput(const Node& n) const {
    auto it = fusedActivation_.find(&n);
    return it == fusedActivation_.end() ? n.output(0) : it->second.first->output(0);
  }

  Status lowerNode(const Node& n);
  Status lowerConv(const Node& n);
  Status lowerConvPool1d(const Node& n);
  uint32_t reshapeTensor(uint32_t from, const std::vector<int64_t>& dims, const std::string& name);
  uint32_t transposeTensor(uint32_t from, bool toNhwc, const std::string& name);
  Status lowerConvTranspose(const Node& n);
  Status lowerGemm(const Node& n);
  Status lowerMatMul(const Node& n);
  Status lowerPool(const Node& n);
  Status lowerActivation(const Node& n);
  Status lowerClipMinMax(const Node& n);
  Status lowerPReluMinMax(const Node& n);
  Expected<uint32_t> int32Input(const Value* v);
  Status lowerBinary(const Node& n);
  Status lowerVariadic(const Node& n);
  Status lowerUnary(const Node& n);
  Status lowerCast(const Node& n);
  Status lowerReshape(const Node& n);
  Status lowerFlatten(const Node& n);
  Status lowerSqueeze(const Node& n);
  Status lowerTranspose(const Node& n);
  Status lowerConcat(const Node& n);
  Status lowerSplit(const Node& n);
  Status lowerSlice(const Node& n);
  Status lowerGather(const Node& n);
  Status lowerPad(const Node& n);
  Status lowerResize(const Node& n);
  Status lowerReduce(const Node& n);
  Status lowerSoftmax(const Node& n);
  Status lowerArgMinMax(const Node& n);
  Status lowerNorm(const Node& n);
  Status lowerSpaceDepth(const Node& n);
  Status lowerMisc(const Node& n);

  std::optional<std::vector<int64_t>> intsOf(const Node& n, const char* attr, size_t input) const {
    if (const Attribute* a = n.attribute(attr)) return a->asInts();
    if (const Value* v = n.input(input)) {
      auto c = constOf(v);
      if (!c) return std::nullopt;
      return intValues(c->tensor);
    }
    return std::nullopt;
  }
  int64_t intAttr(const Node& n, const char* name, int64_t def) const {
    const Attribute* a = n.attribute(name);
    return a ? a->asInt() : def;
  }
  float floatAttr(const Node& n, const char* name, float def) const {
    const Attribute* a = n.attribute(name);
    return a ? a->asFloat() : def;
  }
  std::string stringAttr(const Node& n, const char* name, std::string def) const {
    const Attribute* a = n.attribute(name);
    return a ? a->asString() : def;
  }

  const Model& model_;
  const Graph& graph_;
  const MsWriteOptions& options_;
  int64_t opset_;
  MsGraph out_;
  const Node* node_ = nullptr;
  std::set<std::string> usedNames_;
  std::set<std::string> nodeNames_;
  std::unordered_map<const Value*, Slots> slots_;
  std::unordered_map<const Value*, const Value*> alias_;
  std::map<std::pair<const Value*, int>, uint32_t> constCache_;
  // producer → (activation node folded into it, ActivationType)
  std::unordered_map<const Node*, std::pair<const Node*, int>> fusedActivation_;
  std::set<const Node*> folded_;
  std::optional<uint32_t> permToNhwc_, permToNchw_;
};

std::optional<Const> Lowering::constOf(const Value* v) const {
  v = resolve(v);
  if (!v) return std::nullopt;
  // A graph input with an initializer (its default) is written as that constant: .ms inputs
  // carry no defaults, and callers feed only the inputs without one.
  if (v->isInitializer()) return Const{v->initializer(), false, {}, {}, 0, v->name(), {}};
  const Node* p = v->producer();
  if (!p) return std::nullopt;
  if (p->opType() == "Constant" && p->outputs().size() == 1) {
    // String constants have no .ms lowering.
    if (p->attribute("value_string") || p->attribute("value_strings")) return std::nullopt;
    auto value = constantNodeValue(*p);
    if (!value) return std::nullopt;
    return Const{*value, false, {}, {}, 0, v->name(), {}};
  }
  if (p->opType() == "Add" && p->inputs().size() == 2) {
    // A bias-corrected weight from quantize-weights: DequantizeLinear + per-channel offsets
    // shaped [1.., C, 1..] along the dequantize axis.
    auto base = constOf(p->input(0));
    if (!base || !base->quantized || !base->meanCorr.empty() || base->scales.size() < 2)
      return std::nullopt;
    auto offsets = constOf(p->input(1));
    if (!offsets || offsets->quantized || offsets->tensor.dtype() != DType::Float32)
      return std::nullopt;
    const auto& od = offsets->tensor.dims();
    const auto& wd = base->tensor.dims();
    if (od.size() != wd.size()) return std::nullopt;
    for (size_t i = 0; i < od.size(); ++i)
      if (od[i] != (static_cast<int64_t>(i) == base->axis ? wd[i] : 1)) return std::nullopt;
    base->meanCorr = offsets->tensor.copyValues<float>();
    return base;
  }
  if (p->opType() == "DequantizeLinear") {
    auto codes = constOf(p->input(0));
    auto scale = constOf(p->input(1));
    if (!codes || !scale || codes->quantized || scale->tensor.dtype() != DType::Float32)
      return std::nullopt;
    DType dt = codes->tensor.dtype();
    if (dt != DType::Int8 && dt != DType::Int16 && dt != DType::UInt8) return std::nullopt;
    Const c;
    c.tensor = codes->tensor;
    c.quantized = true;
    c.scales = scale->tensor.copyValues<float>();
    c.name = codes->name;
    if (const Value* zp = p->input(2)) {
      auto z = constOf(zp);
      if (!z) return std::nullopt;
      c.zeros = intValues(z->tensor);
    }
    const int64_t rank = static_cast<int64_t>(c.tensor.dims().size());
    int64_t axis = 1;
    if (const Attribute* a = p->attribute("axis")) axis = a->asInt();
    if (axis < 0) axis += rank;
    if (c.scales.size() != 1 &&
        (axis < 0 || axis >= rank ||
         c.tensor.dims()[static_cast<size_t>(axis)] != static_cast<int64_t>(c.scales.size())))
      return std::nullopt;
    c.axis = c.scales.size() == 1 ? 0 : axis;
    if (dt == DType::UInt8) { // stored as int8 with the zero point moved by 128
      std::vector<int64_t> vals = intValues(c.tensor);
      std::vector<int8_t> shifted(vals.size());
      for (size_t i = 0; i < vals.size(); ++i)
        shifted[i] = static_cast<int8_t>(vals[i] - 128);
      c.tensor = Tensor::fromValues<int8_t>(DType::Int8, c.tensor.dims(), shifted);
      for (auto& z : c.zeros)
        z -= 128;
      if (c.zeros.empty()) c.zeros.assign(c.scales.size(), -128);
    }
    return c;
  }
  return std::nullopt;
}

Expected<uint32_t> Lowering::constTensor(const Tensor& t, const std::string& name, int format) {
  auto type = typeIdOf(t.dtype());
  if (!type || t.dtype() == DType::String)
    return bad("constant '{}' has dtype {}, which .ms tensors do not hold", name,
               dtypeName(t.dtype()));
  MsTensor m;
  m.name = name;
  m.nodeType = kNodeValue;
  m.dataType = *type;
  m.format = format;
  for (int64_t d : t.dims()) {
    if (d <= 0)
      return bad("constant '{}' has an empty dimension; .ms constants need all dims > 0", name);
    m.dims.push_back(static_cast<int32_t>(d));
  }
  m.data = t.buffer() ? t.buffer() : Buffer::owned({});
  return addTensor(std::move(m));
}

Expected<uint32_t> Lowering::broadcastConstNhwc(const Const& c) {
  Tensor t = c.quantized ? dequantize(c) : c.tensor;
  const size_t rank = t.dims().size();
  if (rank == 0 || rank > 4) return constTensor(t, c.name);
  std::vector<int64_t> dims(4 - rank, 1);
  dims.insert(dims.end(), t.dims().begin(), t.dims().end());
  Tensor padded(t.dtype(), dims, t.buffer());
  return constTensor(permuteTensor(padded, kToNhwc), c.name + "_nhwc", kFormatNHWC);
}

Expected<uint32_t> Lowering::input(const Value* v, Layout layout) {
  v = resolve(v);
  if (auto c = constOf(v)) {
    const bool permute = layout == Layout::Nhwc && c->tensor.dims().size() == 4;
    auto key = std::make_pair(v, permute ? 1 : 0);
    auto it = constCache_.find(key);
    if (it != constCache_.end()) return it->second;
    Tensor t = c->quantized ? dequantize(*c) : c->tensor;
    auto id = permute ? constTensor(permuteTensor(t, kToNhwc), c->name + "_nhwc", kFormatNHWC)
                      : constTensor(t, c->name);
    if (!id) return id;
    constCache_[key] = *id;
    return *id;
  }
  auto it = slots_.find(v);
  if (it == slots_.end())
    return Status(ErrorCode::Internal, fmt::format("node '{}': input '{}' has no lowered tensor",
                                                   node_->name(), v->name()));
  Slots& s = it->second;
  if (layout == Layout::Onnx && s.onnx) return *s.onnx;
  if (layout == Layout::Nhwc && s.nhwc) return *s.nhwc;
  if (layout == Layout::Nhwc && rankOf(v) != 4) return *s.onnx; // only 4-D values change layout
  // Insert the Transpose that gives the other layout.
  const bool toNhwc = layout == Layout::Nhwc;
  uint32_t from = toNhwc ? *s.onnx : *s.nhwc;
  std::optional<uint32_t>& perm = toNhwc ? permToNhwc_ : permToNchw_;
  if (!perm) perm = intConst(toNhwc ? kToNhwc : kToNchw, toNhwc ? "perm_to_nhwc" : "perm_to_nchw");
  MsTensor t = out_.tensors[from];
  t.name = v->name() + (toNhwc ? "_nhwc" : "_nchw");
  t.format = toNhwc ? kFormatNHWC : kFormatNCHW;
  if (t.dims.size() == 4) {
    const auto& p = toNhwc ? kToNhwc : kToNchw;
    std::vector<int32_t> d(4);
    for (size_t i = 0; i < 4; ++i)
      d[i] = t.dims[static_cast<size_t>(p[i])];
    t.dims = d;
  }
  t.quantParams.clear();
  uint32_t to = addTensor(std::move(t));
  const Node* saved = node_;
  MsNode n;
  n.name = uniqueName(out_.tensors[to].name);
  n.primitiveType = fb::PrimitiveType_Transpose;
  n.attributes = empty<fb::Transpose>();
  n.inputs = {from, *perm};
  n.outputs = {to};
  out_.nodes.push_back(std::move(n));
  node_ = saved;
  (toNhwc ? s.nhwc : s.onnx) = to;
  return to;
}

Expected<uint32_t> Lowering::output(const Value* v, Layout layout) {
  if (layout == Layout::Nhwc && (!v->shape().hasRank() || v->shape().rank() != 4))
    layout = Layout::Onnx;
  MsTensor t;
  // Graph outputs keep their names on the ONNX-layout tensor (inserted at the end when needed).
  t.name = layout == Layout::Nhwc && v->isGraphOutput() ? v->name() + "_nhwc" : v->name();
  auto type = typeIdOf(v->dtype() == DType::Undefined ? DType::Float32 : v->dtype());
  if (!type)
    return bad("output '{}' has dtype {}, which .ms tensors do not hold", v->name(),
               dtypeName(v->dtype()));
  t.dataType = *type;
  t.nodeType = kNodeCNode;
  t.format = layout == Layout::Nhwc ? kFormatNHWC : kFormatNCHW;
  if (v->shape().hasRank()) {
    std::vector<int32_t> dims;
    for (const Dim& d : v->shape().dims())
      dims.push_back(d.isStatic() ? static_cast<int32_t>(d.value()) : -1);
    if (layout == Layout::Nhwc) {
      std::vector<int32_t> p(4);
      for (size_t i = 0; i < 4; ++i)
        p[i] = dims[static_cast<size_t>(kToNhwc[i])];
      dims = p;
    }
    t.dims = dims;
  }
  uint32_t id = addTensor(std::move(t));
  (layout == Layout::Nhwc ? slots_[v].nhwc : slots_[v].onnx) = id;
  return id;
}

Expected<uint32_t> Lowering::weightTensor(const Value* v, const std::vector<int64_t>& perm,
                                          int64_t preferredDim, int format, bool* quantized) {
  auto c = constOf(v);
  *quantized = false;
  if (!c) {
    // A weight computed at run time: the same layout change as an activation (KHWC = NHWC order).
    if (perm.empty()) return input(v, Layout::Onnx);
    if (perm == kToNhwc && rankOf(v) == 4) return input(v, Layout::Nhwc);
    return bad("input '{}' must be a constant (an initializer) for this .ms op", v->name());
  }
  const bool doPermute = !perm.empty() && perm.size() == c->tensor.dims().size();
  if (c->quantized) {
    int64_t newAxis = c->axis;
    if (doPermute)
      for (size_t i = 0; i < perm.size(); ++i)
        if (perm[i] == c->axis) newAxis = static_cast<int64_t>(i);
    if (c->scales.size() == 1 || newAxis == preferredDim) {
      Tensor codes = doPermute ? permuteTensor(c->tensor, perm) : c->tensor;
      auto id = constTensor(codes, c->name, format);
      if (!id) return id;
      MsTensor& t = out_.tensors[*id];
      t.isQuantizedWeight = true;
      t.dataType = codes.dtype() == DType::Int16 ? kTypeInt16 : kTypeInt8;
      int storageBits = codes.dtype() == DType::Int16 ? 16 : 8;
      int bits = options_.weightQuantBits > 0 ? options_.weightQuantBits : storageBits;
      if (bits > storageBits || (storageBits == 16 && bits <= 8))
        return bad("weight '{}' is stored as {}-bit codes but weightQuantBits is {}", c->name,
                   storageBits, bits);
      for (size_t ch = 0; ch < c->scales.size(); ++ch) {
        MsQuantParam q;
        q.scale = c->scales[ch];
        q.zeroPoint =
            static_cast<int32_t>(c->zeros.empty() ? 0 : c->zeros[c->zeros.size() == 1 ? 0 : ch]);
        q.numBits = bits;
        q.dstDtype = t.dataType;
        if (!c->meanCorr.empty()) q.meanCorr = c->meanCorr[ch];
        t.quantParams.push_back(q);
      }
      *quantized = true;
      return id;
    }
  }
  Tensor t = c->quantized ? dequantize(*c) : c->tensor;
  if (doPermute) t = permuteTensor(t, perm);
  return constTensor(t, c->name, format);
}

// ---------------------------------------------------------------------------------------------
// Op lowerings

std::vector<int64_t> spatialAttr(const Node& n, const char* name, size_t count, int64_t def) {
  const Attribute* a = n.attribute(name);
  if (!a) return std::vector<int64_t>(count, def);
  return a->asInts();
}

// ONNX pads [x1_begin, x2_begin, x1_end, x2_end] → .ms [top, bottom, left, right], resolving
// auto_pad SAME_* from static spatial sizes.
struct Padding {
  std::vector<int64_t> list; // top, bottom, left, right
  int mode = fb::PadMode_PAD;
};

std::optional<Padding> convPadding(const Node& n, const std::vector<int64_t>& inHW,
                                   const std::vector<int64_t>& kernel,
                                   const std::vector<int64_t>& strides,
                                   const std::vector<int64_t>& dilations, std::string* error) {
  Padding p;
  const std::string autoPad = n.attribute("auto_pad") ? n.attribute("auto_pad")->asString() : "";
  if (autoPad.empty() || autoPad == "NOTSET") {
    std::vector<int64_t> pads = spatialAttr(n, "pads", 4, 0);
    if (pads.size() != 4) {
      *error = fmt::format("pads {} (expected 4 values)", pads.size());
      return std::nullopt;
    }
    p.list = {pads[0], pads[2], pads[1], pads[3]};
    return p;
  }
  if (autoPad == "VALID") {
    p.list = {0, 0, 0, 0};
    p.mode = fb::PadMode_VALID;
    return p;
  }
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER") {
    *error = fmt::format("auto_pad '{}'", autoPad);
    return std::nullopt;
  }
  if (inHW.size() != 2 || inHW[0] < 0 || inHW[1] < 0) {
    if (autoPad == "SAME_UPPER") {
      p.mode = fb::PadMode_SAME;
      p.list = {0, 0, 0, 0};
      return p;
    }
    *error = "auto_pad SAME_LOWER with unknown spatial sizes";
    return std::nullopt;
  }
  for (size_t i = 0; i < 2; ++i) {
    int64_t out = (inHW[i] + strides[i] - 1) / strides[i];
    int64_t total =
        std::max<int64_t>(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - inHW[i]);
    int64_t small = total / 2, big = total - small;
    p.list.push_back(autoPad == "SAME_UPPER" ? small : big);
    p.list.push_back(autoPad == "SAME_UPPER" ? big : small);
  }
  return p;
}

std::vector<int64_t> inputHW(const Value* v) {
  if (!v->shape().hasRank() || v->shape().rank() != 4) return {};
  std::vector<int64_t> hw;
  for (size_t i = 2; i < 4; ++i)
    hw.push_back(v->shape()[i].isStatic() ? v->shape()[i].value() : -1);
  return hw;
}

uint32_t Lowering::reshapeTensor(uint32_t from, const std::vector<int64_t>& dims,
                                 const std::string& name) {
  uint32_t shape = intConst(dims, name + "_shape");
  MsTensor t = out_.tensors[from];
  t.name = name;
  t.nodeType = kNodeCNode;
  t.data.reset();
  t.quantParams.clear();
  t.format = kFormatNCHW;
  t.dims.clear();
  for (int64_t d : dims)
    t.dims.push_back(static_cast<int32_t>(d));
  uint32_t to = addTensor(std::move(t));
  emit(fb::PrimitiveType_Reshape, empty<fb::Reshape>(), {from, shape}, {to});
  return to;
}

uint32_t Lowering::transposeTensor(uint32_t from, bool toNhwc, const std::string& name) {
  std::optional<uint32_t>& perm = toNhwc ? permToNhwc_ : permToNchw_;
  if (!perm) perm = intConst(toNhwc ? kToNhwc : kToNchw, toNhwc ? "perm_to_nhwc" : "perm_to_nchw");
  MsTensor t = out_.tensors[from];
  t.name = name;
  t.nodeType = kNodeCNode;
  t.data.reset();
  t.quantParams.clear();
  t.format = toNhwc ? kFormatNHWC : kFormatNCHW;
  if (t.dims.size() == 4) {
    const auto& p = toNhwc ? kToNhwc : kToNchw;
    std::vector<int32_t> d(4);
    for (size_t i = 0; i < 4; ++i)
      d[i] = t.dims[static_cast<size_t>(p[i])];
    t.dims = d;
  }
  uint32_t to = addTensor(std::move(t));
  emit(fb::PrimitiveType_Transpose, empty<fb::Transpose>(), {from, *perm}, {to});
  return to;
}

// 1-D Conv / MaxPool / AveragePool over [N, C, L]: viewed as [N, C, 1, L] and run as the 2-D op
// with a 1×k window (the converter maps 1-D convolutions the same way, ms.md §5.2).
Status Lowering::lowerConvPool1d(const Node& n) {
  const std::string& op = n.opType();
  auto inShape = staticShape(n.input(0));
  auto outShape = staticShape(n.output(0));
  if (!inShape || inShape->size() != 3 || !outShape)
    return bad("1-D {} needs static input and output shapes", op);
  const std::string autoPad = stringAttr(n, "auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID")
    return bad("auto_pad '{}' on a 1-D {}", autoPad, op);
  auto one = [&](const char* name, int64_t def) {
    const Attribute* a = n.attribute(name);
    return a && !a->asInts().empty() ? a->asInts()[0] : def;
  };
  std::vector<int64_t> pads =
      autoPad == "VALID" ? std::vector<int64_t>{0, 0} : spatialAttr(n, "pads", 2, 0);
  if (pads.size() != 2) return bad("pads need 2 values");
  const std::vector<int64_t> strides = {1, one("strides", 1)}, dilations = {1, one("dilations", 1)};
  const std::vector<int64_t> padList = {0, 0, pads[0], pads[1]};
  const std::string base = n.output(0)->name();
  auto x = input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  uint32_t x4 = reshapeTensor(*x, {(*inShape)[0], (*inShape)[1], 1, (*inShape)[2]}, base + "_in4d");
  uint32_t xn = transposeTensor(x4, true, base + "_in4d_nhwc");
  MsTensor y;
  y.name = base + "_out4d_nhwc";
  auto type = typeIdOf(n.output(0)->dtype());
  y.dataType = type ? *type : kTypeFloat32;
  y.format = kFormatNHWC;
  y.dims = {static_cast<int32_t>((*outShape)[0]), 1, static_cast<int32_t>((*outShape)[2]),
            static_cast<int32_t>((*outShape)[1])};
  uint32_t yn = addTensor(std::move(y));
  const int act = activationFor(n);
  if (op == "Conv") {
    auto w = constOf(n.input(1));
    auto wShape = staticShape(n.input(1));
    if (!wShape || wShape->size() != 3) return bad("weight of unknown shape or rank");
    const auto wd = *wShape;
    Expected<uint32_t> wid = 0u;
    if (w) {
      Tensor wt = w->quantized ? dequantize(*w) : w->tensor;
      Tensor w4(wt.dtype(), {wd[0], wd[1], 1, wd[2]}, wt.buffer());
      wid = constTensor(permuteTensor(w4, kToNhwc), w->name + "_khwc", kFormatKHWC);
    } else {
      // A run-time weight takes the same view and layout change as the data.
      auto wv = input(n.input(1), Layout::Onnx);
      if (!wv) return wv.status();
      const std::string wn = n.input(1)->name();
      wid = transposeTensor(reshapeTensor(*wv, {wd[0], wd[1], 1, wd[2]}, wn + "_4d"), true,
                            wn + "_khwc");
    }
    if (!wid) return wid.status();
    std::vector<uint32_t> ins = {xn, *wid};
    if (const Value* b = n.input(2)) {
      auto bt = input(b, Layout::Onnx);
      if (!bt) return bt.status();
      ins.push_back(*bt);
    }
    const int64_t group = intAttr(n, "group", 1), outCh = wd[0], inCh = wd[1] * group;
    const std::vector<int64_t> kernel = {1, wd[2]};
    emit(fb::PrimitiveType_Conv2DFusion,
         [=](FBB& b) {
           return fb::CreateConv2DFusion(b, fb::Format_NHWC, b.CreateVector(kernel),
                                         b.CreateVector(strides), b.CreateVector(dilations),
                                         fb::PadMode_PAD, b.CreateVector(padList), 0, group, inCh,
                                         outCh, static_cast<fb::ActivationType>(act))
               .Union();
         },
         ins, {yn});
  } else {
    if (dilations[1] != 1) return bad("dilations [{}]", dilations[1]);
    if (n.outputs().size() > 1 && n.output(1) &&
        (n.output(1)->hasUses() || n.output(1)->isGraphOutput()))
      return bad("the Indices output of MaxPool");
    const bool isMax = op == "MaxPool", ceil = intAttr(n, "ceil_mode", 0) != 0;
    const bool anyPad = pads[0] || pads[1];
    if (pads[0] > 50 || pads[1] > 50) return bad("pad over 50");
    if (!isMax && anyPad && (intAttr(n, "count_include_pad", 0) != 0 || ceil))
      return bad("count_include_pad/ceil_mode with padding");
    const std::vector<int64_t> kernel = {1, one("kernel_shape", 1)};
    emit(isMax ? fb::PrimitiveType_MaxPoolFusion : fb::PrimitiveType_AvgPoolFusion,
         [=](FBB& b) {
           auto k = b.CreateVector(kernel), st = b.CreateVector(strides),
                p = b.CreateVector(padList);
           const auto rm = ceil ? fb::RoundMode_CEIL : fb::RoundMode_FLOOR;
           const auto a = static_cast<fb::ActivationType>(act);
           if (isMax)
             return fb::CreateMaxPoolFusion(b, k, st, p, fb::PadMode_PAD, rm, fb::Format_NHWC,
                                            false, a)
                 .Union();
           return fb::CreateAvgPoolFusion(b, k, st, p, fb::PadMode_PAD, rm, fb::Format_NHWC, false,
                                          a)
               .Union();
         },
         {xn}, {yn});
  }
  uint32_t y4 = transposeTensor(yn, false, base + "_out4d");
  auto out = output(fusedOutput(n), Layout::Onnx);
  if (!out) return out.status();
  uint32_t shape = intConst(*outShape, base + "_shape");
  emit(fb::PrimitiveType_Reshape, empty<fb::Reshape>(), {y4, shape}, {*out});
  return Status::ok();
}

Status Lowering::lowerConv(const Node& n) {
  if (rankOf(n.input(0)) == 3) return lowerConvPool1d(n);
  auto wShape = staticShape(n.input(1));
  if (!wShape) return bad("weight '{}' has an unknown shape", n.input(1)->name());
  const auto& wd = *wShape;
  if (wd.size() != 4)
    return bad("{}-D convolution (weight rank {}); .ms Conv2DFusion is 2-D only",
               wd.size() >= 2 ? wd.size() - 2 : 0, wd.size());
  auto kernel = std::vector<int64_t>{wd[2], wd[3]};
  if (const Attribute* k = n.attribute("kernel_shape"))
    if (k->asInts() != kernel) return bad("kernel_shape differs from the weight's dims");
  auto strides = spatialAttr(n, "strides", 2, 1);
  auto dilations = spatialAttr(n, "dilations", 2, 1);
  if (strides.size() != 2 || dilations.size() != 2) return bad("strides/dilations need 2 values");
  std::string err;
  auto pad = convPadding(n, inputHW(resolve(n.input(0))), kernel, strides, dilations, &err);
  if (!pad) return bad("{}", err);
  const int64_t group = intAttr(n, "group", 1);
  const int64_t outCh = wd[0], inCh = wd[1] * group;
  auto x = input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  bool quantized = false;
  auto wt = weightTensor(n.input(1), kToNhwc, 0, kFormatKHWC, &quantized);
  if (!wt) return wt.status();
  std::vector<uint32_t> ins = {*x, *wt};
  if (const Value* b = n.input(2)) {
    auto bt = input(b, Layout::Onnx);
    if (!bt) return bt.status();
    ins.push_back(*bt);
  }
  auto y = output(fusedOutput(n), Layout::Nhwc);
  if (!y) return y.status();
  const int act = activationFor(n);
  const auto padList = pad->list;
  const int padMode = pad->mode;
  emit(
      fb::PrimitiveType_Conv2DFusion,
      [=](FBB& b) {
        return fb::CreateConv2DFusion(b, fb::Format_NHWC, b.CreateVector(kernel),
                                      b.CreateVector(strides), b.CreateVector(dilations),
                                      static_cast<fb::PadMode>(padMode), b.CreateVector(padList), 0,
                                      group, inCh, outCh, static_cast<fb::ActivationType>(act))
            .Union();
      },
      ins, {*y}, quantized);
  return Status::ok();
}

Status Lowering::lowerConvTranspose(const Node& n) {
  auto wShape = staticShape(n.input(1));
  if (!wShape) return bad("weight '{}' has an unknown shape", n.input(1)->name());
  const auto& wd = *wShape;
  if (wd.size() != 4) return bad("{}-D transposed convolution; .ms supports 2-D", wd.size() - 2);
  std::vector<int64_t> kernel = {wd[2], wd[3]};
  auto strides = spatialAttr(n, "strides", 2, 1);
  auto dilations = spatialAttr(n, "dilations", 2, 1);
  auto outPad = spatialAttr(n, "output_padding", 2, 0);
  const int64_t group = intAttr(n, "group", 1);
  const int64_t inCh = wd[0], outCh = wd[1] * group;
  auto hw = inputHW(resolve(n.input(0)));
  std::vector<int64_t> pads = spatialAttr(n, "pads", 4, 0);
  const std::string autoPad = stringAttr(n, "auto_pad", "NOTSET");
  const Attribute* outShape = n.attribute("output_shape");
  if (outShape || (autoPad != "NOTSET" && autoPad != "VALID")) {
    std::vector<int64_t> target;
    if (outShape) {
      target = outShape->asInts();
      if (target.size() > 2) target.erase(target.begin(), target.end() - 2);
    } else {
      for (size_t i = 0; i < 2; ++i)
        target.push_back(hw.size() == 2 ? hw[i] * strides[i] : -1);
    }
    if (hw.size() != 2 || hw[0] < 0 || hw[1] < 0 || target.size() != 2)
      return bad("output_shape/auto_pad need static input sizes");
    pads.assign(4, 0);
    for (size_t i = 0; i < 2; ++i) {
      int64_t total =
          strides[i] * (hw[i] - 1) + outPad[i] + ((kernel[i] - 1) * dilations[i] + 1) - target[i];
      if (total < 0) {
        outPad[i] -= total; // ONNX grows the output by extra trailing pixels
        total = 0;
      }
      int64_t half = total / 2;
      pads[i] = autoPad == "SAME_UPPER" ? half : total - half;
      pads[i + 2] = total - pads[i];
    }
  } else if (autoPad == "VALID") {
    pads.assign(4, 0);
  }
  if (pads.size() != 4) return bad("pads need 4 values");
  std::vector<int64_t> padList = {pads[0], pads[2], pads[1], pads[3]};
  auto x = input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  const bool depthwise = group > 1 && group == inCh && wd[1] == 1;
  bool quantized = false;
  auto wt = weightTensor(n.input(1), kToNhwc, depthwise ? 0 : 3, kFormatKHWC, &quantized);
  if (!wt) return wt.status();
  std::vector<uint32_t> ins = {*x, *wt};
  if (const Value* b = n.input(2)) {
    auto bt = input(b, Layout::Onnx);
    if (!bt) return bt.status();
    ins.push_back(*bt);
  }
  auto y = output(fusedOutput(n), Layout::Nhwc);
  if (!y) return y.status();
  const int act = activationFor(n);
  emit(
      fb::PrimitiveType_Conv2dTransposeFusion,
      [=](FBB& b) {
        return fb::CreateConv2dTransposeFusion(
                   b, fb::Format_NHWC, b.CreateVector(kernel), b.CreateVector(strides),
                   b.CreateVector(dilations), fb::PadMode_PAD, 0, b.CreateVector(padList), 0, group,
                   inCh, outCh, static_cast<fb::ActivationType>(act), b.CreateVector(outPad))
            .Union();
      },
      ins, {*y}, quantized);
  return Status::ok();
}

Status Lowering::lowerMatMul(const Node& n) {
  if (rankOf(n.input(0)) < 2 || rankOf(n.input(1)) < 2)
    return bad("MatMul operands of rank < 2 (or unknown rank)");
  auto a = input(n.input(0), Layout::Onnx);
  if (!a) return a.status();
  std::vector<uint32_t> ins = {*a};
  bool quantized = false;
  if (constOf(n.input(1))) {
    const int64_t rank = rankOf(n.input(1));
    auto bt = weightTensor(n.input(1), {}, rank - 1, kFormatNCHW, &quantized);
    if (!bt) return bt.status();
    ins.push_back(*bt);
  } else {
    auto bt = input(n.input(1), Layout::Onnx);
    if (!bt) return bt.status();
    ins.push_back(*bt);
  }
  auto y = output(fusedOutput(n), Layout::Onnx);
  if (!y) return y.status();
  const int act = activationFor(n);
  emit(
      fb::PrimitiveType_MatMulFusion,
      [=](FBB& b) {
        return fb::CreateMatMulFusion(b, false, false, static_cast<fb::ActivationType>(act))
            .Union();
      },
      ins, {*y}, quantized);
  return Status::ok();
}

Status Lowering::lowerGemm(const Node& n) {
  const float alpha = floatAttr(n, "alpha", 1), beta = floatAttr(n, "beta", 1);
  const bool transA = intAttr(n, "transA", 0) != 0, transB = intAttr(n, "transB", 0) != 0;
  auto a = input(n.input(0), Layout::Onnx);
  if (!a) return a.status();
  bool quantized = false;
  uint32_t bId;
  auto bConst = constOf(n.input(1));
  if (alpha != 1.0f) {
    if (!bConst) return bad("alpha {} with a non-constant B", alpha);
    Tensor t = bConst->quantized ? dequantize(*bConst) : bConst->tensor;
    if (t.dtype() != DType::Float32) return bad("alpha {} with a non-float B", alpha);
    auto id = constTensor(scaleFloat(t, alpha), bConst->name + "_alpha");
    if (!id) return id.status();
    bId = *id;
  } else if (bConst) {
    auto id = weightTensor(n.input(1), {}, transB ? 0 : 1, kFormatNCHW, &quantized);
    if (!id) return id.status();
    bId = *id;
  } else {
    auto id = input(n.input(1), Layout::Onnx);
    if (!id) return id.status();
    bId = *id;
  }
  std::vector<uint32_t> ins = {*a, bId};
  const Value* c = n.input(2);
  std::optional<uint32_t> addend;
  auto outShape = staticShape(n.output(0));
  if (c && beta != 0.0f) {
    auto cc = constOf(c);
    Tensor ct;
    if (cc) ct = cc->quantized ? dequantize(*cc) : cc->tensor;
    if (cc && beta != 1.0f) {
      if (ct.dtype() != DType::Float32) return bad("beta {} with a non-float C", beta);
      ct = scaleFloat(ct, beta);
    } else if (!cc && beta != 1.0f) {
      return bad("beta {} with a non-constant C", beta);
    }
    const int64_t N = outShape && outShape->size() == 2 ? (*outShape)[1] : -1;
    if (cc && N > 0 && ct.dtype() == DType::Float32 &&
        (ct.elementCount() == static_cast<uint64_t>(N) || ct.elementCount() == 1) &&
        (ct.dims().size() <= 1 || ct.dims()[0] == 1)) {
      std::vector<float> v = ct.copyValues<float>();
      if (v.size() == 1) v.assign(static_cast<size_t>(N), v[0]);
      ins.push_back(floatConst(v, cc->name, {static_cast<int32_t>(N)}));
    } else if (cc) {
      auto id = constTensor(ct, cc->name);
      if (!id) return id.status();
      addend = *id;
    } else {
      auto id = input(c, Layout::Onnx);
      if (!id) return id.status();
      addend = *id;
    }
  }
  const int act = activationFor(n);
  const Value* finalOut = fusedOutput(n);
  uint32_t y;
  if (addend) {
    MsTensor mid;
    mid.name = n.output(0)->name() + "_matmul";
    auto type = typeIdOf(n.output(0)->dtype());
    mid.dataType = type ? *type : kTypeFloat32;
    if (outShape)
      for (int64_t d : *outShape)
        mid.dims.push_back(static_cast<int32_t>(d));
    y = addTensor(std::move(mid));
  } else {
    auto id = output(finalOut, Layout::Onnx);
    if (!id) return id.status();
    y = *id;
  }
  emit(
      fb::PrimitiveType_MatMulFusion,
      [=](FBB& b) {
        return fb::CreateMatMulFusion(b, transA, transB,
                                      static_cast<fb::ActivationType>(addend ? 0 : act))
            .Union();
      },
      ins, {y}, quantized);
  if (addend) {
    auto z = output(finalOut, Layout::Onnx);
    if (!z) return z.status();
    emit(fb::PrimitiveType_AddFusion,
         [=](FBB& b) {
           return fb::CreateAddFusion(b, static_cast<fb::ActivationType>(act)).Union();
         },
         {y, *addend}, {*z});
  }
  return Status::ok();
}

Status Lowering::lowerPool(const Node& n) {
  const std::string& op = n.opType();
  const bool global = op == "GlobalAveragePool" || op == "GlobalMaxPool";
  const bool isMax = op == "MaxPool" || op == "GlobalMaxPool";
  if (!global && rankOf(n.input(0)) == 3) return lowerConvPool1d(n);
  if (rankOf(n.input(0)) != 4)
    return bad("{}-D input; .ms pooling is 2-D (4-D NCHW input)", rankOf(n.input(0)));
  if (n.outputs().size() > 1 && n.output(1) &&
      (n.output(1)->hasUses() || n.output(1)->isGraphOutput()))
    return bad("the Indices output of MaxPool");
  std::vector<int64_t> kernel, strides = {1, 1};
  Padding pad{{0, 0, 0, 0}, fb::PadMode_VALID};
  bool ceil = false;
  auto hw = inputHW(resolve(n.input(0)));
  if (global) {
    if (hw.size() == 2 && hw[0] > 0 && hw[1] > 0) kernel = hw;
  } else {
    kernel = n.attribute("kernel_shape") ? n.attribute("kernel_shape")->asInts()
                                         : std::vector<int64_t>{};
    if (kernel.size() != 2) return bad("kernel_shape of {} values", kernel.size());
    strides = spatialAttr(n, "strides", 2, 1);
    auto dil = spatialAttr(n, "dilations", 2, 1);
    if (dil != std::vector<int64_t>{1, 1}) return bad("dilations [{}]", fmt::join(dil, ","));
    ceil = intAttr(n, "ceil_mode", 0) != 0;
    std::string err;
    auto p = convPadding(n, hw, kernel, strides, {1, 1}, &err);
    if (!p) return bad("{}", err);
    pad = *p;
    for (int64_t v : pad.list)
      if (v > 50) return bad("pad {} (the .ms runtime accepts pooling pads up to 50)", v);
    const bool anyPad = std::any_of(pad.list.begin(), pad.list.end(), [](int64_t v) { return v; });
    if (!isMax && anyPad && intAttr(n, "count_include_pad", 0) != 0)
      return bad("count_include_pad=1 with padding (.ms averages over the valid pixels only)");
    if (!isMax && anyPad && ceil)
      return bad("ceil_mode=1 with padding (window counts differ from ONNX at the border)");
  }
  auto x = input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  auto y = output(fusedOutput(n), Layout::Nhwc);
  if (!y) return y.status();
  const int act = activationFor(n);
  const auto padList = pad.list;
  const int padMode = pad.mode;
  emit(isMax ? fb::PrimitiveType_MaxPoolFusion : fb::PrimitiveType_AvgPoolFusion,
       [=](FBB& b) {
         auto k = b.CreateVector(kernel), st = b.CreateVector(strides), p = b.CreateVector(padList);
         const auto pm = static_cast<fb::PadMode>(padMode);
         const auto rm = ceil ? fb::RoundMode_CEIL : fb::RoundMode_FLOOR;
         const auto a = static_cast<fb::ActivationType>(act);
         if (isMax)
           return fb::CreateMaxPoolFusion(b, k, st, p, pm, rm, fb::Format_NHWC, global, a).Union();
         return fb::CreateAvgPoolFusion(b, k, st, p, pm, rm, fb::Format_NHWC, global, a).Union();
       },
       {*x}, {*y});
  return Status::ok();
}

// Clip with run-time bounds or on integers: Maximum with the lower bound, Minimum with the upper.
Status Lowering::lowerClipMinMax(const Node& n) {
  const Layout layout = availableNhwc(n.input(0)) ? Layout::Nhwc : Layout::Onnx;
  auto x = input(n.input(0), layout);
  if (!x) return x.status();
  std::vector<std::pair<fb::PrimitiveType, uint32_t>> steps;
  for (size_t i = 1; i < 3; ++i) {
    const Value* b = n.input(i);
    if (!b) continue;
    if (rankOf(b) > 1 || (rankOf(b) == 1 && dimOf(b, 0) != 1))
      return bad("Clip bound '{}' is not a scalar", b->name());
    auto id = input(b, Layout::Onnx);
    if (!id) return id.status();
    steps.push_back({i == 1 ? fb::PrimitiveType_Maximum : fb::PrimitiveType_Minimum, *id});
  }
  if (steps.empty()) {
    alias_[n.output(0)] = resolve(n.input(0));
    return Status::ok();
  }
  uint32_t cur = *x;
  for (size_t k = 0; k < steps.size(); ++k) {
    uint32_t y;
    if (k + 1 == steps.size()) {
      auto o = output(n.output(0), layout);
      if (!o) return o.status();
      y = *o;
    } else {
      MsTensor t = out_.tensors[cur];
      t.name = n.output(0)->name() + "_lower";
      t.nodeType = kNodeCNode;
      t.data.reset();
      t.quantParams.clear();
      y = addTensor(std::move(t));
    }
    AttrBuilder attrs = steps[k].first == fb::PrimitiveType_Maximum
                            ? AttrBuilder(empty<fb::Maximum>())
                            : AttrBuilder(empty<fb::Minimum>());
    emit(steps[k].first, attrs, {cur, steps[k].second}, {y});
    cur = y;
  }
  return Status::ok();
}

// The .ms tensor of an index-like input (axes, k, repeats) read at run time, as int32.
Expected<uint32_t> Lowering::int32Input(const Value* v) {
  auto id = input(v, Layout::Onnx);
  if (!id) return id;
  if (out_.tensors[*id].dataType == kTypeInt32) return id;
  MsTensor t = out_.tensors[*id];
  t.name = v->name() + "_i32";
  t.nodeType = kNodeCNode;
  t.dataType = kTypeInt32;
  t.data.reset();
  uint32_t to = addTensor(std::move(t));
  uint32_t dst = intConst({kTypeInt32}, v->name() + "_i32_to", std::vector<int32_t>{});
  emit(fb::PrimitiveType_Cast, empty<fb::Cast>(), {*id, dst}, {to});
  return to;
}

Status Lowering::lowerActivation(const Node& n) {
  const std::string& op = n.opType();
  const Value* in = n.input(0);
  if (op == "Clip") {
    bool constant =
        isFloatingPoint(resolve(in)->dtype()) || resolve(in)->dtype() == DType::Undefined;
    for (size_t i = 1; i < 3; ++i)
      if (n.input(i) && !constOf(n.input(i))) constant = false;
    if (!constant) return lowerClipMinMax(n);
  }
  if (!isFloatingPoint(resolve(in)->dtype()) && resolve(in)->dtype() != DType::Undefined)
    return bad("{} on {} data (.ms activations are float)", op, dtypeName(resolve(in)->dtype()));
  const Layout layout = availableNhwc(in) ? Layout::Nhwc : Layout::Onnx;
  int type = fb::ActivationType_NO_ACTIVATION;
  float alpha = 0, minVal = 0, maxVal = 0;
  bool approximate = false;
  if (op == "Relu")
    type = fb::ActivationType_RELU;
  else if (op == "Sigmoid")
    type = fb::ActivationType_SIGMOID;
  else if (op == "Tanh")
    type = fb::ActivationType_TANH;
  else if (op == "HardSwish")
    type = fb::ActivationType_HSWISH;
  else if (op == "Softplus")
    type = fb::ActivationType_SOFTPLUS;
  else if (op == "LeakyRelu") {
    type = fb::ActivationType_LEAKY_RELU;
    alpha = floatAttr(n, "alpha", 0.01f);
  } else if (op == "Elu") {
    type = fb::ActivationType_ELU;
    alpha = floatAttr(n, "alpha", 1.0f);
  } else if (op == "Gelu") {
    type = fb::ActivationType_GELU;
    approximate = stringAttr(n, "approximate", "none") == "tanh";
  } else if (op == "HardSigmoid") {
    const float a = floatAttr(n, "alpha", 0.2f), b = floatAttr(n, "beta", 0.5f);
    if (std::fabs(a - 1.0f / 6) < 1e-6f && std::fabs(b - 0.5f) < 1e-6f) {
      type = fb::ActivationType_HSIGMOID;
    } else {
      // relu6-style HSIGMOID is fixed at x/6 + 1/2; other slopes: clip(a·x + b, 0, 1) as three ops.
      auto x = input(in, layout);
      if (!x) return x.status();
      const std::string base = n.output(0)->name();
      auto mid = [&](const std::string& suffix) {
        MsTensor t = out_.tensors[*x];
        t.name = base + suffix;
        t.nodeType = kNodeCNode;
        t.data.reset();
        t.quantParams.clear();
        return addTensor(std::move(t));
      };
      uint32_t ta = floatConst({a}, base + "_alpha", {1});
      uint32_t tb = floatConst({b}, base + "_beta", {1});
      uint32_t scaled = mid("_scaled");
      emit(fb::PrimitiveType_MulFusion, empty<fb::MulFusion>(), {*x, ta}, {scaled});
      uint32_t shifted = mid("_shifted");
      emit(fb::PrimitiveType_AddFusion, empty<fb::AddFusion>(), {scaled, tb}, {shifted});
      auto y = output(n.output(0), layout);
      if (!y) return y.status();
      emit(fb::PrimitiveType_Activation,
           [](FBB& b) {
             return fb::CreateActivation(b, fb::ActivationType_HARD_TANH, 0, 0, 1).Union();
           },
           {shifted}, {*y});
      return Status::ok();
    }
  } else if (op == "Clip") {
    double lo = -std::numeric_limits<double>::infinity(), hi = -lo;
    if (const Attribute* a = n.attribute("min")) lo = a->asFloat();
    if (const Attribute* a = n.attribute("max")) hi = a->asFloat();
    for (size_t i = 1; i < 3; ++i) {
      const Value* v = n.input(i);
      if (!v) continue;
      auto c = constOf(v);
      if (!c) return bad("non-constant Clip bound '{}'", v->name());
      auto s = scalarValue(c->tensor);
      if (!s) return bad("Clip bound '{}' is not a scalar", v->name());
      (i == 1 ? lo : hi) = *s;
    }
    if (lo == 0 && std::isinf(hi) && hi > 0)
      type = fb::ActivationType_RELU;
    else if (lo == 0 && hi == 6)
      type = fb::ActivationType_RELU6;
    else {
      type = fb::ActivationType_HARD_TANH;
      minVal = std::isinf(lo) ? -std::numeric_limits<float>::max() : static_cast<float>(lo);
      maxVal = std::isinf(hi) ? std::numeric_limits<float>::max() : static_cast<float>(hi);
    }
  }
  auto x = input(in, layout);
  if (!x) return x.status();
  auto y = output(n.output(0), layout);
  if (!y) return y.status();
  emit(fb::PrimitiveType_Activation,
       [=](FBB& b) {
         return fb::CreateActivation(b, static_cast<fb::ActivationType>(type), alpha, minVal,
                                     maxVal, approximate)
             .Union();
       },
       {*x}, {*y});
  return Status::ok();
}

// Elementwise binary ops: NHWC when the result is 4-D and an operand already is NHWC (constants
// are rank-padded and permuted to match), else the ONNX layout.
Status Lowering::lowerBinary(const Node& n) {
  static const std::map<std::string, fb::PrimitiveType> types = {
      {"Add", fb::PrimitiveType_AddFusion},
      {"Sub", fb::PrimitiveType_SubFusion},
      {"Mul", fb::PrimitiveType_MulFusion},
      {"Div", fb::PrimitiveType_DivFusion},
      {"Pow", fb::PrimitiveType_PowFusion},
      {"Max", fb::PrimitiveType_Maximum},
      {"Min", fb::PrimitiveType_Minimum},
      {"Equal", fb::PrimitiveType_Equal},
      {"Less", fb::PrimitiveType_Less},
      {"Greater", fb::PrimitiveType_Greater},
      {"LessOrEqual", fb::PrimitiveType_LessEqual},
      {"GreaterOrEqual", fb::PrimitiveType_GreaterEqual},
      {"And", fb::PrimitiveType_LogicalAnd},
      {"Or", fb::PrimitiveType_LogicalOr},
  };
  fb::PrimitiveType type;
  if (n.opType() == "Mod")
    type = intAttr(n, "fmod", 0) ? fb::PrimitiveType_Mod : fb::PrimitiveType_FloorMod;
  else
    type = types.at(n.opType());
  const Value* outV = fusedOutput(n);
  bool nhwc = outV->shape().hasRank() && outV->shape().rank() == 4;
  bool anyNhwc = false;
  for (const Value* v : n.inputs()) {
    if (!v) continue;
    if (constOf(v)) continue;
    if (availableNhwc(v))
      anyNhwc = true;
    else if (rankOf(v) != 4)
      nhwc = false;
  }
  nhwc = nhwc && anyNhwc;
  std::vector<uint32_t> ins;
  for (const Value* v : n.inputs()) {
    if (!v) return bad("omitted input");
    auto c = constOf(v);
    auto id = nhwc && c ? broadcastConstNhwc(*c) : input(v, nhwc ? Layout::Nhwc : Layout::Onnx);
    if (!id) return id.status();
    ins.push_back(*id);
  }
  auto y = output(outV, nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!y) return y.status();
  const int act = activationFor(n);
  AttrBuilder attrs;
  switch (type) {
  case fb::PrimitiveType_AddFusion:
    attrs = [=](FBB& b) {
      return fb::CreateAddFusion(b, static_cast<fb::ActivationType>(act)).Union();
    };
    break;
  case fb::PrimitiveType_SubFusion:
    attrs = [=](FBB& b) {
      return fb::CreateSubFusion(b, static_cast<fb::ActivationType>(act)).Union();
    };
    break;
  case fb::PrimitiveType_MulFusion:
    attrs = [=](FBB& b) {
      return fb::CreateMulFusion(b, static_cast<fb::ActivationType>(act)).Union();
    };
    break;
  case fb::PrimitiveType_DivFusion:
    attrs = [=](FBB& b) {
      return fb::CreateDivFusion(b, static_cast<fb::ActivationType>(act)).Union();
    };
    break;
  case fb::PrimitiveType_PowFusion:
    attrs = [](FBB& b) { return fb::CreatePowFusion(b, 1.0f, 0.0f).Union(); };
    break;
  default:
    attrs = [type](FBB& b) {
      // Attribute-free tables: an empty table of the right union member.
      flatbuffers::uoffset_t start = b.StartTable();
      (void)type;
      return flatbuffers::Offset<void>(b.EndTable(start));
    };
  }
  emit(type, attrs, ins, {*y});
  return Status::ok();
}

// Sum / Max / Min / Mean with N inputs.
Status Lowering::lowerVariadic(const Node& n) {
  std::vector<const Value*> ins;
  for (const Value* v : n.inputs())
    if (v) ins.push_back(v);
  if (ins.size() == 1) {
    auto x = input(ins[0], Layout::Onnx);
    if (!x) return x.status();
    // A copy through Reshape keeps the output a node-produced tensor with its own name.
    auto shape = staticShape(n.output(0));
    if (!shape) return bad("single-input {} with an unknown output shape", n.opType());
    uint32_t s = intConst(*shape, n.output(0)->name() + "_shape");
    auto y = output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    emit(fb::PrimitiveType_Reshape, empty<fb::Reshape>(), {*x, s}, {*y});
    return Status::ok();
  }
  if (n.opType() == "Sum") {
    // AddN needs equal shapes; broadcasting sums chain AddFusion instead.
    std::vector<uint32_t> ids;
    for (const Value* v : ins) {
      auto id = input(v, Layout::Onnx);
      if (!id) return id.status();
      ids.push_back(*id);
    }
    bool same = true;
    for (const Value* v : ins)
      same = same && staticShape(v) && staticShape(v) == staticShape(n.output(0));
    if (same) {
      auto y = output(n.output(0), Layout::Onnx);
      if (!y) return y.status();
      emit(fb::PrimitiveType_AddN, empty<fb::AddN>(), ids, {*y});
      return Status::ok();
    }
  }
  // Chain pairwise.
  fb::PrimitiveType type = n.opType() == "Max"   ? fb::PrimitiveType_Maximum
                           : n.opType() == "Min" ? fb::PrimitiveType_Minimum
                                                 : fb::PrimitiveType_AddFusion;
  auto acc = input(ins[0], Layout::Onnx);
  if (!acc) return acc.status();
  uint32_t cur = *acc;
  for (size_t i = 1; i < ins.size(); ++i) {
    auto next = input(ins[i], Layout::Onnx);
    if (!next) return next.status();
    uint32_t y;
    if (i + 1 == ins.size()) {
      auto o = output(n.output(0), Layout::Onnx);
      if (!o) return o.status();
      y = *o;
    } else {
      MsTensor t;
      t.name = fmt::format("{}_partial{}", n.output(0)->name(), i);
      t.dataType = out_.tensors[cur].dataType;
      y = addTensor(std::move(t));
    }
    AttrBuilder attrs = type == fb::PrimitiveType_AddFusion ? AttrBuilder(empty<fb::AddFusion>())
                        : type == fb::PrimitiveType_Maximum ? AttrBuilder(empty<fb::Maximum>())
                                                            : AttrBuilder(empty<fb::Minimum>());
    emit(type, attrs, {cur, *next}, {y});
    cur = y;
  }
  return Status::ok();
}

Status Lowering::lowerUnary(const Node& n) {
  static const std::map<std::string, fb::PrimitiveType> types = {
      {"Abs", fb::PrimitiveType_Abs},       {"Neg", fb::PrimitiveType_Neg},
      {"Floor", fb::PrimitiveType_Floor},   {"Ceil", fb::PrimitiveType_Ceil},
      {"Round", fb::PrimitiveType_Round},   {"Reciprocal", fb::PrimitiveType_Reciprocal},
      {"Sin", fb::PrimitiveType_Sin},       {"Cos", fb::PrimitiveType_Cos},
      {"Erf", fb::PrimitiveType_Erf},       {"Not", fb::PrimitiveType_LogicalNot},
      {"Sqrt", fb::PrimitiveType_Sqrt},     {"Log", fb::PrimitiveType_Log},
      {"Exp", fb::PrimitiveType_ExpFusion},
  };
  const fb::PrimitiveType type = types.at(n.opType());
  const Layout layout = availableNhwc(n.input(0)) ? Layout::Nhwc : Layout::Onnx;
  auto x = input(n.input(0), layout);
  if (!x) return x.status();
  auto y = output(n.output(0), layout);
  if (!y) return y.status();
  AttrBuilder attrs;
  if (type == fb::PrimitiveType_ExpFusion)
    attrs = [](FBB& b) { return fb::CreateExpFusion(b, -1.0f, 1.0f, 0.0f).Union(); };
  else
    attrs = [](FBB& b) {
      flatbuffers::uoffset_t start = b.StartTable();
      return flatbuffers::Offset<void>(b.EndTable(start));
    };
  emit(type, attrs, {*x}, {*y});
  return Status::ok();
}

Status Lowering::lowerCast(const Node& n) {
  const DType from = resolve(n.input(0))->dtype();
  const DType to = static_cast<DType>(intAttr(n, "to", 1));
  static const std::set<DType> ok = {DType::Bool,  DType::UInt8,   DType::Int8,   DType::Int32,
                                     DType::Int64, DType::Float32, DType::Float16};
  if (from != DType::Undefined && !ok.count(from))
    return bad("Cast from {} (.ms Cast takes bool/uint8/int8/int32/int64/float32/float16)",
               dtypeName(from));
  if (!ok.count(to))
    return bad("Cast to {} (.ms Cast makes bool/uint8/int8/int32/int64/float32/float16)",
               dtypeName(to));
  const Layout layout = availableNhwc(n.input(0)) ? Layout::Nhwc : Layout::Onnx;
  auto x = input(n.input(0), layout);
  if (!x) return x.status();
  uint32_t dst = intConst({*typeIdOf(to)}, n.output(0)->name() + "_to", std::vector<int32_t>{});
  auto y = output(n.output(0), layout);
  if (!y) return y.status();
  emit(fb::PrimitiveType_Cast, empty<fb::Cast>(), {*x, dst}, {*y});
  return Status::ok();
}

Status Lowering::lowerReshape(const Node& n) {
  auto x = input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  std::vector<int64_t> shape;
  if (intAttr(n, "allowzero", 0) != 0) {
    auto c = n.input(1) ? constOf(n.input(1)) : std::nullopt;
    if (!c) return bad("allowzero=1 with a run-time shape");
    for (int64_t d : intValues(c->tensor))
      if (d == 0) return bad("allowzero=1 with a 0 in the shape (.ms copies the input dim)");
  }
  if (auto s = staticShape(n.output(0))) {
    shape = *s; // ONNX's 0 / -1 resolved by shape inference: no special values reach the runtime
  } else if (auto c = n.input(1) ? constOf(n.input(1)) : std::nullopt) {
    shape = intValues(c->tensor);
    if (intAttr(n, "allowzero", 0) == 0)
      for (size_t i = 0; i < shape.size(); ++i)
        if (shape[i] == 0) {
          auto d = dimOf(n.input(0), i);
          if (!d) return bad("shape value 0 at axis {} over an unknown input dim", i);
          shape[i] = *d;
        }
  } else {
    return bad("a non-constant target shape with an unknown output shape");
  }
  uint32_t s = intConst(shape, n.output(0)->name() + "_shape");
  auto y = output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  emit(fb::PrimitiveType_Reshape, empty<fb::Reshape>(), {*x, s}, {*y});
  return Status::ok();
}

Status Lowering::lowerFlatten(const Node& n) {
  auto x = input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto shape = staticShape(n.output(0));
  auto y = output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (shape) {
    uint32_t s = intConst(*shape, n.output(0)->name() + "_shape");
    emit(fb::PrimitiveType_Reshape, empty<fb::Reshape>(), {*x, s}, {*y});
    return Status::ok();
  }
  int64_t axis = intAttr(n, "axis", 1);
  if (axis < 0) {
    int r = rankOf(n.input(0));
    if (r < 0) return bad("negative axis over an unknown rank");
    axis += r;
  }
  emit(fb::PrimitiveType_Flatten, [=](FBB& b) { return fb::CreateFlatten(b, axis).Union(); }, {*x},
       {*y});
  return Status::ok();
}

Status Lowering::lowerSqueeze(const Node& n) {
  const bool squeeze = n.opType() == "Squeeze";
  auto axes = intsOf(n, "axes", 1);
  if (n.input(1) && !axes) return bad("non-constant axes");
  const int inRank = rankOf(n.input(0));
  const int outRank = rankOf(n.output(0));
  std::vector<int64_t> list = axes ? *axes : std::vector<int64_t>{};
  const int base = squeeze ? inRank : outRank;
  for (auto& a : list)
    if (a < 0) {
      if (base < 0) return bad("negative axis over an unknown rank");
      a += base;
    }
  if (!axes && squeeze) {
    auto shape = staticShape(n.input(0));
    if (!shape) return bad("Squeeze without axes over an unknown shape");
    for (size_t i = 0; i < shape->size(); ++i)
      if ((*shape)[i] == 1) list.push_back(static_cast<int64_t>(i));
  }
  std::sort(list.begin(), list.end());
  auto x = input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto y = output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (squeeze)
    emit(fb::PrimitiveType_Squeeze,
         [=](FBB& b) { return fb::CreateSqueeze(b, b.CreateVector(list)).Union(); }, {*x}, {*y});
  else
    emit(fb::PrimitiveType_Unsqueeze,
         [=](FBB& b) { return fb::CreateUnsqueeze(b, b.CreateVector(list)).Union(); }, {*x}, {*y});
  return Status::ok();
}

Status Lowering::lowerTranspose(const Node& n) {
  const int rank = rankOf(n.input(0));
  std::vector<int64_t> perm;
  if (const Attribute* p = n.attribute("perm"))
    perm = p->asInts();
  else {
    if (rank < 0) return bad("default perm over an unknown rank");
    for (int i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  }
  const Value* in = resolve(n.input(0));
  auto sit = slots_.find(in);
  const bool onlyNhwc = rank == 4 && sit != slots_.end() && sit->second.nhwc && !sit->second.onnx;
  uint32_t x;
  if (onlyNhwc) {
    // Read the NHWC tensor directly: onnx axis d lives at NHWC axis kToNchw[d].
    for (auto& p : perm)
      p = kToNchw[static_cast<size_t>(p)];
    x = *sit->second.nhwc;
    if (perm == std::vector<int64_t>{0, 1, 2, 3} && !n.output(0)->isGraphOutput()) {
      slots_[n.output(0)].onnx = x; // the NCHW→NHWC transpose cancels the layout change
      return Status::ok();
    }
  } else if (rank == 4 && perm == kToNchw && sit != slots_.end() && sit->second.onnx &&
             !n.output(0)->isGraphOutput()) {
    // NHWC data read as NCHW (models exported from NHWC frameworks, .ms files read back): the
    // input tensor already is the output's NHWC layout, so no op is needed.
    const uint32_t id = *sit->second.onnx;
    out_.tensors[id].format = kFormatNHWC;
    slots_[n.output(0)].nhwc = id;
    return Status::ok();
  } else {
    auto id = input(in, Layout::Onnx);
    if (!id) return id.status();
    x = *id;
  }
  uint32_t p = intConst(perm, n.output(0)->name() + "_perm");
  auto y = output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  emit(fb::PrimitiveType_Transpose, empty<fb::Transpose>(), {x, p}, {*y});
  return Status::ok();
}

Status Lowering::lowerConcat(const Node& n) {
  int64_t axis = intAttr(n, "axis", 0);
  const int rank = rankOf(n.output(0));
  if (axis < 0) {
    if (rank < 0) return bad("negative axis over an unknown rank");
    axis += rank;
  }
  bool nhwc = rank == 4, anyNhwc = false;
  for (const Value* v : n.inputs()) {
    if (!v) continue;
    if (availableNhwc(v)) anyNhwc = true;
    if (rankOf(v) != 4) nhwc = false;
  }
  nhwc = nhwc && anyNhwc;
  const int64_t msAxis =
      nhwc ? std::find(kToNhwc.begin(), kToNhwc.end(), axis) - kToNhwc.begin() : axis;
  std::vector<uint32_t> ins;
  for (const Value* v : n.inputs()) {
    if (!v) continue;
    auto id = input(v, nhwc ? Layout::Nhwc : Layout::Onnx);
    if (!id) return id.status();
    ins.push_back(*id);
  }
  auto y = output(n.output(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!y) return y.status();
  emit(fb::PrimitiveType_Concat, [=](FBB& b) { return fb::CreateConcat(b, msAxis).Union(); }, ins,
       {*y});
  return Status::ok();
}

Status Lowering::lowerSplit(const Node& n) {
  const int rank = rankOf(n.input(0));
  int64_t axis = intAttr(n, "axis", 0);
  if (axis < 0) {
    if (rank < 0) return bad("negative axis over an unknown rank");
    axis += rank;
  }
  std::vector<int64_t> sizes;
  if (const Attribute* s = n.attribute("split"))
    sizes = s->asInts();
  else if (n.input(1)) {
    auto c = constOf(n.input(1));
    if (!c) return bad("non-constant split sizes");
    sizes = intValues(c->tensor);
  } else {
    for (const Value* o : n.outputs()) {
      auto d = o ? dimOf(o, static_cast<size_t>(axis)) : std::nullopt;
      if (!d) {
        sizes.clear();
        break;
      }
      sizes.push_back(*d);
    }
  }
  auto x = input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  std::vector<uint32_t> outs;
  for (const Value* o : n.outputs()) {
    if (!o) return bad("an omitted Split output");
    auto y = output(o, Layout::Onnx);
    if (!y) return y.status();
    outs.push_back(*y);
  }
  const int64_t count = static_cast<int64_t>(outs.size());
  emit(
      fb::PrimitiveType_Split,
      [=](FBB& b) {
        auto list = sizes.empty() ? flatbuffers::Offset<flatbuffers::Vector<int64_t>>()
                                  : b.CreateVector(sizes);
        return fb::CreateSplit(b, count, list, axis).Union();
      },
      {*x}, outs);
  return Status::ok();
}

Status Lowering::lowerSlice(const Node& n) {
  auto shape = staticShape(n.input(0));
  const int rank = rankOf(n.input(0));
  if (rank < 0) return bad("Slice over an unknown rank");
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (opset_ < 10) {
    starts = intsOf(n, "starts", 99);
    ends = intsOf(n, "ends", 99);
    axes = n.attribute("axes") ? std::optional(n.attribute("axes")->asInts()) : std::nullopt;
  } else {
    starts = intsOf(n, "starts", 1);
    ends = intsOf(n, "ends", 2);
    if (n.input(3)) axes = intsOf(n, "axes", 3);
    if (n.input(4)) steps = intsOf(n, "steps", 4);
    if (!starts || !ends || (n.input(3) && !axes) || (n.input(4) && !steps))
      return bad("non-constant starts/ends/axes/steps");
  }
  if (!starts || !ends) return bad("missing starts/ends");
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0), end(static_cast<size_t>(rank), 0),
      stride(static_cast<size_t>(rank), 1);
  int64_t beginMask = 0, endMask = 0;
  for (int i = 0; i < rank; ++i) {
    beginMask |= int64_t{1} << i;
    endMask |= int64_t{1} << i;
  }
  for (size_t k = 0; k < starts->size(); ++k) {
    int64_t ax = axes ? (*axes)[k] : static_cast<int64_t>(k);
    if (ax < 0) ax += rank;
    if (ax < 0 || ax >= rank) return bad("axis {} out of range", ax);
    const size_t a = static_cast<size_t>(ax);
    const int64_t step = steps ? (*steps)[k] : 1;
    if (step == 0) return bad("step 0");
    int64_t s = (*starts)[k], e = (*ends)[k];
    auto dim = shape ? std::optional<int64_t>((*shape)[a]) : dimOf(n.input(0), a);
    if (dim) {
      // Clamp as ONNX does, so no INT64 sentinels reach the int32 begin/end tensors.
      const int64_t d = *dim;
      if (s < 0) s += d;
      if (e < 0) e += d;
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, d);
        e = std::clamp<int64_t>(e, 0, d);
      } else {
        s = std::clamp<int64_t>(s, 0, d - 1);
        e = std::clamp<int64_t>(e, -1, d - 1);
      }
      begin[a] = s;
      beginMask &= ~(int64_t{1} << a);
      if (step < 0 && e < 0) {
        end[a] = 0; // runs past index 0: the end mask says "to the start"
      } else {
        end[a] = e;
        endMask &= ~(int64_t{1} << a);
      }
    } else {
      if (s < 0 || e < 0 || step < 0) return bad("negative starts/ends/steps over an unknown dim");
      begin[a] = s;
      beginMask &= ~(int64_t{1} << a);
      if (e < std::numeric_limits<int32_t>::max()) {
        end[a] = e;
        endMask &= ~(int64_t{1} << a);
      }
    }
    stride[a] = step;
  }
  auto x = input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  const std::string base = n.output(0)->name();
  uint32_t tb = intConst(begin, base + "_begin");
  uint32_t te = intConst(end, base + "_end");
  uint32_t ts = intConst(stride, base + "_strides");
  auto y = output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  emit(fb::PrimitiveType_StridedSlice,
       [=](FBB& b) { return fb::CreateStridedSlice(b, beginMask, endMask, 0, 0, 0).Union(); },
       {*x, tb, te, ts}, {*y});
  return Status::ok();
}

Status Lowering::lowerGather(const Node& n) {
  const int rank = rankOf(n.input(0));
  int64_t axis = intAttr(n, "axis", 0);
  if (axis < 0) {
    if (rank < 0) return bad("negative axis over an unknown rank");
    axis += rank;
  }
  if (n.opType() == "GatherND") {
    if (intAttr(n, "batch_dims", 0) != 0) return bad("batch_dims {}", intAttr(n, "batch_dims", 0));
    auto x = input(n.input(0), Layout::Onnx);
    if (!x) return x.status();
    auto idx = input(n.input(1), Layout::Onnx);
    if (!idx) return idx.status();
    auto y = output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    emit(fb::PrimitiveType_GatherNd, empty<fb::GatherNd>(), {*x, *idx}, {*y});
    return Status::ok();
  }
  bool quantized = false;
  uint32_t data;
  if (auto c = constOf(n.input(0))) {
    auto id = weightTensor(n.input(0), {}, axis, kFormatNCHW, &quantized);
    if (!id) return id.status();
    data = *id;
  } else {
    auto id = input(n.input(0), Layout::Onnx);
    if (!id) return id.status();
    data = *id;
  }
  uint32_t indices;
  if (auto c = constOf(n.input(1))) {
    // int32 indices with negatives resolved (the runtime reads them as non-negative int32).
    std::vector<int64_t> v = intValues(c->tensor);
    auto d = dimOf(n.input(0), static_cast<size_t>(axis));
    for (auto& i : v)
      if (i < 0) {
        if (!d) return bad("negative index over an unknown dim");
        i += *d;
      }
    std::vector<int32_t> dims;
    for (int64_t x : c->tensor.dims())
      dims.push_back(static_cast<int32_t>(x));
    indices = intConst(v, c->name, dims);
  } else {
    auto id = input(n.input(1), Layout::Onnx);
    if (!id) return id.status();
    indices = *id;
  }
  uint32_t ax = intConst({axis}, n.output(0)->name() + "_axis");
  auto y = output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  emit(fb::PrimitiveType_Gather, empty<fb::Gather>(), {data, indices, ax}, {*y}, quantized);
  return Status::ok();
}

Status Lowering::lowerPad(const Node& n) {
  const int rank = rankOf(n.input(0));
  if (rank < 0) return bad("Pad over an unknown rank");
  std::vector<int64_t> pads;
  float value = 0;
  if (opset_ < 11) {
    pads = n.attribute("pads") ? n.attribute("pads")->asInts() : std::vector<int64_t>{};
    value = floatAttr(n, "value", 0);
  } else {
    auto p = n.input(1) ? constOf(n.input(1)) : std::nullopt;
    if (!p) return bad("non-constant pads");
    pads = intValues(p->tensor);
    if (const Value* cv = n.input(2)) {
      auto c = constOf(cv);
      if (!c) return bad("non-constant constant_value");
      auto s = scalarValue(c->tensor);
      if (!s) return bad("constant_value is not a scalar");
      value = static_cast<float>(*s);
    }
    if (const Value* ax = n.input(3)) {
      auto c = constOf(ax);
      if (!c) return bad("non-constant axes");
      std::vector<int64_t> axes = intValues(c->tensor);
      std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
      for (size_t k = 0; k < axes.size(); ++k) {
        int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
        full[static_cast<size_t>(a)] = pads[k];
        full[static_cast<size_t>(a + rank)] = pads[k + axes.size()];
      }
      pads = full;
    }
  }
  if (pads.size() != static_cast<size_t>(2 * rank))
    return bad("{} pads for rank {}", pads.size(), rank);
  const std::string mode = stringAttr(n, "mode", "constant");
  int padMode;
  if (mode == "constant")
    padMode = fb::PaddingMode_CONSTANT;
  else if (mode == "reflect")
    padMode = fb::PaddingMode_REFLECT;
  else
    return bad("mode '{}' (.ms pads take constant or reflect)", mode);
  for (int64_t p : pads)
    if (p < 0) return bad("negative pad {} (cropping)", p);
  const bool nhwc = rank == 4 && availableNhwc(n.input(0));
  std::vector<int64_t> pairs; // [rank, 2]
  for (int i = 0; i < rank; ++i) {
    size_t src =
        nhwc ? static_cast<size_t>(kToNhwc[static_cast<size_t>(i)]) : static_cast<size_t>(i);
    pairs.push_back(pads[src]);
    pairs.push_back(pads[src + static_cast<size_t>(rank)]);
  }
  auto x = input(n.input(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!x) return x.status();
  uint32_t tp = intConst(pairs, n.output(0)->name() + "_paddings", std::vector<int32_t>{rank, 2});
  auto y = output(n.output(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!y) return y.status();
  emit(fb::PrimitiveType_PadFusion,
       [=](FBB& b) {
         return fb::CreatePadFusion(b, 0, static_cast<fb::PaddingMode>(padMode), value).Union();
       },
       {*x, tp}, {*y});
  return Status::ok();
}

Status Lowering::lowerResize(const Node& n) {
  if (rankOf(n.input(0)) != 4) return bad("{}-D input (.ms Resize is 4-D)", rankOf(n.input(0)));
  auto inShape = staticShape(n.input(0));
  auto outShape = staticShape(n.output(0));
  if (!outShape || !inShape) return bad("Resize with unknown input/output sizes");
  if ((*outShape)[0] != (*inShape)[0] || (*outShape)[1] != (*inShape)[1])
    return bad("resizing the batch or channel axis");
  const std::string mode = stringAttr(n, "mode", "nearest");
  int method;
  if (mode == "nearest")
    method = fb::ResizeMethod_NEAREST;
  else if (mode == "linear" || mode == "bilinear")
    method = fb::ResizeMethod_LINEAR;
  else if (mode == "cubic")
    method = fb::ResizeMethod_CUBIC;
  else
    return bad("mode '{}'", mode);
  const bool isUpsample = n.opType() == "Upsample" || opset_ < 11;
  const std::string coord =
      isUpsample ? "asymmetric" : stringAttr(n, "coordinate_transformation_mode", "half_pixel");
  int transform;
  if (coord == "asymmetric")
    transform = fb::CoordinateTransformMode_ASYMMETRIC;
  else if (coord == "align_corners")
    transform = fb::CoordinateTransformMode_ALIGN_CORNERS;
  else if (coord == "half_pixel")
    transform = fb::CoordinateTransformMode_HALF_PIXEL;
  else if (coord == "pytorch_half_pixel" && (*outShape)[2] > 1 && (*outShape)[3] > 1)
    transform = fb::CoordinateTransformMode_HALF_PIXEL; // equal to half_pixel for sizes > 1
  else
    return bad("coordinate_transformation_mode '{}'", coord);
  const std::string nearest = stringAttr(n, "nearest_mode", "round_prefer_floor");
  int nearestMode = fb::NearestMode_NORMAL;
  if (method == fb::ResizeMethod_NEAREST) {
    if (isUpsample)
      nearestMode = fb::NearestMode_FLOOR;
    else if (nearest == "round_prefer_floor")
      nearestMode = fb::NearestMode_ROUND_HALF_DOWN;
    else if (nearest == "round_prefer_ceil")
      nearestMode = fb::NearestMode_ROUND_HALF_UP;
    else if (nearest == "floor")
      nearestMode = fb::NearestMode_FLOOR;
    else if (nearest == "ceil")
      nearestMode = fb::NearestMode_CEIL;
    else
      return bad("nearest_mode '{}'", nearest);
  }
  if (intAttr(n, "antialias", 0) != 0) return bad("antialias=1");
  if (n.attribute("axes")) return bad("axes attribute");
  if (stringAttr(n, "keep_aspect_ratio_policy", "stretch") != "stretch")
    return bad("keep_aspect_ratio_policy");
  const float cubic = floatAttr(n, "cubic_coeff_a", -0.75f);
  const int64_t exclude = intAttr(n, "exclude_outside", 0);
  const float extrapolation = floatAttr(n, "extrapolation_value", 0);
  const int64_t h = (*outShape)[2], w = (*outShape)[3];
  // .ms maps coordinates with in/out sizes; a scale whose product with the input size is not whole
  // maps them differently, so only whole products lower.
  if (const Value* sv = n.input(isUpsample ? 1 : 2)) {
    if (auto c = constOf(sv);
        c && c->tensor.elementCount() == 4 && c->tensor.dtype() == DType::Float32) {
      auto sc = c->tensor.copyValues<float>();
      for (size_t i = 2; i < 4; ++i) {
        const double scaled = static_cast<double>((*inShape)[i]) * sc[i];
        if (std::fabs(scaled - std::round(scaled)) > 1e-6)
          return bad("scale {} on a size of {} (not a whole output size)", sc[i], (*inShape)[i]);
      }
    } else if (!c && !(rankOf(sv) == 1 && dimOf(sv, 0) == 0)) {
      // Scales fed at run time: the static sizes pin the scale only for whole upsampling factors.
      for (size_t i = 2; i < 4; ++i)
        if ((*inShape)[i] == 0 || (*outShape)[i] % (*inShape)[i] != 0)
          return bad("run-time scales with sizes {} -> {} (scale not recoverable)", (*inShape)[i],
                     (*outShape)[i]);
    }
  }
  auto x = input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  uint32_t size = intConst({h, w}, n.output(0)->name() + "_size");
  auto y = output(n.output(0), Layout::Nhwc);
  if (!y) return y.status();
  emit(fb::PrimitiveType_Resize,
       [=](FBB& b) {
         return fb::CreateResize(b, fb::Format_NHWC, static_cast<fb::ResizeMethod>(method), h, w,
                                 false, static_cast<fb::CoordinateTransformMode>(transform), cubic,
                                 exclude, extrapolation, static_cast<fb::NearestMode>(nearestMode))
             .Union();
       },
       {*x, size}, {*y});
  return Status::ok();
}

Status Lowering::lowerReduce(const Node& n) {
  static const std::map<std::string, fb::ReduceMode> modes = {
      {"ReduceMean", fb::ReduceMode_ReduceMean},
      {"ReduceMax", fb::ReduceMode_ReduceMax},
      {"ReduceMin", fb::ReduceMode_ReduceMin},
      {"ReduceProd", fb::ReduceMode_ReduceProd},
      {"ReduceSum", fb::ReduceMode_ReduceSum},
      {"ReduceSumSquare", fb::ReduceMode_ReduceSumSquare},
      {"ReduceL1", fb::ReduceMode_ReduceASum},
      {"ReduceL2", fb::ReduceMode_ReduceL2},
  };
  const fb::ReduceMode mode = modes.at(n.opType());
  const int rank = rankOf(n.input(0));
  if (rank < 0) return bad("reduction over an unknown rank");
  std::optional<std::vector<int64_t>> axes;
  if (const Attribute* a = n.attribute("axes"))
    axes = a->asInts();
  else if (n.input(1)) {
    auto c = constOf(n.input(1));
    if (!c) {
      // Axes fed at run time: int32, ONNX layout (an empty list reduces every axis, as in ONNX).
      if (intAttr(n, "noop_with_empty_axes", 0) != 0) return bad("noop_with_empty_axes=1");
      const bool keepDims = intAttr(n, "keepdims", 1) != 0;
      auto x = input(n.input(0), Layout::Onnx);
      if (!x) return x.status();
      auto ta = int32Input(n.input(1));
      if (!ta) return ta.status();
      auto y = output(n.output(0), Layout::Onnx);
      if (!y) return y.status();
      emit(fb::PrimitiveType_ReduceFusion,
           [=](FBB& b) { return fb::CreateReduceFusion(b, keepDims, mode, false, 0.0f).Union(); },
           {*x, *ta}, {*y});
      return Status::ok();
    }
    axes = intValues(c->tensor);
  }
  const bool keep = intAttr(n, "keepdims", 1) != 0;
  std::vector<int64_t> list;
  if (!axes || axes->empty()) {
    if (intAttr(n, "noop_with_empty_axes", 0) != 0) return bad("noop_with_empty_axes=1");
    for (int i = 0; i < rank; ++i)
      list.push_back(i);
  } else {
    for (int64_t a : *axes)
      list.push_back(a < 0 ? a + rank : a);
  }
  const bool nhwc = keep && rank == 4 && availableNhwc(n.input(0));
  if (nhwc)
    for (auto& a : list)
      a = std::find(kToNhwc.begin(), kToNhwc.end(), a) - kToNhwc.begin();
  std::sort(list.begin(), list.end());
  auto x = input(n.input(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!x) return x.status();
  uint32_t ta = intConst(list, n.output(0)->name() + "_axes");
  auto y = output(n.output(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!y) return y.status();
  emit(fb::PrimitiveType_ReduceFusion,
       [=](FBB& b) { return fb::CreateReduceFusion(b, keep, mode, false, 0.0f).Union(); }, {*x, ta},
       {*y});
  return Status::ok();
}

Status Lowering::lowerSoftmax(const Node& n) {
  const int rank = rankOf(n.input(0));
  int64_t axis = intAttr(n, "axis", opset_ < 13 ? 1 : -1);
  if (axis < 0) {
    if (rank < 0) return bad("negative axis over an unknown rank");
    axis += rank;
  }
  if (opset_ < 13 && axis != rank - 1) {
    // Before opset 13 the input is flattened to 2-D at `axis`; equal to a last-axis softmax only
    // when every later axis has size 1 ... or when the axis is the last one.
    bool trailingOnes = true;
    for (int i = static_cast<int>(axis) + 1; i < rank; ++i)
      trailingOnes = trailingOnes && dimOf(n.input(0), static_cast<size_t>(i)) == 1;
    if (!trailingOnes) return bad("axis {} with opset {} (2-D coerced softmax)", axis, opset_);
  }
  const bool nhwc = rank == 4 && availableNhwc(n.input(0));
  const int64_t msAxis =
      nhwc ? std::find(kToNhwc.begin(), kToNhwc.end(), axis) - kToNhwc.begin() : axis;
  auto x = input(n.input(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!x) return x.status();
  auto y = output(n.output(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!y) return y.status();
  if (n.opType() == "LogSoftmax")
    emit(fb::PrimitiveType_LogSoftmax,
         [=](FBB& b) { return fb::CreateLogSoftmax(b, msAxis).Union(); }, {*x}, {*y});
  else
    emit(fb::PrimitiveType_Softmax,
         [=](FBB& b) {
           return fb::CreateSoftmax(b, b.CreateVector(std::vector<int64_t>{msAxis})).Union();
         },
         {*x}, {*y});
  return Status::ok();
}

Status Lowering::lowerArgMinMax(const Node& n) {
  if (intAttr(n, "select_last_index", 0) != 0) return bad("select_last_index=1");
  const int rank = rankOf(n.input(0));
  int64_t axis = intAttr(n, "axis", 0);
  if (axis < 0) {
    if (rank < 0) return bad("negative axis over an unknown rank");
    axis += rank;
  }
  const bool keep = intAttr(n, "keepdims", 1) != 0;
  auto x = input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto y = output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (n.opType() == "ArgMax")
    emit(fb::PrimitiveType_ArgMaxFusion,
         [=](FBB& b) { return fb::CreateArgMaxFusion(b, axis, 1, keep, false).Union(); }, {*x},
         {*y});
  else
    emit(fb::PrimitiveType_ArgMinFusion,
         [=](FBB& b) { return fb::CreateArgMinFusion(b, axis, 1, keep, false).Union(); }, {*x},
         {*y});
  return Status::ok();
}

Status Lowering::lowerNorm(const Node& n) {
  const std::string& op = n.opType();
  const int rank = rankOf(n.input(0));
  if (op == "BatchNormalization") {
    if (intAttr(n, "training_mode", 0) != 0) return bad("training_mode=1");
    for (size_t i = 1; i < n.outputs().size(); ++i)
      if (n.output(i) && (n.output(i)->hasUses() || n.output(i)->isGraphOutput()))
        return bad("training outputs (running mean/var)");
    if (rank != 4 && rank != 2) return bad("{}-D input (.ms FusedBatchNorm: 4-D or 2-D)", rank);
    const float eps = floatAttr(n, "epsilon", 1e-5f), momentum = floatAttr(n, "momentum", 0.9f);
    const Layout layout = rank == 4 ? Layout::Nhwc : Layout::Onnx;
    std::vector<uint32_t> ins;
    auto x = input(n.input(0), layout);
    if (!x) return x.status();
    ins.push_back(*x);
    for (size_t i = 1; i < 5; ++i) {
      auto id = input(n.input(i), Layout::Onnx);
      if (!id) return id.status();
      ins.push_back(*id);
    }
    auto y = output(n.output(0), layout);
    if (!y) return y.status();
    emit(fb::PrimitiveType_FusedBatchNorm,
         [=](FBB& b) { return fb::CreateFusedBatchNorm(b, eps, momentum, 0).Union(); }, ins, {*y});
    return Status::ok();
  }
  if (op == "InstanceNormalization") {
    if (rank != 4) return bad("{}-D input (.ms InstanceNorm is 4-D)", rank);
    const float eps = floatAttr(n, "epsilon", 1e-5f);
    auto x = input(n.input(0), Layout::Nhwc);
    if (!x) return x.status();
    auto g = input(n.input(1), Layout::Onnx);
    if (!g) return g.status();
    auto be = input(n.input(2), Layout::Onnx);
    if (!be) return be.status();
    auto y = output(n.output(0), Layout::Nhwc);
    if (!y) return y.status();
    emit(fb::PrimitiveType_InstanceNorm,
         [=](FBB& b) { return fb::CreateInstanceNorm(b, eps).Union(); }, {*x, *g, *be}, {*y});
    return Status::ok();
  }
  if (op == "LayerNormalization") {
    for (size_t i = 1; i < n.outputs().size(); ++i)
      if (n.output(i) && (n.output(i)->hasUses() || n.output(i)->isGraphOutput()))
        return bad("the Mean/InvStdDev outputs");
    if (rank < 0) return bad("unknown rank");
    int64_t axis = intAttr(n, "axis", -1);
    if (axis < 0) axis += rank;
    const float eps = floatAttr(n, "epsilon", 1e-5f);
    auto x = input(n.input(0), Layout::Onnx);
    if (!x) return x.status();
    auto g = input(n.input(1), Layout::Onnx);
    if (!g) return g.status();
    uint32_t beta;
    if (n.input(2)) {
      auto id = input(n.input(2), Layout::Onnx);
      if (!id) return id.status();
      beta = *id;
    } else {
      auto gs = staticShape(n.input(1));
      if (!gs) return bad("no bias and an unknown scale shape");
      uint64_t count = 1;
      std::vector<int32_t> dims;
      for (int64_t d : *gs) {
        count *= static_cast<uint64_t>(d);
        dims.push_back(static_cast<int32_t>(d));
      }
      beta = floatConst(std::vector<float>(count, 0.0f), n.output(0)->name() + "_bias", dims);
    }
    auto y = output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    emit(fb::PrimitiveType_LayerNormFusion,
         [=](FBB& b) { return fb::CreateLayerNormFusion(b, axis, eps, true, axis).Union(); },
         {*x, *g, beta}, {*y});
    return Status::ok();
  }
  if (op == "LpNormalization") {
    int64_t axis = intAttr(n, "axis", -1);
    if (axis < 0) {
      if (rank < 0) return bad("negative axis over an unknown rank");
      axis += rank;
    }
    const int64_t p = intAttr(n, "p", 2);
    auto x = input(n.input(0), Layout::Onnx);
    if (!x) return x.status();
    auto y = output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    emit(fb::PrimitiveType_LpNormalization,
         [=](FBB& b) { return fb::CreateLpNormalization(b, axis, p).Union(); }, {*x}, {*y});
    return Status::ok();
  }
  // LRN: ONNX scales the square sum by alpha/size; .ms (TF style) by alpha per element.
  if (rank != 4) return bad("{}-D input (.ms LRN is 4-D)", rank);
  const int64_t size = intAttr(n, "size", 1);
  if (size % 2 == 0) return bad("even size {}", size);
  const float alpha = floatAttr(n, "alpha", 1e-4f) / static_cast<float>(size);
  const float beta = floatAttr(n, "beta", 0.75f), bias = floatAttr(n, "bias", 1.0f);
  auto x = input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  auto y = output(n.output(0), Layout::Nhwc);
  if (!y) return y.status();
  emit(fb::PrimitiveType_LRN,
       [=](FBB& b) {
         return fb::CreateLRN(b, (size - 1) / 2, bias, alpha, beta,
                              b.CreateString("ACROSS_CHANNELS"))
             .Union();
       },
       {*x}, {*y});
  return Status::ok();
}

Status Lowering::lowerSpaceDepth(const Node& n) {
  if (rankOf(n.input(0)) != 4) return bad("{}-D input", rankOf(n.input(0)));
  const int64_t block = intAttr(n, "blocksize", 0);
  auto x = input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  auto y = output(n.output(0), Layout::Nhwc);
  if (!y) return y.status();
  if (n.opType() == "SpaceToDepth") {
    emit(fb::PrimitiveType_SpaceToDepth,
         [=](FBB& b) { return fb::CreateSpaceToDepth(b, block, fb::Format_NHWC).Union(); }, {*x},
         {*y});
  } else {
    const std::string mode = stringAttr(n, "mode", "DCR");
    emit(fb::PrimitiveType_DepthToSpace,
         [=](FBB& b) {
           return fb::CreateDepthToSpace(b, block, fb::Format_NHWC, b.CreateString(mode)).Union();
         },
         {*x}, {*y});
  }
  return Status::ok();
}

// PRelu with a run-time or broadcasting slope: Maximum(x, 0) + Minimum(x, 0) * slope.
Status Lowering::lowerPReluMinMax(const Node& n) {
  if (resolve(n.input(0))->dtype() != DType::Float32 &&
      resolve(n.input(0))->dtype() != DType::Undefined)
    return bad("PRelu on {} data", dtypeName(resolve(n.input(0))->dtype()));
  auto x = input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  const std::string base = n.output(0)->name();
  Expected<uint32_t> slope = 0u;
  auto slopeConst = constOf(n.input(1));
  const int rank = rankOf(n.input(0));
  auto channels = rank >= 2 ? dimOf(n.input(0), 1) : std::nullopt;
  if (slopeConst && slopeConst->tensor.dims().size() == 1 && channels && rank >= 3 &&
      slopeConst->tensor.dims()[0] == *channels && *channels != 1) {
    // A [C] slope is per channel (axis 1): reshaped to [C, 1, ...] so it broadcasts that way.
    Tensor t = slopeConst->quantized ? dequantize(*slopeConst) : slopeConst->tensor;
    std::vector<int32_t> dims(static_cast<size_t>(rank - 1), 1);
    dims[0] = static_cast<int32_t>(*channels);
    slope = floatConst(t.copyValues<float>(), slopeConst->name + "_per_channel", dims);
  } else {
    slope = input(n.input(1), Layout::Onnx);
  }
  if (!slope) return slope.status();
  uint32_t zero = floatConst({0.0f}, base + "_zero", {});
  auto mid = [&](const std::string& suffix) {
    MsTensor t = out_.tensors[*x];
    t.name = base + suffix;
    t.nodeType = kNodeCNode;
    t.data.reset();
    t.quantParams.clear();
    return addTensor(std::move(t));
  };
  uint32_t pos = mid("_pos"), neg = mid("_neg");
  emit(fb::PrimitiveType_Maximum, empty<fb::Maximum>(), {*x, zero}, {pos});
  emit(fb::PrimitiveType_Minimum, empty<fb::Minimum>(), {*x, zero}, {neg});
  MsTensor scaled;
  scaled.name = base + "_scaled";
  scaled.dataType = kTypeFloat32;
  uint32_t sc = addTensor(std::move(scaled));
  emit(fb::PrimitiveType_MulFusion, empty<fb::MulFusion>(), {neg, *slope}, {sc});
  auto y = output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  emit(fb::PrimitiveType_AddFusion, empty<fb::AddFusion>(), {pos, sc}, {*y});
  return Status::ok();
}

Status Lowering::lowerMisc(const Node& n) {
  const std::string& op = n.opType();
  auto onnxInputs = [&](std::vector<uint32_t>& ids) -> Status {
    for (const Value* v : n.inputs()) {
      if (!v) return bad("an omitted input");
      auto id = input(v, Layout::Onnx);
      if (!id) return id.status();
      ids.push_back(*id);
    }
    return Status::ok();
  };
  std::vector<uint32_t> ins;
  if (op == "PRelu") {
    const int rank = rankOf(n.input(0));
    auto slope = constOf(n.input(1));
    if (!slope) return lowerPReluMinMax(n);
    Tensor s = slope->quantized ? dequantize(*slope) : slope->tensor;
    auto c = rank >= 2 ? dimOf(n.input(0), 1) : std::nullopt;
    const uint64_t count = s.elementCount();
    // Per-channel slopes ([C], [C,1,1]) or one shared slope; anything else broadcasts differently.
    bool perChannel = c && count == static_cast<uint64_t>(*c) &&
                      (s.dims().size() == static_cast<size_t>(rank) - 1 && s.dims()[0] == *c);
    if ((count != 1 && !perChannel) || (count != 1 && rank != 4 && rank != 2))
      return lowerPReluMinMax(n);
    const Layout layout = rank == 4 ? Layout::Nhwc : Layout::Onnx;
    auto x = input(n.input(0), layout);
    if (!x) return x.status();
    std::vector<float> v = s.copyValues<float>();
    uint32_t ts = floatConst(v, slope->name, {static_cast<int32_t>(v.size())});
    auto y = output(n.output(0), layout);
    if (!y) return y.status();
    const bool shared = count == 1;
    emit(fb::PrimitiveType_PReLUFusion,
         [=](FBB& b) { return fb::CreatePReLUFusion(b, shared).Union(); }, {*x, ts}, {*y});
    return Status::ok();
  }
  if (op == "Where") {
    if (Status s = onnxInputs(ins); !s) return s;
    auto y = output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    emit(fb::PrimitiveType_Where, empty<fb::Where>(), ins, {*y});
    return Status::ok();
  }
  if (op == "Tile" || op == "Expand") {
    auto x = input(n.input(0), Layout::Onnx);
    if (!x) return x.status();
    std::vector<int64_t> values;
    if (op == "Expand") {
      auto shape = staticShape(n.output(0));
      if (!shape) return bad("unknown output shape");
      values = *shape;
    } else {
      auto c = constOf(n.input(1));
      if (!c) {
        auto dyn = int32Input(n.input(1));
        if (!dyn) return dyn.status();
        auto y = output(n.output(0), Layout::Onnx);
        if (!y) return y.status();
        emit(fb::PrimitiveType_TileFusion, [](FBB& b) { return fb::CreateTileFusion(b).Union(); },
             {*x, *dyn}, {*y});
        return Status::ok();
      }
      values = intValues(c->tensor);
    }
    uint32_t t = intConst(values, n.output(0)->name() + (op == "Tile" ? "_multiples" : "_shape"));
    auto y = output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    if (op == "Tile")
      emit(fb::PrimitiveType_TileFusion, [](FBB& b) { return fb::CreateTileFusion(b).Union(); },
           {*x, t}, {*y});
    else
      emit(fb::PrimitiveType_BroadcastTo,
           [=](FBB& b) { return fb::CreateBroadcastTo(b, b.CreateVector(values)).Union(); },
           {*x, t}, {*y});
    return Status::ok();
  }
  if (op == "Shape" || op == "Size") {
    if (op == "Shape" && (n.attribute("start") || n.attribute("end")))
      return bad("start/end attributes");
    auto x = input(n.input(0), Layout::Onnx);
    if (!x) return x.status();
    auto y = output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    if (op == "Shape")
      emit(fb::PrimitiveType_Shape, empty<fb::Shape>(), {*x}, {*y});
    else
      emit(fb::PrimitiveType_Size, empty<fb::Size>(), {*x}, {*y});
    return Status::ok();
  }
  if (op == "TopK") {
    const int rank = rankOf(n.input(0));
    int64_t axis = intAttr(n, "axis", -1);
    if (axis < 0) {
      if (rank < 0) return bad("negative axis over an unknown rank");
      axis += rank;
    }
    auto x = input(n.input(0), Layout::Onnx);
    if (!x) return x.status();
    std::optional<int64_t> k;
    if (const Attribute* a = n.attribute("k"))
      k = a->asInt();
    else if (auto c = constOf(n.input(1))) {
      auto v = intValues(c->tensor);
      if (v.size() == 1) k = v[0];
    }
    uint32_t tk;
    if (k) {
      tk = intConst({*k}, n.output(0)->name() + "_k");
    } else {
      if (!n.input(1)) return bad("no k");
      auto dyn = int32Input(n.input(1));
      if (!dyn) return dyn.status();
      tk = *dyn;
    }
    const bool largest = intAttr(n, "largest", 1) != 0, sorted = intAttr(n, "sorted", 1) != 0;
    std::vector<uint32_t> outs;
    for (const Value* o : n.outputs()) {
      auto y = output(o, Layout::Onnx);
      if (!y) return y.status();
      outs.push_back(*y);
    }
    emit(
        fb::PrimitiveType_TopKFusion,
        [=](FBB& b) { return fb::CreateTopKFusion(b, sorted, axis, largest ? 1 : 0).Union(); },
        {*x, tk}, outs);
    return Status::ok();
  }
  if (op == "Range") {
    if (Status s = onnxInputs(ins); !s) return s;
    auto y = output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    const int64_t dtype = out_.tensors[*y].dataType;
    emit(fb::PrimitiveType_Range,
         [=](FBB& b) { return fb::CreateRange(b, dtype, 0, 0, 1).Union(); }, ins, {*y});
    return Status::ok();
  }
  if (op == "ConstantOfShape") {
    Tensor value = Tensor::fromValues<float>(DType::Float32, {1}, std::vector<float>{0});
    if (const Attribute* a = n.attribute("value")) value = a->asTensor();
    auto s = scalarValue(value);
    auto type = typeIdOf(value.dtype());
    if (!s || !type ||
        (*type != kTypeFloat32 && *type != kTypeInt32 && *type != kTypeFloat16 &&
         *type != kTypeBool && *type != kTypeInt64))
      return bad("value of dtype {}", dtypeName(value.dtype()));
    const int64_t dataType = *type == kTypeInt64 ? kTypeInt32 : *type;
    auto shapeIn = input(n.input(0), Layout::Onnx);
    if (!shapeIn) return shapeIn.status();
    uint32_t shapeId = *shapeIn;
    if (auto c = constOf(n.input(0))) shapeId = intConst(intValues(c->tensor), c->name + "_i32");
    auto y = output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    const float v = static_cast<float>(*s);
    emit(fb::PrimitiveType_ConstantOfShape,
         [=](FBB& b) {
           return fb::CreateConstantOfShape(b, dataType, b.CreateVector(std::vector<float>{v}))
               .Union();
         },
         {shapeId}, {*y});
    return Status::ok();
  }
  if (op == "CumSum") {
    auto x = input(n.input(0), Layout::Onnx);
    if (!x) return x.status();
    auto c = constOf(n.input(1));
    uint32_t ta;
    if (c) {
      auto axisValues = intValues(c->tensor);
      if (axisValues.size() != 1) return bad("axis with {} values", axisValues.size());
      int64_t axis = axisValues[0];
      if (axis < 0) axis += rankOf(n.input(0));
      ta = intConst({axis}, n.output(0)->name() + "_axis", std::vector<int32_t>{});
    } else {
      auto dyn = int32Input(n.input(1));
      if (!dyn) return dyn.status();
      ta = *dyn;
    }
    auto y = output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    const bool exclusive = intAttr(n, "exclusive", 0) != 0, reverse = intAttr(n, "reverse", 0) != 0;
    emit(fb::PrimitiveType_CumSum,
         [=](FBB& b) { return fb::CreateCumSum(b, exclusive, reverse).Union(); }, {*x, ta}, {*y});
    return Status::ok();
  }
  return Status(ErrorCode::Internal, fmt::format("no lowering for {}", op));
}

Status Lowering::lowerNode(const Node& n) {
  const std::string& op = n.opType();
  if (op == "Constant" || op == "DequantizeLinear") {
    // Constants are materialized where they are read; a DequantizeLinear over constants becomes
    // a quantized weight (or a dequantized constant) at each reader.
    if (constOf(n.output(0))) return Status::ok();
    return bad("DequantizeLinear over a non-constant input (.ms has no dequantize op for "
               "activations in a float model)");
  }
  if (op == "Add") {
    // A bias-corrected quantized weight (see constOf) is materialized where it is read.
    auto c = constOf(n.output(0));
    if (c && c->quantized) return Status::ok();
  }
  if (op == "Identity" || op == "Dropout") {
    if (op == "Dropout" && n.outputs().size() > 1 && n.output(1) &&
        (n.output(1)->hasUses() || n.output(1)->isGraphOutput()))
      return bad("the mask output of Dropout");
    if (op == "Dropout" && n.input(2)) {
      auto c = constOf(n.input(2));
      auto on = c ? scalarValue(c->tensor) : std::nullopt;
      auto r = n.input(1) ? constOf(n.input(1)) : std::nullopt;
      auto ratio = r ? scalarValue(r->tensor) : std::nullopt;
      // Training mode drops elements unless the ratio is 0.
      if ((!on || *on != 0) && (!ratio || *ratio != 0))
        return bad("training_mode that is not a constant false, with a non-zero ratio");
    }
    alias_[n.output(0)] = resolve(n.input(0));
    return Status::ok();
  }
  if (op == "Conv") return lowerConv(n);
  if (op == "ConvTranspose") return lowerConvTranspose(n);
  if (op == "Gemm") return lowerGemm(n);
  if (op == "MatMul") return lowerMatMul(n);
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "GlobalMaxPool")
    return lowerPool(n);
  static const std::set<std::string> activations = {"Relu",        "Sigmoid",   "Tanh", "HardSwish",
                                                    "Softplus",    "LeakyRelu", "Elu",  "Gelu",
                                                    "HardSigmoid", "Clip"};
  if (activations.count(op)) return lowerActivation(n);
  static const std::set<std::string> binary = {
      "Add",   "Sub",  "Mul",     "Div",         "Pow",
      "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
      "And",   "Or",   "Mod"};
  if (binary.count(op)) return lowerBinary(n);
  if (op == "Max" || op == "Min") {
    size_t count = 0;
    for (const Value* v : n.inputs())
      count += v != nullptr;
    return count == 2 ? lowerBinary(n) : lowerVariadic(n);
  }
  if (op == "Sum") return lowerVariadic(n);
  static const std::set<std::string> unary = {"Abs",        "Neg", "Floor", "Ceil", "Round",
                                              "Reciprocal", "Sin", "Cos",   "Erf",  "Not",
                                              "Sqrt",       "Log", "Exp"};
  if (unary.count(op)) return lowerUnary(n);
  if (op == "Cast") return lowerCast(n);
  if (op == "Reshape") return lowerReshape(n);
  if (op == "Flatten") return lowerFlatten(n);
  if (op == "Squeeze" || op == "Unsqueeze") return lowerSqueeze(n);
  if (op == "Transpose") return lowerTranspose(n);
  if (op == "Concat") return lowerConcat(n);
  if (op == "Split") return lowerSplit(n);
  if (op == "Slice") return lowerSlice(n);
  if (op == "Gather" || op == "GatherND") return lowerGather(n);
  if (op == "Pad") return lowerPad(n);
  if (op == "Resize" || op == "Upsample") return lowerResize(n);
  if (op.rfind("Reduce", 0) == 0) return lowerReduce(n);
  if (op == "Softmax" || op == "LogSoftmax") return lowerSoftmax(n);
  if (op == "ArgMax" || op == "ArgMin") return lowerArgMinMax(n);
  if (op == "BatchNormalization" || op == "InstanceNormalization" || op == "LayerNormalization" ||
      op == "LpNormalization" || op == "LRN")
    return lowerNorm(n);
  if (op == "DepthToSpace" || op == "SpaceToDepth") return lowerSpaceDepth(n);
  return lowerMisc(n);
}

Expected<MsGraph> Lowering::run() {
  // 1. Every node that has no .ms op, all at once.
  std::vector<std::string> unsupported;
  for (const auto& node : graph_.nodes()) {
    std::string reason = msUnsupportedReason(*node, opset_);
    if (!reason.empty())
      unsupported.push_back(fmt::format("'{}' ({}): {}", node->name(), node->opType(), reason));
  }
  if (!unsupported.empty())
    return Status(ErrorCode::MsLowerUnsupported,
                  fmt::format("{} node(s) have no MindSpore Lite op: {}", unsupported.size(),
                              fmt::join(unsupported, "; ")),
                  "replace these ops in the exporter, or run `kiln check MODEL --target ms` to "
                  "see every unsupported node");

  // 2. Activations folded into their producer (RELU/RELU6 only, ms.md §4.6).
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

  // 3. Graph inputs keep their ONNX names, layout and dtype.
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

  // 4. Nodes in order.
  for (const auto& node : graph_.nodes()) {
    if (folded_.count(node.get())) continue;
    node_ = node.get();
    if (Status s = lowerNode(*node); !s) return s;
  }

  // 5. Graph outputs: ONNX layout under the ONNX name, produced by a node.
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
    emit(fb::PrimitiveType_Reshape, empty<fb::Reshape>(), {*x, s}, {id});
    out_.outputs.push_back(id);
  }
  return std::move(out_);
}

} // namespace

Expected<MsGraph> lowerToMs(const Model& model, const MsWriteOptions& options) {
  if (!model.graph)
    return Status(ErrorCode::EmptyGraph, "model has no graph", "pass a model with a graph");
  Lowering lowering(model, options);
  return lowering.run();
}

} // namespace kiln::ms

namespace kiln {

std::string msUnsupportedReason(const Node& node, int64_t opset) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return fmt::format("domain '{}' has no MindSpore Lite ops", node.domain());
  if (!node.subgraphs().empty()) return "control flow with subgraphs is not lowered to .ms";
  if (!ms::loweredOps().count(node.opType()))
    return fmt::format("no MindSpore Lite op for ONNX {}", node.opType());
  return {};
}

} // namespace kiln
