// .ms rules of the matmul family (MatMul, Gemm): MatMulFusion, with Gemm's alpha/beta
// folded into constant operands and its C added by AddFusion when it is not a bias.
// Lowering (ONNX → .ms: a pure check and the lower that emits ops) and raising (the reader's
// rules for the .ms ops this family emits, back to ONNX ops) side by side.
#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "backends/ms/ms_quant.h"
#include "backends/ms/ms_raise_context.h"
#include "backends/ms/ops/quant_dynamic.h"
#include "backends/ms/ops/matmul_nbits.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

// Gemm's attributes, decoded once for check and lower.
struct GemmAttrs {
  float alpha = 1, beta = 1;
  bool transA = false, transB = false;
};

Expected<GemmAttrs> gemmAttrs(const Node& n) {
  GemmAttrs a;
  KILN_ASSIGN_OR_RETURN(a.alpha, ops::floatAttr(n, "alpha", 1));
  KILN_ASSIGN_OR_RETURN(a.beta, ops::floatAttr(n, "beta", 1));
  KILN_ASSIGN_OR_RETURN(const int64_t transA, ops::intAttr(n, "transA", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t transB, ops::intAttr(n, "transB", 0));
  a.transA = transA != 0;
  a.transB = transB != 0;
  return a;
}

std::string checkMatMul(const Node& n, const lowering::OpContext&) {
  const int a = declaredRank(n.input(0)), b = declaredRank(n.input(1));
  if ((a >= 0 && a < 2) || (b >= 0 && b < 2))
    return "MatMul operands of rank < 2 (or unknown rank)";
  return {};
}

std::string checkGemm(const Node& n, const lowering::OpContext&) {
  auto a = gemmAttrs(n);
  return a ? std::string() : a.status().message();
}

Status lowerMatMul(LoweringContext& ctx, const Node& n) {
  if (ctx.rankOf(n.input(0)) < 2 || ctx.rankOf(n.input(1)) < 2)
    return bad("MatMul operands of rank < 2 (or unknown rank)");
  auto a = ctx.input(n.input(0), Layout::Onnx);
  if (!a) return a.status();
  std::vector<uint32_t> ins = {*a};
  bool quantized = false;
  bool transposeB = false;
  auto weight = ctx.constOf(n.input(1));
  // Blocked 4-bit weights (opset-21 DequantizeLinear) stay codes, one quant param per block.
  if (auto blocked = weight ? blockedDequantizeWeight(ctx, *weight, &quantized) : std::nullopt) {
    ins.push_back(*blocked);
    transposeB = true;
  } else if (weight) {
    const int64_t rank = ctx.rankOf(n.input(1));
    auto bt = ctx.weightTensor(n.input(1), {}, rank - 1, kFormatNCHW, &quantized);
    if (!bt) return bt.status();
    ins.push_back(*bt);
  } else {
    auto bt = ctx.input(n.input(1), Layout::Onnx);
    if (!bt) return bt.status();
    ins.push_back(*bt);
  }
  // DYNAMIC_QUANT: A quantized at run time, the product in int8 (ops/quant_dynamic.cpp).
  std::optional<uint32_t> dynamicA;
  if (quantized)
    dynamicA = dynamicQuantInput(ctx, n, ins[0], ctx.rankOf(n.input(0)), ins[1], false);
  if (dynamicA) ins[0] = *dynamicA;
  auto y = ctx.output(ctx.fusedOutput(n), Layout::Onnx);
  if (!y) return y.status();
  const int act = ctx.activationFor(n);
  ctx.emit(
      fb::PrimitiveType_MatMulFusion,
      [=](FBB& b) {
        return fb::CreateMatMulFusion(b, false, transposeB, static_cast<fb::ActivationType>(act))
            .Union();
      },
      ins, {*y}, quantized);
  if (dynamicA) markDynamicQuantMatMul(ctx);
  return Status::ok();
}

Status lowerGemm(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const GemmAttrs attrs, gemmAttrs(n));
  const float alpha = attrs.alpha, beta = attrs.beta;
  const bool transA = attrs.transA, transB = attrs.transB;
  auto a = ctx.input(n.input(0), Layout::Onnx);
  if (!a) return a.status();
  bool quantized = false;
  uint32_t bId;
  auto bConst = ctx.constOf(n.input(1));
  if (alpha != 1.0f && !bConst) {
    // A run-time B is scaled by a MulFusion in front of the MatMul.
    auto id = ctx.input(n.input(1), Layout::Onnx);
    if (!id) return id.status();
    Chain ch(ctx, n);
    bId = ch.binary(fb::PrimitiveType_MulFusion, *id, ch.scalar(alpha, ch.typeOf(*id)));
  } else if (alpha != 1.0f) {
    Tensor t = bConst->quantized ? dequantize(*bConst) : bConst->tensor;
    if (t.dtype() != DType::Float32) return bad("alpha {} with a non-float B", alpha);
    auto id = ctx.constTensor(scaleFloat(t, alpha), bConst->name + "_alpha");
    if (!id) return id.status();
    bId = *id;
  } else if (bConst) {
    auto id = ctx.weightTensor(n.input(1), {}, transB ? 0 : 1, kFormatNCHW, &quantized);
    if (!id) return id.status();
    bId = *id;
  } else {
    auto id = ctx.input(n.input(1), Layout::Onnx);
    if (!id) return id.status();
    bId = *id;
  }
  std::vector<uint32_t> ins = {*a, bId};
  // DYNAMIC_QUANT: A quantized at run time, the product in int8 (ops/quant_dynamic.cpp).
  std::optional<uint32_t> dynamicA;
  if (quantized) dynamicA = dynamicQuantInput(ctx, n, ins[0], ctx.rankOf(n.input(0)), bId, transA);
  if (dynamicA) ins[0] = *dynamicA;
  const Value* c = n.input(2);
  std::optional<uint32_t> addend;
  auto outShape = ctx.staticShape(n.output(0));
  if (c && beta != 0.0f) {
    auto cc = ctx.constOf(c);
    Tensor ct;
    if (cc) ct = cc->quantized ? dequantize(*cc) : cc->tensor;
    if (cc && beta != 1.0f) {
      if (ct.dtype() != DType::Float32) return bad("beta {} with a non-float C", beta);
      ct = scaleFloat(ct, beta);
    }
    const int64_t N = outShape && outShape->size() == 2 ? (*outShape)[1] : -1;
    if (cc && N > 0 && ct.dtype() == DType::Float32 &&
        (ct.elementCount() == static_cast<uint64_t>(N) || ct.elementCount() == 1) &&
        (ct.dims().size() <= 1 || ct.dims()[0] == 1)) {
      std::vector<float> v = ct.copyValues<float>();
      if (v.size() == 1) v.assign(static_cast<size_t>(N), v[0]);
      ins.push_back(ctx.floatConst(v, cc->name, {static_cast<int32_t>(N)}));
    } else if (cc) {
      auto id = ctx.constTensor(ct, cc->name);
      if (!id) return id.status();
      addend = *id;
    } else {
      auto id = ctx.input(c, Layout::Onnx);
      if (!id) return id.status();
      addend = *id;
      if (beta != 1.0f) {
        // A run-time C is scaled by a MulFusion before the add.
        Chain ch(ctx, n);
        addend = ch.binary(fb::PrimitiveType_MulFusion, *id, ch.scalar(beta, ch.typeOf(*id)));
      }
    }
  }
  const int act = ctx.activationFor(n);
  const Value* finalOut = ctx.fusedOutput(n);
  uint32_t y;
  if (addend) {
    MsTensor mid;
    mid.name = n.output(0)->name() + "_matmul";
    auto type = typeIdOf(n.output(0)->dtype());
    mid.dataType = type ? *type : kTypeFloat32;
    if (outShape)
      for (int64_t d : *outShape)
        mid.dims.push_back(static_cast<int32_t>(d));
    y = ctx.addTensor(std::move(mid));
  } else {
    auto id = ctx.output(finalOut, Layout::Onnx);
    if (!id) return id.status();
    y = *id;
  }
  ctx.emit(
      fb::PrimitiveType_MatMulFusion,
      [=](FBB& b) {
        return fb::CreateMatMulFusion(b, transA, transB,
                                      static_cast<fb::ActivationType>(addend ? 0 : act))
            .Union();
      },
      ins, {y}, quantized);
  if (dynamicA) markDynamicQuantMatMul(ctx);
  if (addend) {
    auto z = ctx.output(finalOut, Layout::Onnx);
    if (!z) return z.status();
    ctx.emit(fb::PrimitiveType_AddFusion,
             [=](FBB& b) {
               return fb::CreateAddFusion(b, static_cast<fb::ActivationType>(act)).Union();
             },
             {y, *addend}, {*z});
  }
  return Status::ok();
}

KILN_MS_LOWERING("Gemm", checkGemm, lowerGemm);
// QLinearMatMul over int8 codes with a constant [K, N] weight: MatMulFusion run by the
// runtime's int8 kernel (QUANT_ALL), B stored [N, K] (transpose_b) with one QuantParam per output
// column (or one). Inputs as ONNX numbers them: a 0, a_scale 1, a_zp 2, b 3, b_scale 4, b_zp 5,
// y_scale 6, y_zp 7.
std::string checkQLinearMatMul(const Node& n, const lowering::OpContext&) {
  if (std::string reason = qlinearCodesReason(n); !reason.empty()) return reason;
  if (const int rank = declaredRank(n.input(0)); rank >= 0 && rank < 2)
    return "MatMul operands of rank < 2";
  return {};
}

Status lowerQLinearMatMul(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(uint32_t a, ctx.input(n.input(0), Layout::Onnx));
  KILN_ASSIGN_OR_RETURN(Int8Weight w, int8Weight(ctx, n.input(3), n.input(4), n.input(5)));
  const std::string name = n.output(0)->name();
  KILN_ASSIGN_OR_RETURN(uint32_t b, ctx.permutedConstTensor(w.codes, {1, 0}, name + "_weight"));
  ctx.tensor(b).quantParams = w.params;
  ctx.tensor(b).isQuantizedWeight = true;
  ctx.tensor(b).modelCodes = true;
  KILN_ASSIGN_OR_RETURN(uint32_t y, ctx.output(n.output(0), Layout::Onnx));
  setInt8(ctx, y, activationParam(ctx, n.input(6), n.input(7), DType::UInt8));
  ctx.emit(
      fb::PrimitiveType_MatMulFusion,
      [](FBB& fbb) {
        return fb::CreateMatMulFusion(fbb, false, true, fb::ActivationType_NO_ACTIVATION).Union();
      },
      {a, b}, {y});
  ctx.markQuantAll();
  return Status::ok();
}

KILN_MS_LOWERING("MatMul", checkMatMul, lowerMatMul);
KILN_MS_LOWERING("QLinearMatMul", checkQLinearMatMul, lowerQLinearMatMul);
// ---- end of lowering

} // namespace
} // namespace kiln::ms

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

namespace kiln::ms {

namespace {

// An int8 MatMulFusion (int8 codes in, a constant weight with QuantParams) is QLinearMatMul over
// the codes, B back in [K, N].
Status raiseInt8MatMul(RaisingContext& ctx, const msfb::MatMulFusion& m) {
  const auto bd = ctx.dims(ctx.inIndex(1));
  if (ctx.inputCount() != 2 || !ctx.isConstant(ctx.inIndex(1)) || bd.size() != 2 ||
      m.transpose_a() || m.activation_type() != msfb::ActivationType_NO_ACTIVATION)
    return ctx.nodeUnsupported("int8 MatMulFusion other than codes times a constant 2-D weight");
  KILN_ASSIGN_OR_RETURN(Value * a, ctx.in(0));
  auto aq = quantConstants(ctx, ctx.inIndex(0));
  auto bq = quantConstants(ctx, ctx.inIndex(1));
  auto yq = quantConstants(ctx, ctx.outIndex(0));
  if (!aq || !bq || !yq) return ctx.nodeUnsupported("int8 MatMulFusion without QuantParams");
  std::vector<int64_t> perm;
  if (m.transpose_b()) perm = {1, 0};
  KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(1, {std::nullopt, perm, -1}));
  // The executor requantizes it as the runtime does (fixed point), not as ONNX's QLinearMatMul.
  return ctx.bind(
      0, ctx.emit("QLinearMatMul",
                  {a, aq->first, aq->second, b, bq->first, bq->second, yq->first, yq->second},
                  {{"kiln_requantize", Attribute::ofString("ms_fixed_point")}}));
}

Status raiseMatMulFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  if (ctx.quantType() == msfb::QuantType_QUANT_DYNAMIC) return raiseDynamicQuantMatMul(ctx, p);
  const msfb::MatMulFusion* m = p.value_as_MatMulFusion();
  if (ctx.inputCount() > 1 && int8Data(ctx)) return raiseInt8MatMul(ctx, *m);
  KILN_ASSIGN_OR_RETURN(Value * a, ctx.in(0));
  int channel = -1;
  if (ctx.inputCount() > 1) {
    auto bd = ctx.dims(ctx.inIndex(1));
    if (bd.size() >= 2) channel = int(m->transpose_b() ? bd.size() - 2 : bd.size() - 1);
  }
  KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(1, {std::nullopt, {}, channel}));
  // Plain 2-D products are a Gemm, which reads a stored [N, K] weight in place (transB).
  size_t rankA = ctx.dims(ctx.inIndex(0)).size(),
         rankB = ctx.inputCount() > 1 ? ctx.dims(ctx.inIndex(1)).size() : 0;
  size_t rankBias = ctx.inputCount() > 2 ? ctx.dims(ctx.inIndex(2)).size() : 1;
  if (rankA == 2 && rankB == 2 && rankBias == 1) {
    std::vector<Value*> ins{a, b};
    if (ctx.inputCount() > 2) {
      KILN_ASSIGN_OR_RETURN(Value * bias, ctx.in(2));
      ins.push_back(bias);
    }
    Value* y = ctx.emit("Gemm", ins,
                        {{"transA", Attribute::ofInt(m->transpose_a() ? 1 : 0)},
                         {"transB", Attribute::ofInt(m->transpose_b() ? 1 : 0)}});
    KILN_ASSIGN_OR_RETURN(y, ctx.activation(y, m->activation_type()));
    return ctx.bind(0, y);
  }
  auto swapLast = [&](Value* v, uint32_t index) -> Expected<Value*> {
    auto d = ctx.dims(index);
    if (d.size() < 2) return ctx.nodeUnsupported("transposed operand needs rank >= 2");
    std::vector<int64_t> perm(d.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[d.size() - 1], perm[d.size() - 2]);
    return ctx.transpose(v, perm);
  };
  if (m->transpose_a()) {
    KILN_ASSIGN_OR_RETURN(a, swapLast(a, ctx.inIndex(0)));
  }
  if (m->transpose_b()) {
    KILN_ASSIGN_OR_RETURN(b, swapLast(b, ctx.inIndex(1)));
  }
  Value* y = ctx.emit("MatMul", {a, b});
  if (ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * bias, ctx.in(2));
    y = ctx.emit("Add", {y, bias});
  }
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(y, m->activation_type()));
  return ctx.bind(0, y);
}

Status raiseFullConnection(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::FullConnection* f = p.value_as_FullConnection();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  if (ctx.inputCount() < 2) return ctx.nodeUnsupported("needs input and weight");
  auto wd = ctx.dims(ctx.inIndex(1));
  if (wd.size() != 2) return ctx.nodeUnsupported("weight must be 2-D [N, K]");
  KILN_ASSIGN_OR_RETURN(Value * w, ctx.in(1, {std::nullopt, {}, 0}));
  // Flatten the input to [M, K], multiply by Wᵀ, then restore the leading dims.
  Value* flat = f->use_axis() ? ctx.emit("Flatten", {x}, {{"axis", Attribute::ofInt(f->axis())}})
                              : ctx.emit("Reshape", {x, ctx.ints({-1, wd[1]})});
  std::vector<Value*> ins{flat, w};
  if (f->has_bias() && ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(2));
    ins.push_back(b);
  }
  Value* y = ctx.emit("Gemm", ins, {{"transB", Attribute::ofInt(1)}});
  auto od = ctx.dims(ctx.outIndex(0));
  bool staticOut =
      !od.empty() && std::all_of(od.begin(), od.end(), [](int64_t v) { return v > 0; });
  if (staticOut && od.size() != 2) y = ctx.emit("Reshape", {y, ctx.ints(od)});
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(y, f->activation_type()));
  return ctx.bind(0, y);
}

} // namespace

KILN_MS_RAISING(MatMulFusion, raiseMatMulFusion);
KILN_MS_RAISING(FullConnection, raiseFullConnection);

} // namespace kiln::ms
