// .ms rules of the elementwise family, rewritten half: ONNX ops .ms has no primitive for, built
// from ones it has (Xor, IsNaN, IsInf, Sign, Mean, Tan, Sinh, Cosh, Asinh, Acosh, Atanh, Atan,
// Asin, Acos), Round, whose .ms primitive rounds halves the other way, and ones whose runtime
// kernel fails outside its domain (Reciprocal, Sqrt). Lowering only: every op emitted is read back
// by elementwise.cpp.
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

using PT = fb::PrimitiveType;

std::string checkOperands(const Node& n, const lowering::OpContext&) {
  for (const Value* v : n.inputs())
    if (!v) return "an omitted input";
  return {};
}

// Float ops only: the approximations and identities below assume a floating input.
std::string checkFloat(const Node& n, const lowering::OpContext& context) {
  if (std::string r = checkOperands(n, context); !r.empty()) return r;
  const Value* x = n.input(0);
  if (x && x->dtype() != DType::Undefined && !isFloatingPoint(x->dtype()))
    return fmt::format("{} input (floating point only)", dtypeName(x->dtype()));
  if (x && x->dtype() == DType::BFloat16) return "bf16 input";
  return {};
}

// Xor → NotEqual on booleans; IsNaN → NotEqual(x, x).
Status lowerXorIsNaN(LoweringContext& ctx, const Node& n) {
  auto a = ctx.input(n.input(0), Layout::Onnx);
  if (!a) return a.status();
  uint32_t b = *a;
  if (n.opType() == "Xor") {
    auto id = ctx.input(n.input(1), Layout::Onnx);
    if (!id) return id.status();
    b = *id;
  }
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  Chain(ctx, n).op(PT::PrimitiveType_NotEqual, {*a, b}, *y);
  return Status::ok();
}

// IsInf → Equal(x, +inf), Equal(x, −inf) or Equal(|x|, +inf) by the detect_* flags.
std::string checkIsInf(const Node& n, const lowering::OpContext& context) {
  for (const char* name : {"detect_positive", "detect_negative"})
    if (auto v = ops::intAttr(n, name, 1); !v) return v.status().message();
  return checkFloat(n, context);
}

Status lowerIsInf(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const int64_t pos, ops::intAttr(n, "detect_positive", 1));
  KILN_ASSIGN_OR_RETURN(const int64_t neg, ops::intAttr(n, "detect_negative", 1));
  Chain ch(ctx, n);
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  const int type = ch.typeOf(*x);
  const double inf = std::numeric_limits<double>::infinity();
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (pos && neg)
    ch.op(PT::PrimitiveType_Equal, {ch.unary(PT::PrimitiveType_Abs, *x), ch.scalar(inf, type)}, *y);
  else if (pos || neg)
    ch.op(PT::PrimitiveType_Equal, {*x, ch.scalar(pos ? inf : -inf, type)}, *y);
  else // neither: all false (an infinite value is never both)
    ch.op(PT::PrimitiveType_LogicalAnd,
          {ch.binary(PT::PrimitiveType_Equal, *x, ch.scalar(inf, type), kTypeBool),
           ch.binary(PT::PrimitiveType_Equal, *x, ch.scalar(-inf, type), kTypeBool)},
          *y);
  return Status::ok();
}

// Sign → Where(x > 0, 1, Where(x < 0, −1, x)): zero and NaN pass through as themselves.
Status lowerSign(LoweringContext& ctx, const Node& n) {
  Chain ch(ctx, n);
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  const int type = ch.typeOf(*x);
  uint32_t zero = ch.scalar(0, type);
  uint32_t negMask = ch.binary(PT::PrimitiveType_Less, *x, zero, kTypeBool);
  uint32_t posMask = ch.binary(PT::PrimitiveType_Greater, *x, zero, kTypeBool);
  uint32_t lowered =
      ch.op(PT::PrimitiveType_Where, {negMask, ch.scalar(-1, type), *x}, ch.tmpLike(*x));
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ch.op(PT::PrimitiveType_Where, {posMask, ch.scalar(1, type), lowered}, *y);
  return Status::ok();
}

// Round → halves to even, as ONNX says. The runtime's Round rounds halves away from zero
// (mindspore-lite nnacl_c/fp32/arithmetic_self_fp32.c, ElementRound: roundf), which moves a
// quantized model's codes by one wherever x / scale lands on a half. Float32 addition already
// rounds to the nearest even: (x + s) − s with s = ±2²³ (x's sign) leaves an integer spacing of
// 1 there, so the sum rounds x to even and the subtraction is exact. For |x| ≥ 2²³ x is an
// integer already and passes through. Float16 data is widened first (every float16 value is a
// float32, and the rounded integer narrows back exactly).
Status lowerRound(LoweringContext& ctx, const Node& n) {
  const Layout layout = ctx.availableNhwc(n.input(0)) ? Layout::Nhwc : Layout::Onnx;
  Chain ch(ctx, n);
  auto in = ctx.input(n.input(0), layout);
  if (!in) return in.status();
  auto y = ctx.output(n.output(0), layout);
  if (!y) return y.status();
  const bool narrow = ch.typeOf(*in) == kTypeFloat16;
  const uint32_t x = narrow ? ch.cast(*in, kTypeFloat32) : *in;
  const double spacingOne = 8388608.0; // 2^23: floats from here up are integers
  uint32_t negative = ch.binary(PT::PrimitiveType_Less, x, ch.scalar(0, kTypeFloat32), kTypeBool);
  uint32_t shift =
      ch.op(PT::PrimitiveType_Where,
            {negative, ch.scalar(-spacingOne, kTypeFloat32), ch.scalar(spacingOne, kTypeFloat32)},
            ch.tmpLike(x));
  uint32_t rounded = ch.binary(PT::PrimitiveType_SubFusion,
                               ch.binary(PT::PrimitiveType_AddFusion, x, shift), shift);
  uint32_t fractional = ch.binary(PT::PrimitiveType_Less, ch.unary(PT::PrimitiveType_Abs, x),
                                  ch.scalar(spacingOne, kTypeFloat32), kTypeBool);
  if (!narrow) {
    ch.op(PT::PrimitiveType_Where, {fractional, rounded, x}, *y);
    return Status::ok();
  }
  uint32_t wide = ch.op(PT::PrimitiveType_Where, {fractional, rounded, x}, ch.tmpLike(x));
  uint32_t to =
      ctx.intConst({kTypeFloat16}, n.output(0)->name() + "_to_f16", std::vector<int32_t>{});
  ch.op(PT::PrimitiveType_Cast, {wide, to}, *y);
  return Status::ok();
}

// Mean → pairwise AddFusion, then DivFusion by the input count (a lone input is copied).
Status lowerMean(LoweringContext& ctx, const Node& n) {
  std::vector<uint32_t> ins;
  for (const Value* v : n.inputs()) {
    if (!v) continue;
    auto id = ctx.input(v, Layout::Onnx);
    if (!id) return id.status();
    ins.push_back(*id);
  }
  if (ins.empty()) return bad("no inputs");
  Chain ch(ctx, n);
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (ins.size() == 1) {
    auto shape = ctx.staticShape(n.output(0));
    if (!shape) return bad("single-input Mean with an unknown output shape");
    uint32_t s = ctx.intConst(*shape, n.output(0)->name() + "_shape");
    ch.op(PT::PrimitiveType_Reshape, {ins[0], s}, *y);
    return Status::ok();
  }
  uint32_t acc = ins[0];
  for (size_t i = 1; i < ins.size(); ++i)
    acc = ch.binary(PT::PrimitiveType_AddFusion, acc, ins[i]);
  ch.op(PT::PrimitiveType_DivFusion, {acc, ch.scalar(double(ins.size()), ch.typeOf(acc))}, *y);
  return Status::ok();
}

// atan on any float: t = min(|x|, 1/|x|), atan(t) = t·P(t²) (Abramowitz & Stegun 4.4.49,
// |error| ≤ 2e−8 on [0, 1]), π/2 − that where |x| > 1, the sign of x restored. 1/|x| is a
// DivFusion, not a Reciprocal: the runtime's Reciprocal fails the whole run on a zero element
// (Where computes both branches), its DivFusion gives inf there as ONNX does.
uint32_t atanOf(Chain& ch, uint32_t x, std::optional<uint32_t> out = std::nullopt) {
  static const double coeff[] = {-0.3333314528, 0.1999355085, -0.1420889944, 0.1065626393,
                                 -0.0752896400, 0.0429096138, -0.0161657367, 0.0028662257};
  const int type = ch.typeOf(x);
  uint32_t a = ch.unary(PT::PrimitiveType_Abs, x);
  uint32_t one = ch.scalar(1, type);
  uint32_t big = ch.binary(PT::PrimitiveType_Greater, a, one, kTypeBool);
  uint32_t t = ch.op(PT::PrimitiveType_Where,
                     {big, ch.binary(PT::PrimitiveType_DivFusion, one, a), a}, ch.tmpLike(a));
  uint32_t z = ch.binary(PT::PrimitiveType_MulFusion, t, t);
  uint32_t p = ch.scalar(coeff[7], type);
  for (int i = 6; i >= -1; --i)
    p = ch.binary(PT::PrimitiveType_AddFusion, ch.binary(PT::PrimitiveType_MulFusion, p, z),
                  i >= 0 ? ch.scalar(coeff[i], type) : one);
  uint32_t r = ch.binary(PT::PrimitiveType_MulFusion, t, p);
  uint32_t far = ch.binary(PT::PrimitiveType_SubFusion, ch.scalar(M_PI / 2, type), r);
  r = ch.op(PT::PrimitiveType_Where, {big, far, r}, ch.tmpLike(r));
  uint32_t neg = ch.binary(PT::PrimitiveType_Less, x, ch.scalar(0, type), kTypeBool);
  return ch.op(PT::PrimitiveType_Where, {neg, ch.unary(PT::PrimitiveType_Neg, r), r},
               out ? *out : ch.tmpLike(r));
}

// Whether every element of `v` is >= 0 (or NaN) by construction: a non-negative constant, or the
// output of an op that only makes such values from any input (Abs, Relu, Exp, x·x, x², ...) or from
// non-negative inputs (Add, Mul, Div, Max, Min, mean/sum reductions).
bool knownNonNegative(const LoweringContext& ctx, const Value* v, int depth = 0) {
  if (!v || depth > 8) return false;
  if (auto c = ctx.constOf(v)) {
    if (c->quantized || !isFloatingPoint(c->tensor.dtype())) return false;
    auto f = rt::castTensor(c->tensor, DType::Float32);
    if (!f) return false;
    for (float x : f->copyValues<float>())
      if (x < 0) return false;
    return true;
  }
  const Node* p = v->producer();
  if (!p) return false;
  static const std::set<std::string> always = {
      "Abs",      "Relu",     "Exp",      "Sigmoid",         "Softmax",    "Sqrt",
      "Softplus", "ReduceL1", "ReduceL2", "ReduceSumSquare", "HardSigmoid"};
  static const std::set<std::string> ofOperands = {
      "Add", "Mul", "Div", "Max", "Min", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"};
  const std::string& op = p->opType();
  if (always.count(op)) return true;
  if (op == "Mul" && p->inputs().size() == 2 && p->input(0) == p->input(1)) return true;
  // x^k with an even integer k (the variance's (x − mean)²).
  if (op == "Pow" && p->inputs().size() == 2)
    if (auto c = ctx.constOf(p->input(1)); c && !c->quantized)
      if (auto e = rt::castTensor(c->tensor, DType::Float32)) {
        bool even = e->elementCount() > 0;
        for (float k : e->copyValues<float>())
          even = even && std::fmod(k, 2.0f) == 0.0f;
        if (even) return true;
      }
  if (!ofOperands.count(op)) return false;
  // Reductions' later inputs are axes: only the data matters.
  const size_t operands = op.rfind("Reduce", 0) == 0 ? 1 : p->inputs().size();
  for (size_t i = 0; i < operands; ++i)
    if (!knownNonNegative(ctx, p->input(i), depth + 1)) return false;
  return true;
}

// Reciprocal and Sqrt: the runtime's kernels fail the whole run on an element outside their
// domain (a zero; a negative) where ONNX gives inf / NaN (ElementReciprocal, ElementSqrt in
// nnacl/fp32/arithmetic_self_fp32.c). DivFusion(1, x) and PowFusion(x, 0.5) (powf) compute them
// without that check; Sqrt keeps its kernel where x is non-negative by construction.
Status lowerSqrtReciprocal(LoweringContext& ctx, const Node& n) {
  const Layout layout = ctx.availableNhwc(n.input(0)) ? Layout::Nhwc : Layout::Onnx;
  auto x = ctx.input(n.input(0), layout);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), layout);
  if (!y) return y.status();
  Chain ch(ctx, n);
  const int t = ch.typeOf(*x);
  if (n.opType() == "Reciprocal")
    ch.op(PT::PrimitiveType_DivFusion, {ch.scalar(1, t), *x}, *y);
  else if (knownNonNegative(ctx, n.input(0)))
    ch.op(PT::PrimitiveType_Sqrt, {*x}, *y);
  else
    ch.op(PT::PrimitiveType_PowFusion, {*x, ch.scalar(0.5, t)}, *y,
          [](FBB& b) { return fb::CreatePowFusion(b, 1.0f, 0.0f).Union(); });
  return Status::ok();
}

// Trigonometric and hyperbolic functions by identities over Sin, Cos, Exp, Log, Sqrt and atan.
Status lowerMath(LoweringContext& ctx, const Node& n) {
  Chain ch(ctx, n);
  auto in = ctx.input(n.input(0), Layout::Onnx);
  if (!in) return in.status();
  const uint32_t x = *in;
  const int type = ch.typeOf(x);
  auto yv = ctx.output(n.output(0), Layout::Onnx);
  if (!yv) return yv.status();
  const uint32_t y = *yv; // the last op of each identity writes it
  auto c = [&](double v) { return ch.scalar(v, type); };
  auto bin = [&](PT t, uint32_t a, uint32_t b) { return ch.binary(t, a, b); };
  auto un = [&](PT t, uint32_t a) { return ch.unary(t, a); };
  // √a of a value that may be negative (|x| > 1 in Asin/Acos, x < 1 in Acosh): PowFusion(a, ½),
  // NaN there as in ONNX, where the runtime's Sqrt fails the whole run (see lowerUnary).
  auto sqrtOrNaN = [&](uint32_t a) {
    return ch.op(PT::PrimitiveType_PowFusion, {a, c(0.5)}, ch.tmpLike(a),
                 [](FBB& b) { return fb::CreatePowFusion(b, 1.0f, 0.0f).Union(); });
  };
  const std::string& op = n.opType();
  if (op == "Tan") {
    ch.op(PT::PrimitiveType_DivFusion, {un(PT::PrimitiveType_Sin, x), un(PT::PrimitiveType_Cos, x)},
          y);
  } else if (op == "Cosh") {
    uint32_t ep = ch.exp(x), en = ch.exp(un(PT::PrimitiveType_Neg, x));
    ch.op(PT::PrimitiveType_MulFusion, {bin(PT::PrimitiveType_AddFusion, ep, en), c(0.5)}, y);
  } else if (op == "Sinh") {
    // (eˣ − e⁻ˣ)/2 cancels near 0: there (|x| < ½) the series x + x³/3! + … + x⁹/9! instead.
    uint32_t ep = ch.exp(x), en = ch.exp(un(PT::PrimitiveType_Neg, x));
    uint32_t wide =
        bin(PT::PrimitiveType_MulFusion, bin(PT::PrimitiveType_SubFusion, ep, en), c(0.5));
    uint32_t z = bin(PT::PrimitiveType_MulFusion, x, x);
    uint32_t p = c(1.0 / 362880);
    for (double f : {1.0 / 5040, 1.0 / 120, 1.0 / 6, 1.0})
      p = bin(PT::PrimitiveType_AddFusion, bin(PT::PrimitiveType_MulFusion, p, z), c(f));
    uint32_t series = bin(PT::PrimitiveType_MulFusion, x, p);
    uint32_t small =
        ch.binary(PT::PrimitiveType_Less, un(PT::PrimitiveType_Abs, x), c(0.5), kTypeBool);
    ch.op(PT::PrimitiveType_Where, {small, series, wide}, y);
  } else if (op == "Asinh") {
    // sign(x)·log1p(|x| + x²/(1 + sqrt(x² + 1))): no cancellation for negative or small x.
    uint32_t a = un(PT::PrimitiveType_Abs, x);
    uint32_t a2 = bin(PT::PrimitiveType_MulFusion, a, a);
    uint32_t s = un(PT::PrimitiveType_Sqrt, bin(PT::PrimitiveType_AddFusion, a2, c(1)));
    uint32_t u =
        bin(PT::PrimitiveType_AddFusion, a,
            bin(PT::PrimitiveType_DivFusion, a2, bin(PT::PrimitiveType_AddFusion, s, c(1))));
    uint32_t l = un(PT::PrimitiveType_Log1p, u);
    uint32_t neg = ch.binary(PT::PrimitiveType_Less, x, c(0), kTypeBool);
    ch.op(PT::PrimitiveType_Where, {neg, un(PT::PrimitiveType_Neg, l), l}, y);
  } else if (op == "Acosh") {
    // log(x + sqrt((x − 1)(x + 1)))
    uint32_t s =
        sqrtOrNaN(bin(PT::PrimitiveType_MulFusion, bin(PT::PrimitiveType_SubFusion, x, c(1)),
                      bin(PT::PrimitiveType_AddFusion, x, c(1))));
    ch.op(PT::PrimitiveType_Log, {bin(PT::PrimitiveType_AddFusion, x, s)}, y);
  } else if (op == "Atanh") {
    // ½·log1p(2x / (1 − x)) (= ½·log((1 + x) / (1 − x)), exact near 0)
    uint32_t q = bin(PT::PrimitiveType_DivFusion, bin(PT::PrimitiveType_MulFusion, x, c(2)),
                     bin(PT::PrimitiveType_SubFusion, c(1), x));
    ch.op(PT::PrimitiveType_MulFusion, {un(PT::PrimitiveType_Log1p, q), c(0.5)}, y);
  } else if (op == "Atan") {
    atanOf(ch, x, y);
  } else if (op == "Asin") {
    // atan(x / sqrt(1 − x²)); ±1 gives ±inf → ±π/2.
    uint32_t s =
        sqrtOrNaN(bin(PT::PrimitiveType_SubFusion, c(1), bin(PT::PrimitiveType_MulFusion, x, x)));
    atanOf(ch, bin(PT::PrimitiveType_DivFusion, x, s), y);
  } else { // Acos: 2·atan(sqrt((1 − x) / (1 + x))), exact near 1 where π/2 − asin cancels.
    uint32_t q = bin(PT::PrimitiveType_DivFusion, bin(PT::PrimitiveType_SubFusion, c(1), x),
                     bin(PT::PrimitiveType_AddFusion, c(1), x));
    ch.op(PT::PrimitiveType_MulFusion, {atanOf(ch, sqrtOrNaN(q)), c(2)}, y);
  }
  return Status::ok();
}

KILN_MS_LOWERING("Xor", checkOperands, lowerXorIsNaN);
KILN_MS_LOWERING("IsNaN", checkFloat, lowerXorIsNaN);
KILN_MS_LOWERING("IsInf", checkIsInf, lowerIsInf);
KILN_MS_LOWERING("Sign", checkOperands, lowerSign);
KILN_MS_LOWERING("Round", checkFloat, lowerRound);
KILN_MS_LOWERING("Mean", checkOperands, lowerMean);
KILN_MS_LOWERING("Tan", checkFloat, lowerMath);
KILN_MS_LOWERING("Sinh", checkFloat, lowerMath);
KILN_MS_LOWERING("Cosh", checkFloat, lowerMath);
KILN_MS_LOWERING("Asinh", checkFloat, lowerMath);
KILN_MS_LOWERING("Acosh", checkFloat, lowerMath);
KILN_MS_LOWERING("Atanh", checkFloat, lowerMath);
KILN_MS_LOWERING("Atan", checkFloat, lowerMath);
KILN_MS_LOWERING("Asin", checkFloat, lowerMath);
KILN_MS_LOWERING("Acos", checkFloat, lowerMath);
KILN_MS_LOWERING("Reciprocal", checkOperands, lowerSqrtReciprocal);
KILN_MS_LOWERING("Sqrt", checkOperands, lowerSqrtReciprocal);

} // namespace
} // namespace kiln::ms
