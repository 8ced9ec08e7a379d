// .ms rules of the quant family: DequantizeLinear over constants as quantized weights (made where
// they are read); QuantizeLinear / DequantizeLinear of int8 activations as QuantDTypeCast whose
// int8 side carries the QuantParam; the int8 activation facts QLinearConv / QLinearMatMul share
// (ms_quant.h); and the raising of QuantDTypeCast.
#include "backends/ms/ms_quant.h"

#include <cmath>

#include "backends/ms/ms_raise_context.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

const Tensor* initializerOf(const Value* v) {
  return v && v->isInitializer() && !v->isGraphInput() ? &v->initializer() : nullptr;
}

bool isCodeType(DType d) { return d == DType::Int8 || d == DType::UInt8; }

int64_t intAttrOr(const Node& n, const char* name, int64_t fallback) {
  auto v = ops::intAttr(n, name, fallback);
  return v ? *v : fallback;
}

// What QLinearConv / QLinearMatMul need besides int8 codes in and out: constant per-tensor
// activation parameters, constant 8-bit weights with per-tensor or per-channel parameters, an
// int32 constant bias (Conv).
std::string qlinearReason(const Node& n) {
  const bool conv = n.opType() == "QLinearConv";
  if (n.inputs().size() < 8) return "missing inputs";
  if (std::string r = perTensorReason(n.input(1), n.input(2)); !r.empty()) return "x: " + r;
  if (std::string r = perTensorReason(n.input(6), n.input(7)); !r.empty()) return "y: " + r;
  const Tensor* w = initializerOf(n.input(3));
  if (!w || !isCodeType(w->dtype()))
    return "the weight is not a constant of 8-bit codes (.ms int8 kernels take constant weights)";
  if (w->dims().size() != (conv ? 4u : 2u))
    return conv ? "the weight is not 4-D (.ms Conv2DFusion is 2-D)" : "the weight is not 2-D";
  const int64_t channels = conv ? w->dims()[0] : w->dims()[1];
  const Tensor* ws = initializerOf(n.input(4));
  if (!ws || ws->dtype() != DType::Float32 ||
      (ws->elementCount() != 1 && static_cast<int64_t>(ws->elementCount()) != channels))
    return "the weight scale is not a constant float32 per tensor or per output channel";
  if (const Value* wz = n.input(5)) {
    const Tensor* z = initializerOf(wz);
    if (!z || z->dtype() != w->dtype() || z->elementCount() != ws->elementCount())
      return "the weight zero point is not a constant of the scale's size and the codes' type";
  }
  if (conv && n.inputs().size() > 8 && n.input(8)) {
    const Tensor* b = initializerOf(n.input(8));
    if (!b || b->dtype() != DType::Int32 || static_cast<int64_t>(b->elementCount()) != channels)
      return "the bias is not a constant int32 per output channel";
  }
  if (conv) {
    auto group = ops::intAttr(n, "group", 1);
    if (!group) return group.status().message();
    const int64_t inCh = w->dims()[1] * *group;
    if (*group != 1 && !(*group == inCh && *group == channels))
      return "a grouped convolution that is not depthwise (no .ms int8 kernel for it)";
  }
  return {};
}

// Codes producers and readers the lowering keeps int8 (int8CodesReason).
bool int8Producer(const Node& p) {
  if (p.opType() == "QuantizeLinear")
    return intAttrOr(p, "block_size", 0) == 0 &&
           perTensorReason(p.input(1), p.inputs().size() > 2 ? p.input(2) : nullptr).empty() &&
           (p.input(0)->dtype() == DType::Float32 || p.input(0)->dtype() == DType::Undefined);
  if (p.opType() == "QLinearConv" || p.opType() == "QLinearMatMul") return qlinearReason(p).empty();
  return false;
}

bool int8Reader(const Node& u, size_t index) {
  if (u.opType() == "DequantizeLinear")
    return index == 0 && intAttrOr(u, "block_size", 0) == 0 &&
           perTensorReason(u.input(1), u.inputs().size() > 2 ? u.input(2) : nullptr).empty();
  if (u.opType() == "QLinearConv" || u.opType() == "QLinearMatMul")
    return index == 0 && qlinearReason(u).empty();
  return false;
}

} // namespace

std::string perTensorReason(const Value* scale, const Value* zeroPoint) {
  const Tensor* s = initializerOf(scale);
  if (!s || s->dtype() != DType::Float32 || s->elementCount() != 1)
    return "the scale is not one constant float32 (.ms quantizes activations per tensor)";
  if (zeroPoint) {
    const Tensor* z = initializerOf(zeroPoint);
    if (!z || !isCodeType(z->dtype()) || z->elementCount() != 1)
      return "the zero point is not one constant int8/uint8";
  }
  return {};
}

std::string int8CodesReason(const Value* v) {
  if (!v) return "no codes";
  if (v->dtype() != DType::Undefined && !isCodeType(v->dtype()))
    return fmt::format("{} codes (.ms int8 kernels take 8-bit codes)", dtypeName(v->dtype()));
  if (v->isGraphInput() || v->isGraphOutput())
    return "the codes cross the graph's boundary (kept float: .ms int8 tensors stay inside)";
  const Node* p = v->producer();
  if (!p || !(p->domain().empty() || p->domain() == "ai.onnx") || !int8Producer(*p))
    return fmt::format("codes '{}' are not made by a per-tensor QuantizeLinear or a QLinear op the "
                       "target takes",
                       v->name());
  if (!v->hasUses()) return {};
  for (const Use& use : v->uses())
    if (!int8Reader(*use.user, use.inputIndex))
      return fmt::format("codes '{}' are read by {} (only per-tensor DequantizeLinear and "
                         "QLinearConv/QLinearMatMul the target takes keep them int8)",
                         v->name(), use.user->opType());
  return {};
}

std::string qlinearCodesReason(const Node& n) {
  if (std::string r = qlinearReason(n); !r.empty()) return r;
  if (std::string r = int8CodesReason(n.input(0)); !r.empty()) return r;
  return int8CodesReason(n.output(0));
}

MsQuantParam activationParam(const LoweringContext& ctx, const Value* scale, const Value* zeroPoint,
                             DType codes) {
  MsQuantParam p;
  p.scale = rt::toFloatVector(ctx.constOf(scale)->tensor)[0];
  int64_t zp = 0;
  if (zeroPoint) {
    const Tensor z = ctx.constOf(zeroPoint)->tensor;
    zp = static_cast<int64_t>(rt::toFloatVector(z)[0]);
    codes = z.dtype();
  }
  p.zeroPoint = static_cast<int32_t>(codes == DType::UInt8 ? zp - 128 : zp);
  p.numBits = 8;
  p.dstDtype = kTypeInt8;
  return p;
}

void setInt8(LoweringContext& ctx, uint32_t id, const MsQuantParam& param) {
  MsTensor& t = ctx.tensor(id);
  t.dataType = kTypeInt8;
  t.quantParams = {param};
}

Expected<Int8Weight> int8Weight(const LoweringContext& ctx, const Value* codes, const Value* scale,
                                const Value* zeroPoint) {
  auto c = ctx.constOf(codes);
  auto s = ctx.constOf(scale);
  if (!c || !s) return bad("the weight and its scale must be constants");
  const bool shift = c->tensor.dtype() == DType::UInt8;
  Int8Weight w;
  if (shift) {
    std::vector<uint8_t> bytes(c->tensor.elementCount());
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] =
          static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(c->tensor.data()[i]) - 128));
    w.codes = Tensor(DType::Int8, c->tensor.dims(), Buffer::owned(std::move(bytes)));
  } else {
    w.codes = c->tensor;
  }
  const std::vector<float> scales = rt::toFloatVector(s->tensor);
  std::vector<float> zeros(scales.size(), 0.0f);
  if (zeroPoint) {
    auto z = ctx.constOf(zeroPoint);
    if (!z) return bad("the weight zero point must be a constant");
    zeros = rt::toFloatVector(z->tensor);
  }
  for (size_t i = 0; i < scales.size(); ++i) {
    MsQuantParam p;
    p.scale = scales[i];
    p.zeroPoint = static_cast<int32_t>(zeros[i]) - (shift ? 128 : 0);
    w.params.push_back(p);
  }
  return w;
}

// The (scale, zero point) constants of an int8 .ms tensor's QuantParams: scalars for one, 1-D for
// one per channel; nullopt when the tensor has none.
std::optional<std::pair<Value*, Value*>> quantConstants(RaisingContext& ctx, uint32_t t) {
  const auto* params = ctx.tensor(t)->quantParams();
  if (!params || params->size() == 0) return std::nullopt;
  std::vector<float> scales;
  std::vector<int8_t> zeros;
  for (const auto* p : *params) {
    if (!p) return std::nullopt;
    scales.push_back(static_cast<float>(p->scale()));
    zeros.push_back(static_cast<int8_t>(p->zeroPoint()));
  }
  const std::vector<int64_t> dims =
      scales.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{int64_t(scales.size())};
  return std::make_pair(
      ctx.constant(Tensor::fromValues(DType::Float32, dims, scales), "ms_scale"),
      ctx.constant(Tensor::fromValues(DType::Int8, dims, zeros), "ms_zero_point"));
}

// Whether a .ms Conv/MatMul node runs int8 kernels: int8 data in with QuantParams.
bool int8Data(RaisingContext& ctx) {
  const msfb::Tensor* x = ctx.tensor(ctx.inIndex(0));
  return x->dataType() == kTypeInt8 && x->quantParams() && x->quantParams()->size() > 0;
}

namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

// A QuantizeLinear whose codes stay int8 becomes QuantDTypeCast float32 → int8 (the output
// carries the QuantParam); others are refused (decompose-quant then computes them in float).
std::string checkQuantizeLinear(const Node& n, const lowering::OpContext&) {
  if (const DType x = n.input(0) ? n.input(0)->dtype() : DType::Undefined;
      x != DType::Float32 && x != DType::Undefined)
    return fmt::format("QuantizeLinear of {} values (.ms QuantDTypeCast quantizes float32)",
                       dtypeName(x));
  return int8CodesReason(n.output(0));
}

// The layout int8 data keeps: NHWC when the value is held so (a 4-D activation between convs).
Layout layoutOf(const LoweringContext& ctx, const Value* v) {
  return ctx.availableNhwc(v) ? Layout::Nhwc : Layout::Onnx;
}

Status lowerQuantizeLinear(LoweringContext& ctx, const Node& n) {
  const Layout layout = layoutOf(ctx, n.input(0));
  KILN_ASSIGN_OR_RETURN(uint32_t x, ctx.input(n.input(0), layout));
  KILN_ASSIGN_OR_RETURN(uint32_t y, ctx.output(n.output(0), layout));
  setInt8(
      ctx, y,
      activationParam(ctx, n.input(1), n.inputs().size() > 2 ? n.input(2) : nullptr, DType::UInt8));
  ctx.emit(fb::PrimitiveType_QuantDTypeCast,
           [](FBB& b) { return fb::CreateQuantDTypeCast(b, kTypeFloat32, kTypeInt8).Union(); }, {x},
           {y});
  return Status::ok();
}

// .ms holds a DequantizeLinear as a quantized constant, or as QuantDTypeCast int8 → float32 of
// codes that stay int8; codes computed otherwise are refused (decompose-quant then rewrites the
// node into float ops).
std::string checkDequantizeLinear(const Node& n, const lowering::OpContext&) {
  const Value* codes = n.input(0);
  if (!codes || codes->isInitializer()) return {};
  const Node* p = codes->producer();
  if (p && p->opType() == "Constant") return {};
  if (int8CodesReason(codes).empty()) return {};
  return "DequantizeLinear over a non-constant input (.ms has no dequantize op for activations "
         "in a float model)";
}

// A DequantizeLinear over constants becomes a quantized weight (or a dequantized constant) at
// each reader; over int8 codes, QuantDTypeCast int8 → float32 (the input carries the QuantParam).
Status lowerDequantizeLinear(LoweringContext& ctx, const Node& n) {
  if (ctx.constOf(n.output(0))) return Status::ok();
  if (int8CodesReason(n.input(0)).empty()) {
    const Layout layout = layoutOf(ctx, n.input(0));
    KILN_ASSIGN_OR_RETURN(uint32_t x, ctx.input(n.input(0), layout));
    KILN_ASSIGN_OR_RETURN(uint32_t y, ctx.output(n.output(0), layout));
    ctx.emit(fb::PrimitiveType_QuantDTypeCast,
             [](FBB& b) { return fb::CreateQuantDTypeCast(b, kTypeInt8, kTypeFloat32).Union(); },
             {x}, {y});
    return Status::ok();
  }
  // Constant, but not as constOf takes it: say what it got rather than "non-constant".
  auto codes = ctx.constOf(n.input(0));
  auto scale = n.input(1) ? ctx.constOf(n.input(1)) : std::nullopt;
  if (codes && scale)
    return bad("DequantizeLinear over constant {} codes with a {} scale (.ms quantized weights "
               "take int4, uint4, int8, uint8 or int16 codes, a float32 scale and a zero point "
               "of the scale's size)",
               dtypeName(codes->tensor.dtype()), dtypeName(scale->tensor.dtype()));
  return bad("DequantizeLinear over a non-constant input (.ms has no dequantize op for "
             "activations in a float model)");
}

KILN_MS_LOWERING("QuantizeLinear", checkQuantizeLinear, lowerQuantizeLinear);
KILN_MS_LOWERING("DequantizeLinear", checkDequantizeLinear, lowerDequantizeLinear);
// ---- end of lowering

// ---- Raising (.ms → IR)

// The first QuantParam of tensor `t`, nullptr when it has none.
const msfb::QuantParam* firstParam(RaisingContext& ctx, uint32_t t) {
  const auto* params = ctx.tensor(t)->quantParams();
  return params && params->size() > 0 ? params->Get(0) : nullptr;
}

// QuantDTypeCast float32 → int8 is QuantizeLinear with the output's QuantParam, int8 → float32
// DequantizeLinear with the input's (the sides the runtime reads them from; the float side has
// none). With the unit parameter (scale 1, zero point 0) on both sides it is how the data-type
// pass converts plain int8 data (the runtime's Cast converts no int8): a plain Cast.
Status raiseQuantDTypeCast(RaisingContext& ctx, const msfb::Primitive& p) {
  const auto* q = p.value_as_QuantDTypeCast();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  const int src = ctx.tensor(ctx.inIndex(0))->dataType();
  const int dst = static_cast<int>(q ? q->dst_t() : 0);
  const std::optional<DType> to = ms::dtypeOfTypeId(dst);
  if (!to) return ctx.nodeUnsupported("QuantDTypeCast to an unknown type");
  const uint32_t codes = dst == kTypeInt8 ? ctx.outIndex(0) : ctx.inIndex(0);
  const uint32_t other = dst == kTypeInt8 ? ctx.inIndex(0) : ctx.outIndex(0);
  const msfb::QuantParam* param = firstParam(ctx, codes);
  const msfb::QuantParam* otherParam = firstParam(ctx, other);
  const bool unit = [](const msfb::QuantParam* p) {
    return !p || (p->scale() == 1.0 && p->zeroPoint() == 0);
  }(param);
  if (!param || (otherParam && unit)) {
    if (!unit || (otherParam && (otherParam->scale() != 1.0 || otherParam->zeroPoint() != 0)))
      return ctx.nodeUnsupported("QuantDTypeCast with quantization parameters on both sides");
    return ctx.bind(0, ctx.emit("Cast", {x}, {{"to", Attribute::ofInt(dtypeToOnnx(*to))}}));
  }
  const auto* all = ctx.tensor(codes)->quantParams();
  if (all->size() != 1)
    return ctx.nodeUnsupported("QuantDTypeCast with per-channel quantization parameters");
  const bool quantize = src == kTypeFloat32 && dst == kTypeInt8;
  const bool dequantize = src == kTypeInt8 && dst == kTypeFloat32;
  if (!quantize && !dequantize)
    return ctx.nodeUnsupported(
        fmt::format("QuantDTypeCast from TypeId {} to {} with quantization parameters", src, dst));
  Value* scale = ctx.constant(
      Tensor::fromValues<float>(DType::Float32, {}, {static_cast<float>(param->scale())}),
      "ms_scale");
  Value* zero = ctx.constant(
      Tensor::fromValues<int8_t>(DType::Int8, {}, {static_cast<int8_t>(param->zeroPoint())}),
      "ms_zero_point");
  if (!quantize) return ctx.bind(0, ctx.emit("DequantizeLinear", {x, scale, zero}));
  // The executor rounds as the runtime's QuantDTypeCast (x · (1 / scale), half away from zero).
  return ctx.bind(0, ctx.emit("QuantizeLinear", {x, scale, zero},
                              {{"kiln_requantize", Attribute::ofString("ms_fixed_point")}}));
}

} // namespace

KILN_MS_RAISING(QuantDTypeCast, raiseQuantDTypeCast);

} // namespace kiln::ms
