// The shared machinery of .ms lowering (ms.md §4.5, §4.6, §5): layouts, constants, weights and
// weight-quant parameters, the tensors and nodes every op family's rule emits through.
#include "ms_context.h"

#include <cmath>
#include <type_traits>

#include "kiln/ir/constant.h"
#include "kiln/passes/expand_conv_pool.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/tensor_util.h"
#include "ms_type_ids.h"
#include "ops/attributes.h"
#include "ops/conv.h"
#include "ops/quant.h"

namespace kiln::ms {

std::vector<int64_t> intValues(const Tensor& t) {
  switch (t.dtype()) {
  case DType::Int64:
  case DType::Int32:
  case DType::Int16:
  case DType::Int8:
  case DType::UInt8:
    return rt::toInt64Vector(t);
  default:
    return {}; // not an index tensor .ms lowers
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

Tensor permuteTensor(const Tensor& t, const std::vector<int64_t>& perm) {
  const auto& dims = t.dims();
  const size_t rank = dims.size();
  std::vector<int64_t> outDims(rank);
  for (size_t i = 0; i < rank; ++i)
    outDims[i] = dims[static_cast<size_t>(perm[i])];
  const size_t elemSize = static_cast<size_t>(dtypeBits(t.dtype()) / 8);
  const uint64_t count = t.elementCount();
  std::vector<uint8_t> out(count * elemSize);
  if (rank >= 2 && count > 0 &&
      (elemSize == 1 || elemSize == 2 || elemSize == 4 || elemSize == 8)) {
    // Output order, one innermost run at a time: a source offset kept by an odometer over the
    // outer axes, the run read with the innermost axis' source stride.
    std::vector<int64_t> stride(rank, 1), srcStride(rank, 1), idx(rank, 0);
    for (size_t i = rank; i-- > 1;)
      srcStride[i - 1] = srcStride[i] * dims[i];
    for (size_t k = 0; k < rank; ++k)
      stride[k] = srcStride[static_cast<size_t>(perm[k])];
    const int64_t inner = outDims[rank - 1], innerStride = stride[rank - 1];
    const uint8_t* src = t.data();
    auto run = [&](auto width) {
      constexpr size_t w = decltype(width)::value;
      uint8_t* dst = out.data();
      int64_t offset = 0;
      for (uint64_t o = 0; o < count; o += static_cast<uint64_t>(inner)) {
        const uint8_t* from = src + static_cast<size_t>(offset) * w;
        for (int64_t i = 0; i < inner; ++i)
          std::memcpy(dst + static_cast<size_t>(i) * w,
                      from + static_cast<size_t>(i * innerStride) * w, w);
        dst += static_cast<size_t>(inner) * w;
        for (size_t k = rank - 1; k-- > 0;) {
          offset += stride[k];
          if (++idx[k] < outDims[k]) break;
          offset -= stride[k] * outDims[k];
          idx[k] = 0;
        }
      }
    };
    switch (elemSize) {
    case 1:
      run(std::integral_constant<size_t, 1>{});
      break;
    case 2:
      run(std::integral_constant<size_t, 2>{});
      break;
    case 4:
      run(std::integral_constant<size_t, 4>{});
      break;
    default:
      run(std::integral_constant<size_t, 8>{});
      break;
    }
    return Tensor(t.dtype(), outDims, Buffer::owned(std::move(out)));
  }
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
    const size_t ch = !c.blockSize && c.scales.size() == 1
                          ? 0
                          : static_cast<size_t>(ops::quantParamIndex(static_cast<int64_t>(i), inner,
                                                                     channels, c.blockSize));
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

std::optional<Const> LoweringContext::constOf(const Value* v) const {
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
    if (!base || !base->quantized || base->blockSize || !base->meanCorr.empty() ||
        base->scales.size() < 2)
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
    // Made once per value: the lowering asks for a weight's dims, rank and data separately, and
    // uint8 codes are shifted into a new tensor.
    if (auto it = dequantized_.find(v); it != dequantized_.end()) return it->second;
    auto c = dequantizedConst(*p);
    if (c) dequantized_.emplace(v, *c);
    return c;
  }
  return std::nullopt;
}

std::optional<Const> LoweringContext::dequantizedConst(const Node& dq) const {
  const Node* p = &dq;
  {
    auto codes = constOf(p->input(0));
    auto scale = constOf(p->input(1));
    if (!codes || !scale || codes->quantized || scale->tensor.dtype() != DType::Float32)
      return std::nullopt;
    DType dt = codes->tensor.dtype();
    const bool packed = dt == DType::Int4 || dt == DType::UInt4;
    if (dt != DType::Int8 && dt != DType::Int16 && dt != DType::UInt8 && !packed)
      return std::nullopt;
    Const c;
    c.tensor = codes->tensor;
    // .ms has no 4-bit tensor: int4 (-8..7) and uint4 (0..15) codes both fit int8 unchanged.
    if (packed) {
      std::vector<int64_t> wide = rt::toInt64Vector(c.tensor);
      c.tensor = Tensor::fromValues<int8_t>(DType::Int8, c.tensor.dims(),
                                            std::vector<int8_t>(wide.begin(), wide.end()));
    }
    c.quantized = true;
    c.modelCodes = p->docString() == kModelWeightCodesDoc;
    c.scales = scale->tensor.copyValues<float>();
    c.name = codes->name;
    if (const Value* zp = p->input(2)) {
      auto z = constOf(zp);
      if (!z || z->quantized) return std::nullopt;
      // The zero point has the codes' dtype (int4 included), which intValues does not read.
      c.zeros = rt::toInt64Vector(z->tensor);
      if (c.zeros.size() != 1 && c.zeros.size() != c.scales.size()) return std::nullopt;
    }
    const int64_t rank = static_cast<int64_t>(c.tensor.dims().size());
    auto axisAttr = ops::intAttr(*p, "axis", 1);
    auto blockAttr = ops::intAttr(*p, "block_size", 0);
    if (!axisAttr || !blockAttr) return std::nullopt;
    int64_t axis = *axisAttr;
    if (axis < 0) axis += rank;
    if (*blockAttr > 0) {
      // Blocked: the scale has the codes' dims with the axis counted in blocks.
      if (axis < 0 || axis >= rank || dt == DType::UInt8) return std::nullopt;
      std::vector<int64_t> want = c.tensor.dims();
      want[static_cast<size_t>(axis)] =
          (want[static_cast<size_t>(axis)] + *blockAttr - 1) / *blockAttr;
      if (scale->tensor.dims() != want || (!c.zeros.empty() && c.zeros.size() != c.scales.size()))
        return std::nullopt;
      c.axis = axis;
      c.blockSize = *blockAttr;
      return c;
    }
    if (c.scales.size() != 1 &&
        (axis < 0 || axis >= rank ||
         c.tensor.dims()[static_cast<size_t>(axis)] != static_cast<int64_t>(c.scales.size())))
      return std::nullopt;
    c.axis = c.scales.size() == 1 ? 0 : axis;
    if (dt == DType::UInt8) { // stored as int8 with the zero point moved by 128
      // u - 128 as int8 is u with its top bit flipped.
      const uint8_t* from = c.tensor.data();
      std::vector<uint8_t> shifted(c.tensor.elementCount());
      for (size_t i = 0; i < shifted.size(); ++i)
        shifted[i] = static_cast<uint8_t>(from[i] ^ 0x80u);
      c.tensor = Tensor(DType::Int8, c.tensor.dims(), Buffer::owned(std::move(shifted)));
      for (auto& z : c.zeros)
        z -= 128;
      if (c.zeros.empty()) c.zeros.assign(c.scales.size(), -128);
    }
    return c;
  }
  return std::nullopt;
}

Expected<uint32_t> LoweringContext::constTensor(const Tensor& t, const std::string& name,
                                                int format) {
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

Expected<uint32_t> LoweringContext::permutedConstTensor(const Tensor& t,
                                                        const std::vector<int64_t>& perm,
                                                        const std::string& name, int format) {
  const auto& dims = t.dims();
  if (perm.size() != dims.size() || dims.size() < 2 || !t.buffer())
    return constTensor(permuteTensor(t, perm), name, format);
  std::vector<int64_t> outDims(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    outDims[i] = dims[static_cast<size_t>(perm[i])];
  // Same dims and type as the permuted copy; the bytes stay the source's until written.
  KILN_ASSIGN_OR_RETURN(uint32_t id,
                        constTensor(Tensor(t.dtype(), outDims, t.buffer()), name, format));
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity = identity && perm[i] == static_cast<int64_t>(i);
  if (!identity) {
    MsTensor& m = out_.tensors[id];
    m.writePerm = perm;
    m.sourceDims = dims;
  }
  return id;
}

Expected<uint32_t> LoweringContext::broadcastConstNhwc(const Const& c) {
  Tensor t = c.quantized ? dequantize(c) : c.tensor;
  const size_t rank = t.dims().size();
  if (rank == 0 || rank > 4) return constTensor(t, c.name);
  std::vector<int64_t> dims(4 - rank, 1);
  dims.insert(dims.end(), t.dims().begin(), t.dims().end());
  Tensor padded(t.dtype(), dims, t.buffer());
  return constTensor(permuteTensor(padded, kToNhwc), c.name + "_nhwc", kFormatNHWC);
}

Expected<std::vector<uint32_t>> LoweringContext::inputs(const Node& n, Layout layout) {
  std::vector<uint32_t> ids;
  for (const Value* v : n.inputs()) {
    if (!v) return bad("an omitted input");
    KILN_ASSIGN_OR_RETURN(uint32_t id, input(v, layout));
    ids.push_back(id);
  }
  return ids;
}

Expected<uint32_t> LoweringContext::input(const Value* v, Layout layout) {
  v = resolve(v);
  if (auto c = constOf(v)) {
    const bool permute = layout == Layout::Nhwc && c->tensor.dims().size() == 4;
    auto key = std::make_pair(v, permute ? 1 : 0);
    auto it = constCache_.find(key);
    if (it != constCache_.end()) return it->second;
    Tensor t = c->quantized ? dequantize(*c) : c->tensor;
    auto id = permute ? permutedConstTensor(t, kToNhwc, c->name + "_nhwc", kFormatNHWC)
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
  // An int8 activation keeps its QuantParam: the transposed codes mean the same numbers.
  uint32_t to = addTensor(std::move(t));
  const Node* saved = node_;
  MsNode n;
  n.name = uniqueName(out_.tensors[to].name);
  n.primitiveType = fb::PrimitiveType_Transpose;
  n.attributes = emptyTable<fb::Transpose>();
  n.inputs = {from, *perm};
  n.outputs = {to};
  pushNode(std::move(n));
  node_ = saved;
  (toNhwc ? s.nhwc : s.onnx) = to;
  return to;
}

Expected<uint32_t> LoweringContext::output(const Value* v, Layout layout) {
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

Expected<uint32_t> LoweringContext::weightTensor(const Value* v, const std::vector<int64_t>& perm,
                                                 int64_t preferredDim, int format,
                                                 bool* quantized) {
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
    if (c->blockSize == 0 && (c->scales.size() == 1 || newAxis == preferredDim)) {
      // Permuted while written (MsTensor::writePerm), as float weights are.
      auto id = doPermute ? permutedConstTensor(c->tensor, perm, c->name, format)
                          : constTensor(c->tensor, c->name, format);
      const Tensor& codes = c->tensor;
      if (!id) return id;
      MsTensor& t = out_.tensors[*id];
      t.isQuantizedWeight = true;
      t.modelCodes = c->modelCodes;
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
  if (doPermute) return permutedConstTensor(t, perm, c->name, format);
  return constTensor(t, c->name, format);
}

std::optional<Padding> convPadding(const Node& n, const std::vector<int64_t>& inHW,
                                   const std::vector<int64_t>& kernel,
                                   const std::vector<int64_t>& strides,
                                   const std::vector<int64_t>& dilations, std::string* error) {
  Padding p;
  auto autoPadAttr = ops::stringAttr(n, "auto_pad", "");
  auto padsAttr = ops::intsAttr(n, "pads", std::vector<int64_t>(4, 0));
  if (!autoPadAttr || !padsAttr) {
    *error = (autoPadAttr ? padsAttr.status() : autoPadAttr.status()).message();
    return std::nullopt;
  }
  const std::string autoPad = *autoPadAttr;
  if (autoPad.empty() || autoPad == "NOTSET") {
    const std::vector<int64_t>& pads = *padsAttr;
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
    const ops::AxisPads same =
        ops::samePadding(inHW[i], kernel[i], strides[i], dilations[i], autoPad == "SAME_UPPER");
    p.list.push_back(same.begin); // .ms order: top, bottom, left, right
    p.list.push_back(same.end);
  }
  return p;
}

std::string withConvPoolExpansion(const Node& n, const lowering::OpContext& context,
                                  std::string why) {
  if (why.empty() || !isNdConvPool(n)) return why;
  const std::string blocker = convPoolExpansionBlocker(n, context.opset);
  if (blocker.empty()) return why + "; the conversion pipeline rewrites it into 2-D ops";
  return why + "; it cannot be rewritten into 2-D ops either: " + blocker;
}

std::vector<int64_t> inputHW(const Value* v) {
  if (!v->shape().hasRank() || v->shape().rank() != 4) return {};
  std::vector<int64_t> hw;
  for (size_t i = 2; i < 4; ++i)
    hw.push_back(v->shape()[i].isStatic() ? v->shape()[i].value() : -1);
  return hw;
}

uint32_t LoweringContext::reshapeTensor(uint32_t from, const std::vector<int64_t>& dims,
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
  emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {from, shape}, {to});
  return to;
}

uint32_t LoweringContext::transposeTensor(uint32_t from, bool toNhwc, const std::string& name) {
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
  emit(fb::PrimitiveType_Transpose, emptyTable<fb::Transpose>(), {from, *perm}, {to});
  return to;
}

Expected<LoweringContext::View1d> LoweringContext::begin1d(const Node& n) {
  const std::string& op = n.opType();
  auto inShape = staticShape(n.input(0));
  auto outShape = staticShape(n.output(0));
  if (rankOf(n.input(0)) != 3 || rankOf(n.output(0)) != 3)
    return dynamicShape("1-D {} over an input or output of unknown rank", op);
  KILN_ASSIGN_OR_RETURN(const std::string autoPad, ops::stringAttr(n, "auto_pad", "NOTSET"));
  if (autoPad != "NOTSET" && autoPad != "VALID")
    return bad("auto_pad '{}' on a 1-D {}", autoPad, op);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ops::intsAttr(n, "pads", {0, 0}));
  if (autoPad == "VALID") pads = {0, 0};
  if (pads.size() != 2) return bad("pads need 2 values");
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> strides, ops::intsAttr(n, "strides", {1}));
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> dilations, ops::intsAttr(n, "dilations", {1}));
  View1d view;
  view.strides = {1, strides.empty() ? 1 : strides[0]};
  view.dilations = {1, dilations.empty() ? 1 : dilations[0]};
  view.padList = {0, 0, pads[0], pads[1]};
  const std::string base = n.output(0)->name();
  auto x = input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  uint32_t x4;
  if (inShape && outShape) {
    view.outShape = *outShape;
    x4 = reshapeTensor(*x, {(*inShape)[0], (*inShape)[1], 1, (*inShape)[2]}, base + "_in4d");
  } else {
    // Dynamic dims: [N, C, L] gets its unit axis from an Unsqueeze, which any length takes.
    std::vector<int32_t> d = dimsOf(n.input(0));
    x4 = intermediate(*x, base + "_in4d");
    out_.tensors[x4].dims = {d[0], d[1], 1, d[2]};
    out_.tensors[x4].format = kFormatNCHW;
    const std::vector<int64_t> axis = {2};
    emit(fb::PrimitiveType_Unsqueeze,
         [=](FBB& b) { return fb::CreateUnsqueeze(b, b.CreateVector(axis)).Union(); }, {*x}, {x4});
  }
  view.x = transposeTensor(x4, true, base + "_in4d_nhwc");
  MsTensor y;
  y.name = base + "_out4d_nhwc";
  auto type = typeIdOf(n.output(0)->dtype());
  y.dataType = type ? *type : kTypeFloat32;
  y.format = kFormatNHWC;
  const std::vector<int32_t> od = dimsOf(n.output(0));
  y.dims = {od[0], 1, od[2], od[1]};
  view.y = addTensor(std::move(y));
  return view;
}

Status LoweringContext::end1d(const Node& n, const View1d& view) {
  const std::string base = n.output(0)->name();
  uint32_t y4 = transposeTensor(view.y, false, base + "_out4d");
  auto out = output(fusedOutput(n), Layout::Onnx);
  if (!out) return out.status();
  if (view.outShape.empty()) {
    const std::vector<int64_t> axis = {2};
    emit(fb::PrimitiveType_Squeeze,
         [=](FBB& b) { return fb::CreateSqueeze(b, b.CreateVector(axis)).Union(); }, {y4}, {*out});
    return Status::ok();
  }
  uint32_t shape = intConst(view.outShape, base + "_shape");
  emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {y4, shape}, {*out});
  return Status::ok();
}

// The .ms tensor of an index-like input (axes, k, repeats) read at run time, as int32.
Expected<uint32_t> LoweringContext::int32Input(const Value* v) {
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
  emit(fb::PrimitiveType_Cast, emptyTable<fb::Cast>(), {*id, dst}, {to});
  return to;
}
uint32_t LoweringContext::intConst(const std::vector<int64_t>& values, const std::string& name,
                                   std::optional<std::vector<int32_t>> dims) {
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

uint32_t LoweringContext::floatConst(const std::vector<float>& values, const std::string& name,
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

void LoweringContext::emit(fb::PrimitiveType type, AttrBuilder attrs, std::vector<uint32_t> inputs,
                           std::vector<uint32_t> outputs, bool quantized) {
  if (type == fb::PrimitiveType_Where) broadcastWhereOperands(inputs, outputs);
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
  pushNode(std::move(n));
}

Expected<std::optional<std::vector<int64_t>>>
LoweringContext::intsOf(const Node& n, const char* attr, size_t input) const {
  if (n.attribute(attr)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> values, ops::intsAttr(n, attr, {}));
    return std::optional<std::vector<int64_t>>(std::move(values));
  }
  if (const Value* v = n.input(input)) {
    auto c = constOf(v);
    if (!c) return std::optional<std::vector<int64_t>>();
    return std::optional<std::vector<int64_t>>(intValues(c->tensor));
  }
  return std::optional<std::vector<int64_t>>();
}

} // namespace kiln::ms
