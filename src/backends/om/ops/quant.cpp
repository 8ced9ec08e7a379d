// .om rules for quantized ONNX ops in GraphEngine's quantized form, as ATC lowers an AMCT deploy
// model: QuantizeLinear → AscendQuant; QLinearConv / QLinearMatMul → an int8 Conv2D / MatMulV2
// (int32 out) → AscendDequant → AscendQuant; ConvInteger / MatMulInteger → the int8 op alone;
// DequantizeLinear → AscendAntiQuant. Raising reads them back with integer arithmetic:
// ConvInteger / MatMulInteger plus the int32 bias, the float dequant / requant steps,
// QuantizeLinear and DequantizeLinear.
//
// Codes are int8 on the chip: a uint8 code v travels as v - 128 and its zero point shifts with
// it, so (v - z) is unchanged. Weights are stored symmetric (w - w_zero_point, which must fit
// int8); the input zero point o becomes Conv2D's offset_x (the value its padding takes) and
// -o * sum(w) joins the int32 bias, which makes sum((x - o) * w) + B exact.
#include <cmath>
#include <cstring>
#include <limits>

#include "../om_context.h"
#include "kiln/runtime/tensor_util.h"

namespace kiln::om {
namespace {

// The shift that makes codes of `d` int8 (uint8: -128).
int64_t codeShift(DType d) { return d == DType::UInt8 ? -128 : 0; }
bool isCodeType(DType d) { return d == DType::UInt8 || d == DType::Int8; }

// All values of constant input `i` as doubles; empty when it is not a constant.
std::optional<std::vector<double>> constValues(const Node& n, size_t i) {
  const Tensor* t = constInput(n, i);
  if (!t) return std::nullopt;
  std::vector<double> v(t->elementCount());
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = rt::elementAsDouble(*t, k);
  return v;
}
// A scale or zero point: constant with one value (or `count` values when `count` > 1). An absent
// zero point reads 0.
std::string quantParam(const Node& n, size_t i, const char* what, int64_t count, bool optional) {
  if (!n.input(i)) return optional ? "" : fmt::format("{} is missing", what);
  auto v = constValues(n, i);
  if (!v)
    return fmt::format("{} is not a constant (GraphEngine's quant ops take fixed ones)", what);
  if (v->size() != 1 && static_cast<int64_t>(v->size()) != count)
    return fmt::format("{} has {} values (per-tensor{} only)", what, v->size(),
                       count > 1 ? " or per-output-channel" : "");
  return "";
}
double scalarOf(const Node& n, size_t i, double def = 0) {
  auto v = constValues(n, i);
  return v && !v->empty() ? (*v)[0] : def;
}
// Per-channel values of input `i` (a scalar repeated), `def` when absent.
std::vector<double> perChannel(const Node& n, size_t i, int64_t count, double def = 0) {
  auto v = constValues(n, i).value_or(std::vector<double>{def});
  if (v.size() == 1) v.assign(static_cast<size_t>(count), v[0]);
  return v;
}

int64_t geType(DType d) {
  return geProtoToCxxDType(toGeDType(d).value_or(ge::proto::DT_UNDEFINED));
}

// float32 bits in the low half of a uint64: AscendDequant's deq_scale layout.
uint64_t deqScaleBits(float scale) {
  uint32_t bits = 0;
  std::memcpy(&bits, &scale, sizeof bits);
  return bits;
}
float deqScaleValue(uint64_t packed) {
  const auto bits = static_cast<uint32_t>(packed & 0xffffffffu);
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// AscendQuant: round(x * scale + offset) saturated to int8; a scale past float16's range is
// written as its square root with sqrt_mode (the op applies it twice), as the IR asks.
Port ascendQuant(Lowerer& l, const Port& x, double scale, int64_t offset, const std::string& suffix,
                 const std::string& valueName) {
  OpDef* q = l.op("AscendQuant", suffix);
  l.input(q, x);
  auto& a = *q->mutable_attr();
  const bool sqrtMode = scale > 65504.0;
  a["scale"] = attrF(static_cast<float>(sqrtMode ? std::sqrt(scale) : scale));
  a["offset"] = attrF(static_cast<float>(offset));
  a["sqrt_mode"] = attrB(sqrtMode);
  a["round_mode"] = attrS("Round");
  a["dst_type"] = attrI(geType(DType::Int8));
  return l.output(q, DType::Int8, x.shape, valueName);
}
// AscendAntiQuant: (x + offset) * scale as `dtype`.
Port ascendAntiQuant(Lowerer& l, const Port& x, double scale, int64_t offset, DType dtype,
                     const std::string& suffix, const std::string& valueName) {
  OpDef* q = l.op("AscendAntiQuant", suffix);
  l.input(q, x);
  auto& a = *q->mutable_attr();
  a["scale"] = attrF(static_cast<float>(scale));
  a["offset"] = attrF(static_cast<float>(offset));
  a["dtype"] = attrI(geType(dtype));
  a["sqrt_mode"] = attrB(false);
  return l.output(q, dtype, x.shape, valueName);
}

// The int8 codes of input `i`: the ones a quant rule made, int8 as they are, or uint8 shifted on
// the chip (Cast to float16, exact for 0..255, then AscendQuant by 1 with offset -128).
Port int8CodesOf(Lowerer& l, const Node& n, size_t i) {
  const Value* v = n.input(i);
  // Codes made in another graph (an outer value read by a subgraph) are not ports of this one.
  const bool sameGraph = v->owner() == n.owner();
  if (auto it = l.int8Codes.find(v); sameGraph && it != l.int8Codes.end()) return it->second;
  Port p = l.in(i);
  if (v->dtype() == DType::Int8) return p;
  OpDef* cast = l.op("Cast", v->name() + "_fp16");
  l.input(cast, p);
  (*cast->mutable_attr())["dst_type"] = attrI(geType(DType::Float16));
  Port half = l.output(cast, DType::Float16, p.shape, "");
  Port codes = ascendQuant(l, half, 1.0, -128, v->name() + "_int8", "");
  if (sameGraph) l.int8Codes[v] = codes;
  return codes;
}

// The consumers that read a value's int8 codes directly (input 0 of the quant rules).
bool readsCodes(const Use& use) {
  static const std::set<std::string> kReaders = {"QLinearConv", "QLinearMatMul", "DequantizeLinear",
                                                 "ConvInteger", "MatMulInteger"};
  return use.inputIndex == 0 && kReaders.count(use.user->opType()) &&
         use.user->owner() == use.user->input(0)->owner();
}

// Binds quantized output `v` to its int8 codes `p`; uint8 codes that a graph output or another
// op reads are shifted back (AscendAntiQuant by +128 to float16, exact, then Cast to uint8).
void publishCodes(Lowerer& l, const Value* v, const Port& p) {
  l.int8Codes[v] = p;
  if (v->dtype() == DType::Int8) {
    l.bind(v, p);
    return;
  }
  bool plainReader = v->isGraphOutput();
  for (const Use& use : v->uses())
    plainReader = plainReader || !readsCodes(use);
  if (!plainReader) return;
  Port half = ascendAntiQuant(l, p, 1.0, 128, DType::Float16, "uint8_fp16", "");
  OpDef* cast = l.op("Cast", "uint8");
  l.input(cast, half);
  (*cast->mutable_attr())["dst_type"] = attrI(geType(DType::UInt8));
  l.bind(v, l.output(cast, DType::UInt8, v->shape(), v->name()));
}

// The name an int8 code output takes: the value's own when the codes are that value.
std::string codesName(const Value* v) { return v->dtype() == DType::Int8 ? v->name() : ""; }

// Weight codes minus their zero point (per output channel `axis` 0 for Conv, 1 for a [K, N]
// MatMul operand) as int8, or a reason.
std::string symmetricWeights(const Node& n, size_t wIndex, size_t zIndex, int64_t channelAxis,
                             std::vector<int8_t>* out) {
  const Value* w = n.input(wIndex);
  if (!w || !w->isInitializer() || !isCodeType(w->dtype()))
    return "the weight is not a constant int8/uint8 tensor";
  const auto dims = w->initializer().dims();
  if (dims.size() < 2) return "the weight has fewer than 2 dims";
  const int64_t channels = dims[static_cast<size_t>(channelAxis)];
  if (std::string why = quantParam(n, zIndex, "the weight zero point", channels, true);
      !why.empty())
    return why;
  const std::vector<double> codes = *constValues(n, wIndex);
  const std::vector<double> zero = perChannel(n, zIndex, channels);
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(channelAxis) + 1; d < dims.size(); ++d)
    inner *= dims[d];
  if (out) out->resize(codes.size());
  for (size_t k = 0; k < codes.size(); ++k) {
    const auto c = static_cast<size_t>((static_cast<int64_t>(k) / inner) % channels);
    const double v = codes[k] - zero[c];
    if (v < -128 || v > 127)
      return fmt::format("weight code {} minus its zero point {} leaves int8 (the int8 Conv2D / "
                         "MatMulV2 take symmetric weights)",
                         codes[k], zero[c]);
    if (out) (*out)[k] = static_cast<int8_t>(v);
  }
  return "";
}

// Per output channel: sum of the symmetric weights over everything but `channelAxis`.
std::vector<int64_t> channelSums(const std::vector<int8_t>& w, const std::vector<int64_t>& dims,
                                 int64_t channelAxis) {
  const int64_t channels = dims[static_cast<size_t>(channelAxis)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(channelAxis) + 1; d < dims.size(); ++d)
    inner *= dims[d];
  std::vector<int64_t> sums(static_cast<size_t>(channels), 0);
  for (size_t k = 0; k < w.size(); ++k)
    sums[static_cast<size_t>((static_cast<int64_t>(k) / inner) % channels)] += w[k];
  return sums;
}

// The int32 bias: B - o * sum(w) per output channel (ONNX's B is optional); false past int32.
bool correctedBias(const Node& n, int64_t bIndex, int64_t inputOffset,
                   const std::vector<int64_t>& sums, std::vector<int32_t>* out) {
  std::vector<double> b =
      bIndex >= 0 && n.input(static_cast<size_t>(bIndex))
          ? constValues(n, static_cast<size_t>(bIndex)).value_or(std::vector<double>{})
          : std::vector<double>(sums.size(), 0.0);
  if (b.size() != sums.size()) return false;
  if (out) out->resize(sums.size());
  for (size_t c = 0; c < sums.size(); ++c) {
    const double v = b[c] - static_cast<double>(inputOffset) * static_cast<double>(sums[c]);
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      return false;
    if (out) (*out)[c] = static_cast<int32_t>(v);
  }
  return true;
}

// --- checks -----------------------------------------------------------------------------------

std::string codesInput(const Node& n, size_t i) {
  const Value* x = n.input(i);
  if (!x || !isCodeType(x->dtype())) return "its codes are not int8/uint8";
  if (x->isInitializer()) return "its codes are a constant (folded to float by decompose-quant)";
  return "";
}

std::string checkConvLike(const Node& n, size_t wIndex, size_t wzIndex, size_t xzIndex,
                          int64_t bIndex) {
  if (std::string why = codesInput(n, 0); !why.empty()) return why;
  if (rankOf(n.input(0)) != 4) return "a quantized convolution that is not 2-D";
  if (nodeString(n, "auto_pad", "NOTSET") != "NOTSET" &&
      nodeString(n, "auto_pad", "NOTSET") != "VALID" && !staticShape(n.input(0)))
    return "auto_pad SAME_* with a dynamic input shape";
  std::vector<int8_t> w;
  if (std::string why = symmetricWeights(n, wIndex, wzIndex, 0, &w); !why.empty()) return why;
  if (rankOf(n.input(wIndex)) != 4) return "the weight is not 4-D";
  if (std::string why = quantParam(n, xzIndex, "the input zero point", 1, true); !why.empty())
    return why;
  if (bIndex >= 0 && n.input(static_cast<size_t>(bIndex)) &&
      !n.input(static_cast<size_t>(bIndex))->isInitializer())
    return "the bias is not a constant";
  const int64_t offset =
      static_cast<int64_t>(scalarOf(n, xzIndex)) + codeShift(n.input(0)->dtype());
  if (!correctedBias(n, bIndex, offset, channelSums(w, n.input(wIndex)->initializer().dims(), 0),
                     nullptr))
    return "the bias less the input zero point's share leaves int32";
  return "";
}

std::string checkMatMulLike(const Node& n, size_t bIndex, size_t bzIndex, size_t azIndex) {
  if (std::string why = codesInput(n, 0); !why.empty()) return why;
  // Rank 4 would read back as a feature map (AscendDequant's channel axis 1).
  const int64_t rank = rankOf(n.input(0));
  if (rank < 2 || rank > 3 || rankOf(n.input(bIndex)) != 2)
    return "a quantized MatMul whose input is not 2-D or 3-D or whose weight is not 2-D";
  std::vector<int8_t> w;
  if (std::string why = symmetricWeights(n, bIndex, bzIndex, 1, &w); !why.empty()) return why;
  if (std::string why = quantParam(n, azIndex, "the input zero point", 1, true); !why.empty())
    return why;
  const int64_t offset =
      static_cast<int64_t>(scalarOf(n, azIndex)) + codeShift(n.input(0)->dtype());
  if (!correctedBias(n, -1, offset, channelSums(w, n.input(bIndex)->initializer().dims(), 1),
                     nullptr))
    return "the input zero point's share of the product leaves int32";
  return "";
}

// The scales of a QLinear op and its output codes.
std::string checkRequant(const Node& n, size_t xs, size_t ws, int64_t channels, size_t ys,
                         size_t yz) {
  for (auto [i, what, count] :
       {std::tuple{xs, "the input scale", int64_t{1}}, std::tuple{ws, "the weight scale", channels},
        std::tuple{ys, "the output scale", int64_t{1}}})
    if (std::string why = quantParam(n, i, what, count, false); !why.empty()) return why;
  if (std::string why = quantParam(n, yz, "the output zero point", 1, true); !why.empty())
    return why;
  if (!isCodeType(n.output(0)->dtype())) return "its output codes are not int8/uint8";
  if (!(scalarOf(n, ys) > 0)) return "the output scale is not positive";
  return "";
}

// --- lowering ---------------------------------------------------------------------------------

// Conv2D over int8 codes `x` (offset_x = `offset`) with the node's weight re-coded: int32 out.
Port int8Conv(Lowerer& l, const Node& n, const Port& x, size_t wIndex, size_t wzIndex,
              int64_t bIndex, int64_t offset, const std::string& valueName, bool last) {
  std::vector<int8_t> w;
  symmetricWeights(n, wIndex, wzIndex, 0, &w);
  const auto wdims = n.input(wIndex)->initializer().dims();
  std::vector<int32_t> bias;
  correctedBias(n, bIndex, offset, channelSums(w, wdims, 0), &bias);
  std::vector<int64_t> kernel(wdims.begin() + 2, wdims.end());
  auto strides = nodeInts(n, "strides").value_or(std::vector<int64_t>(2, 1));
  auto dilations = nodeInts(n, "dilations").value_or(std::vector<int64_t>(2, 1));
  auto pads = explicitPads(n, kernel, strides, dilations).value_or(std::vector<int64_t>(4, 0));
  OpDef* o = l.op("Conv2D", last ? "" : "conv");
  l.input(o, x, "NCHW");
  l.input(o, l.constant("filter", Tensor::fromValues<int8_t>(DType::Int8, wdims, w)), "NCHW");
  l.input(o, l.constant("bias", Tensor::fromValues<int32_t>(
                                    DType::Int32, {static_cast<int64_t>(bias.size())}, bias)));
  auto& a = *o->mutable_attr();
  a["strides"] = attrInts(withBatchChannel(strides));
  a["dilations"] = attrInts(withBatchChannel(dilations));
  a["pads"] = attrInts(interleavePads(pads));
  a["groups"] = attrI(nodeInt(n, "group", 1));
  a["data_format"] = attrS("NCHW");
  a["offset_x"] = attrI(offset);
  return l.output(o, DType::Int32, n.output(0)->shape(), valueName, "NCHW");
}

// MatMulV2 (BatchMatMulV2 for a batched `a`) of int8 codes `a` [..., M, K] by the node's [K, N]
// weight re-coded: int32 out.
Port int8MatMul(Lowerer& l, const Node& n, const Port& a, size_t bIndex, size_t bzIndex,
                int64_t offset, const std::string& valueName, bool last) {
  std::vector<int8_t> b;
  symmetricWeights(n, bIndex, bzIndex, 1, &b);
  const auto bdims = n.input(bIndex)->initializer().dims();
  std::vector<int32_t> bias;
  correctedBias(n, -1, offset, channelSums(b, bdims, 1), &bias);
  const bool batched = rankOf(n.input(0)) > 2;
  OpDef* o = l.op(batched ? "BatchMatMulV2" : "MatMulV2", last ? "" : "matmul");
  l.input(o, a);
  l.input(o, l.constant("x2", Tensor::fromValues<int8_t>(DType::Int8, bdims, b)));
  l.input(o, l.constant("bias", Tensor::fromValues<int32_t>(
                                    DType::Int32, {static_cast<int64_t>(bias.size())}, bias)));
  auto& attrs = *o->mutable_attr();
  attrs[batched ? "adj_x1" : "transpose_x1"] = attrB(false);
  attrs[batched ? "adj_x2" : "transpose_x2"] = attrB(false);
  // The zero point's share is in the bias: x1 goes in unshifted.
  attrs["offset_x"] = attrI(0);
  return l.output(o, DType::Int32, n.output(0)->shape(), valueName);
}

// int32 accumulators → AscendDequant (x_scale * w_scale per channel) → AscendQuant to the output
// codes, published as the node's output.
void requantize(Lowerer& l, const Node& n, const Port& acc, size_t xs, size_t ws, size_t ys,
                size_t yz, int64_t channels, const std::string& layout) {
  const auto wScales = perChannel(n, ws, channels, 1.0);
  const auto xScale = static_cast<float>(scalarOf(n, xs, 1.0));
  std::vector<uint64_t> deq(static_cast<size_t>(channels));
  for (size_t c = 0; c < deq.size(); ++c)
    deq[c] = deqScaleBits(xScale * static_cast<float>(wScales[c]));
  OpDef* d = l.op("AscendDequant", "dequant");
  l.input(d, acc, layout);
  l.input(d, l.constant("deq_scale", Tensor::fromValues<uint64_t>(DType::UInt64, {channels}, deq)));
  auto& a = *d->mutable_attr();
  a["sqrt_mode"] = attrB(false);
  a["relu_flag"] = attrB(false);
  a["dtype"] = attrI(geType(DType::Float32));
  Port real = l.output(d, DType::Float32, acc.shape, "", layout);
  const Value* y = n.output(0);
  const int64_t offset = static_cast<int64_t>(scalarOf(n, yz)) + codeShift(y->dtype());
  publishCodes(l, y, ascendQuant(l, real, 1.0 / scalarOf(n, ys), offset, "", codesName(y)));
}

void registerFoldedInputs() {
  addFoldedInputs("QuantizeLinear", {1, 2});
  addFoldedInputs("DequantizeLinear", {1, 2});
  addFoldedInputs("QLinearConv", {1, 2, 3, 4, 5, 6, 7, 8});
  addFoldedInputs("QLinearMatMul", {1, 2, 3, 4, 5, 6, 7});
  addFoldedInputs("ConvInteger", {1, 2, 3});
  addFoldedInputs("MatMulInteger", {1, 2, 3});
}
const bool kFoldedInputsRegistered = (registerFoldedInputs(), true);

std::string quantizeReason(const Node& n) {
  const DType x = n.input(0) ? n.input(0)->dtype() : DType::Undefined;
  if (x != DType::Float32 && x != DType::Float16)
    return "QuantizeLinear of a type AscendQuant does not take (float32, float16)";
  if (!isCodeType(n.output(0)->dtype())) return "QuantizeLinear to codes other than int8/uint8";
  if (nodeInt(n, "block_size", 0) > 0) return "blocked QuantizeLinear";
  if (std::string why = quantParam(n, 1, "the scale", 1, false); !why.empty()) return why;
  if (std::string why = quantParam(n, 2, "the zero point", 1, true); !why.empty()) return why;
  if (!(scalarOf(n, 1) > 0)) return "QuantizeLinear with a scale that is not positive";
  return "";
}

std::string dequantizeReason(const Node& n) {
  if (std::string why = codesInput(n, 0); !why.empty()) return "DequantizeLinear: " + why;
  const DType y = n.output(0)->dtype();
  if (y != DType::Float32 && y != DType::Float16)
    return "DequantizeLinear to a type AscendAntiQuant does not give (float32, float16)";
  if (std::string why = quantParam(n, 1, "the scale", 1, false); !why.empty()) return why;
  if (std::string why = quantParam(n, 2, "the zero point", 1, true); !why.empty()) return why;
  return "";
}

bool halfFloatCast(const Node& c, DType from, DType to) {
  return c.opType() == "Cast" && c.input(0) && c.input(0)->dtype() == from && c.output(0) &&
         c.output(0)->dtype() == to;
}
// The Cast float16 → float32 making `x` when every reader of `x` is the x of a QuantizeLinear
// these rules take (AscendQuant reads the float16 itself).
const Node* castIntoQuant(const Value* x) {
  const Node* c = x ? x->producer() : nullptr;
  if (!c || x->isGraphOutput() || !halfFloatCast(*c, DType::Float16, DType::Float32))
    return nullptr;
  for (const Use& use : x->uses())
    if (use.user->opType() != "QuantizeLinear" || use.inputIndex != 0 ||
        use.user->owner() != c->owner() || !quantizeReason(*use.user).empty())
      return nullptr;
  return c;
}
// The Cast float32 → float16 that is the one reader of DequantizeLinear `dq`'s output, when these
// rules take `dq` (AscendAntiQuant gives the float16 itself).
const Node* castOutOfDequant(const Node& dq) {
  const Value* y = dq.output(0);
  if (!y || y->isGraphOutput() || y->uses().size() != 1 || !dequantizeReason(dq).empty())
    return nullptr;
  const Node* c = y->uses()[0].user;
  return c->owner() == dq.owner() && halfFloatCast(*c, DType::Float32, DType::Float16) ? c
                                                                                       : nullptr;
}

// QuantizeLinear(x, s, z) → AscendQuant(scale = 1 / s, offset = z), per tensor.
KILN_OM_LOWERING(
    "QuantizeLinear", [](const Node& n, const OpContext&) { return quantizeReason(n); },
    [](Lowerer& l, const Node& n) {
      const Value* y = n.output(0);
      const int64_t offset = static_cast<int64_t>(scalarOf(n, 2)) + codeShift(y->dtype());
      const Node* cast = castIntoQuant(n.input(0));
      const Port x = cast ? l.source(cast->input(0)) : l.in(0);
      publishCodes(l, y, ascendQuant(l, x, 1.0 / scalarOf(n, 1), offset, "", codesName(y)));
    });

// DequantizeLinear(q, s, z) of activation codes → AscendAntiQuant(scale = s, offset = -z), giving
// float16 straight to the Cast that would narrow its output.
KILN_OM_LOWERING(
    "DequantizeLinear", [](const Node& n, const OpContext&) { return dequantizeReason(n); },
    [](Lowerer& l, const Node& n) {
      const int64_t zero = static_cast<int64_t>(scalarOf(n, 2)) + codeShift(n.input(0)->dtype());
      const Node* cast = castOutOfDequant(n);
      const Value* y = cast ? cast->output(0) : n.output(0);
      l.bind(y, ascendAntiQuant(l, int8CodesOf(l, n, 0), scalarOf(n, 1), -zero, y->dtype(), "",
                                y->name()));
    });

// QLinearConv(x, xs, xz, w, ws, wz, ys, yz, B) → Conv2D int8 → AscendDequant → AscendQuant.
KILN_OM_LOWERING(
    "QLinearConv",
    [](const Node& n, const OpContext&) -> std::string {
      if (std::string why = checkConvLike(n, 3, 5, 2, 8); !why.empty())
        return "QLinearConv: " + why;
      const int64_t filters = n.input(3)->shape().staticDims()[0];
      if (std::string why = checkRequant(n, 1, 4, filters, 6, 7); !why.empty())
        return "QLinearConv: " + why;
      return "";
    },
    [](Lowerer& l, const Node& n) {
      const int64_t offset = static_cast<int64_t>(scalarOf(n, 2)) + codeShift(n.input(0)->dtype());
      Port acc = int8Conv(l, n, int8CodesOf(l, n, 0), 3, 5, 8, offset, "", false);
      requantize(l, n, acc, 1, 4, 6, 7, n.input(3)->shape().staticDims()[0], "NCHW");
    });

// QLinearMatMul(a, as, az, b, bs, bz, ys, yz) → MatMulV2 int8 → AscendDequant → AscendQuant.
KILN_OM_LOWERING(
    "QLinearMatMul",
    [](const Node& n, const OpContext&) -> std::string {
      if (std::string why = checkMatMulLike(n, 3, 5, 2); !why.empty())
        return "QLinearMatMul: " + why;
      const int64_t columns = n.input(3)->shape().staticDims()[1];
      if (std::string why = checkRequant(n, 1, 4, columns, 6, 7); !why.empty())
        return "QLinearMatMul: " + why;
      return "";
    },
    [](Lowerer& l, const Node& n) {
      const int64_t offset = static_cast<int64_t>(scalarOf(n, 2)) + codeShift(n.input(0)->dtype());
      Port acc = int8MatMul(l, n, int8CodesOf(l, n, 0), 3, 5, offset, "", false);
      requantize(l, n, acc, 1, 4, 6, 7, n.input(3)->shape().staticDims()[1], "ND");
    });

// ConvInteger(x, w, xz, wz) → Conv2D int8 with int32 out.
KILN_OM_LOWERING(
    "ConvInteger",
    [](const Node& n, const OpContext&) -> std::string {
      if (std::string why = checkConvLike(n, 1, 3, 2, -1); !why.empty())
        return "ConvInteger: " + why;
      return "";
    },
    [](Lowerer& l, const Node& n) {
      const Value* y = n.output(0);
      const int64_t offset = static_cast<int64_t>(scalarOf(n, 2)) + codeShift(n.input(0)->dtype());
      l.bind(y, int8Conv(l, n, int8CodesOf(l, n, 0), 1, 3, -1, offset, y->name(), true));
    });

// MatMulInteger(a, b, az, bz) → MatMulV2 int8 with int32 out.
KILN_OM_LOWERING(
    "MatMulInteger",
    [](const Node& n, const OpContext&) -> std::string {
      if (std::string why = checkMatMulLike(n, 1, 3, 2); !why.empty())
        return "MatMulInteger: " + why;
      return "";
    },
    [](Lowerer& l, const Node& n) {
      const Value* y = n.output(0);
      const int64_t offset = static_cast<int64_t>(scalarOf(n, 2)) + codeShift(n.input(0)->dtype());
      l.bind(y, int8MatMul(l, n, int8CodesOf(l, n, 0), 1, 3, offset, y->name(), true));
    });

// --- raising ----------------------------------------------------------------------------------

Value* scalarConst(Raiser& r, const std::string& base, DType dtype, double v) {
  if (dtype == DType::Int8)
    return r.constTensor(base,
                         Tensor::fromValues<int8_t>(DType::Int8, {}, {static_cast<int8_t>(v)}));
  if (dtype == DType::Float16)
    return r.constTensor(
        base,
        *rt::castTensor(Tensor::fromValues<float>(DType::Float32, {}, {float(v)}), DType::Float16));
  return r.constTensor(base,
                       Tensor::fromValues<float>(DType::Float32, {}, {static_cast<float>(v)}));
}

// AscendQuant(x; scale, offset) → QuantizeLinear(x, 1 / scale, offset): the lowering wrote 1 / s
// for ONNX's scale s, and 1 / (1 / s) in double gives s back in float32 for the scales met so far,
// so the codes are ONNX's x / s (the chip's x * scale can differ from it only at a tie).
KILN_OM_RAISING("AscendQuant", [](Raiser& r, const OpDef& op) -> Status {
  Value* x = r.in(op, 0);
  if (!x) return r.unsupported(op, "no input");
  double scale = getF(op, "scale", 1.0f);
  if (getB(op, "sqrt_mode", false)) scale *= scale;
  const double offset = getF(op, "offset", 0.0f);
  if (getS(op, "round_mode", "Round") != "Round")
    return r.unsupported(op, "a round_mode other than Round");
  if (!(scale > 0) || offset != std::nearbyint(offset) || offset < -128 || offset > 127)
    return r.unsupported(op, "a scale that is not positive or an offset that is not int8");
  if (x->dtype() != DType::Float32) { // float16 widens exactly; opset 18 quantizes float32
    x = r.helper(op.name() + "_fp32", "Cast", {x});
    x->producer()->setAttribute("to", Attribute::ofInt(dtypeToOnnx(DType::Float32)));
  }
  r.emit(op, "QuantizeLinear",
         {x, scalarConst(r, op.name() + "_scale", DType::Float32, 1.0 / scale),
          scalarConst(r, op.name() + "_offset", DType::Int8, offset)},
         1);
  return Status::ok();
});

// AscendAntiQuant(x; scale, offset) = (x + offset) * scale → DequantizeLinear(x, scale, -offset)
// in float32, then a Cast when the op gives float16 (opset 18 dequantizes to float32).
KILN_OM_RAISING("AscendAntiQuant", [](Raiser& r, const OpDef& op) -> Status {
  Value* x = r.in(op, 0);
  if (!x || op.output_desc_size() < 1) return r.unsupported(op, "no input or output");
  double scale = getF(op, "scale", 1.0f);
  if (getB(op, "sqrt_mode", false)) scale *= scale;
  const double offset = getF(op, "offset", 0.0f);
  const DType out = Raiser::descType(op.output_desc(0)).dtype;
  Value* real = nullptr;
  const std::string base = out == DType::Float32 ? "" : op.name() + "_fp32";
  if (offset == std::nearbyint(offset) && -offset >= -128 && -offset <= 127) {
    std::vector<Value*> inputs{x, scalarConst(r, op.name() + "_scale", DType::Float32, scale),
                               scalarConst(r, op.name() + "_zero", DType::Int8, -offset)};
    real = base.empty() ? r.emit(op, "DequantizeLinear", inputs, 1)->output(0)
                        : r.helper(base, "DequantizeLinear", inputs);
  } else {
    // An offset past int8 (the +128 that gives uint8 codes back): the same sum in float.
    Value* f = r.helper(op.name() + "_float", "Cast", {x});
    f->producer()->setAttribute("to", Attribute::ofInt(dtypeToOnnx(DType::Float32)));
    Value* sum = r.helper(op.name() + "_offset", "Add",
                          {f, scalarConst(r, op.name() + "_o", DType::Float32, offset)});
    std::vector<Value*> inputs{sum, scalarConst(r, op.name() + "_scale", DType::Float32, scale)};
    real = base.empty() ? r.emit(op, "Mul", inputs, 1)->output(0) : r.helper(base, "Mul", inputs);
  }
  if (out != DType::Float32)
    r.emit(op, "Cast", {real}, 1)->setAttribute("to", Attribute::ofInt(dtypeToOnnx(out)));
  return Status::ok();
});

// AscendDequant → Cast to float32, Mul by deq_scale (per channel: axis 1 of a 4-D map, the
// lowering's Conv2D; the last axis of a matmul's rank-2 or rank-3 result), Cast to the output type
// when it is float16.
KILN_OM_RAISING("AscendDequant", [](Raiser& r, const OpDef& op) -> Status {
  Value* x = r.in(op, 0);
  const Tensor* deq = r.constIn(op, 1);
  if (!x || !deq || op.output_desc_size() < 1)
    return r.unsupported(op, "deq_scale is not a constant");
  std::vector<float> scales;
  if (deq->dtype() == DType::UInt64) {
    for (uint64_t v : deq->copyValues<uint64_t>())
      scales.push_back(deqScaleValue(v));
  } else {
    scales = rt::toFloatVector(*deq);
  }
  if (getB(op, "sqrt_mode", false))
    for (float& s : scales)
      s *= s;
  std::vector<int64_t> dims{static_cast<int64_t>(scales.size())};
  if (scales.size() == 1)
    dims.clear();
  else if (rankOf(x) == 4)
    dims = {dims[0], 1, 1};
  Value* f = r.helper(op.name() + "_float", "Cast", {x});
  f->producer()->setAttribute("to", Attribute::ofInt(dtypeToOnnx(DType::Float32)));
  const DType out = Raiser::descType(op.output_desc(0)).dtype;
  Value* scale = r.constTensor(op.name() + "_deq_scale",
                               Tensor::fromValues<float>(DType::Float32, dims, scales));
  if (out == DType::Float32) {
    r.emit(op, "Mul", {f, scale}, 1);
    return Status::ok();
  }
  Value* product = r.helper(op.name() + "_scaled", "Mul", {f, scale});
  Node* cast = r.emit(op, "Cast", {product}, 1);
  cast->setAttribute("to", Attribute::ofInt(dtypeToOnnx(out)));
  return Status::ok();
});

} // namespace

bool castAbsorbedByQuant(const Node& cast) {
  if (castIntoQuant(cast.output(0)) == &cast) return true;
  const Node* producer = cast.input(0) ? cast.input(0)->producer() : nullptr;
  return producer && producer->opType() == "DequantizeLinear" &&
         castOutOfDequant(*producer) == &cast;
}

// An int8 Conv2D (ops/conv.cpp reads the float ones): ConvInteger with offset_x as the input zero
// point (the padding value), plus the bias and o * sum(w) the lowering took out of it.
Status raiseInt8Conv2D(Raiser& r, const OpDef& op, Node*& conv) {
  Value* x = r.in(op, 0);
  const Tensor* w = r.constIn(op, 1);
  if (!w || w->dtype() != DType::Int8 || w->dims().size() != 4)
    return r.unsupported(op, "an int8 Conv2D whose filter is not a constant int8 OIHW tensor");
  const int64_t offset = getI(op, "offset_x", 0);
  const std::vector<int8_t> codes = w->copyValues<int8_t>();
  std::vector<int64_t> sums = channelSums(codes, w->dims(), 0);
  std::vector<int32_t> bias(sums.size(), 0);
  if (const Tensor* b = r.constIn(op, 2)) {
    auto values = b->copyValues<int32_t>();
    if (values.size() != bias.size()) return r.unsupported(op, "a bias of another channel count");
    bias = values;
  } else if (r.in(op, 2)) {
    return r.unsupported(op, "an int8 Conv2D whose bias is not a constant");
  }
  for (size_t c = 0; c < bias.size(); ++c)
    bias[c] = static_cast<int32_t>(bias[c] + offset * sums[c]);
  Value* acc =
      r.helper(op.name() + "_acc", "ConvInteger",
               {x, r.in(op, 1),
                scalarConst(r, op.name() + "_offset_x", DType::Int8, static_cast<double>(offset))});
  conv = acc->producer();
  Value* b = r.constTensor(
      op.name() + "_bias",
      Tensor::fromValues<int32_t>(DType::Int32, {static_cast<int64_t>(bias.size()), 1, 1}, bias));
  r.emit(op, "Add", {acc, b}, 1);
  return Status::ok();
}

// An int8 MatMulV2 / BatchMatMulV2: MatMulInteger plus its int32 bias.
Status raiseInt8MatMul(Raiser& r, const OpDef& op) {
  if (getI(op, "offset_x", 0) != 0) return r.unsupported(op, "an int8 matmul with offset_x");
  for (const char* flag : {"transpose_x1", "transpose_x2", "adj_x1", "adj_x2"})
    if (getB(op, flag, false)) return r.unsupported(op, "an int8 matmul with transposed operands");
  Value* bias = r.in(op, 2);
  if (!bias) {
    r.emit(op, "MatMulInteger", {r.in(op, 0), r.in(op, 1)}, 1);
    return Status::ok();
  }
  Value* acc = r.helper(op.name() + "_acc", "MatMulInteger", {r.in(op, 0), r.in(op, 1)});
  r.emit(op, "Add", {acc, bias}, 1);
  return Status::ok();
}

} // namespace kiln::om
