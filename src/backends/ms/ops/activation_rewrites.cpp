// .ms rules of the activation family, rewritten half: Softsign, Selu and ThresholdedRelu (.ms has
// activation types for them, but the runtime populates none of the three: ms.md §4.6), Shrink and
// Hardmax (no .ms op), built from ops .ms has. Lowering only: the ops emitted are read back by the
// activation, elementwise, reduce and shape_ops files.
#include <fmt/format.h>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

using PT = fb::PrimitiveType;

std::string checkFloatInput(const Node& n, const lowering::OpContext&) {
  if (auto axis = ops::intAttr(n, "axis", -1); !axis) return axis.status().message();
  const Value* x = n.input(0);
  if (x && x->dtype() != DType::Undefined &&
      (!isFloatingPoint(x->dtype()) || x->dtype() == DType::BFloat16))
    return fmt::format("{} input", dtypeName(x->dtype()));
  return {};
}

// Softsign → x / (1 + |x|).
Status lowerSoftsign(LoweringContext& ctx, const Node& n) {
  Chain ch(ctx, n);
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  uint32_t den = ch.binary(PT::PrimitiveType_AddFusion, ch.unary(PT::PrimitiveType_Abs, *x),
                           ch.scalar(1, ch.typeOf(*x)));
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ch.op(PT::PrimitiveType_DivFusion, {*x, den}, *y);
  return Status::ok();
}

// The float attributes of Selu, ThresholdedRelu and Shrink, kind-checked, and a float input.
std::string checkFloatActivation(const Node& n, const lowering::OpContext& context) {
  for (const char* name : {"alpha", "gamma", "lambd", "bias"})
    if (auto v = ops::floatAttr(n, name, 0); !v) return v.status().message();
  return checkFloatInput(n, context);
}

// Selu → gamma · Elu(x, alpha): Activation ELU (a type the runtime populates, with its alpha)
// then MulFusion by gamma. For x > 0 both give gamma · x; below, gamma · alpha · (eˣ − 1).
Status lowerSelu(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const float alpha, ops::floatAttr(n, "alpha", 1.67326319217681884765625f));
  KILN_ASSIGN_OR_RETURN(const float gamma, ops::floatAttr(n, "gamma", 1.05070102214813232421875f));
  Chain ch(ctx, n);
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  uint32_t elu = ch.unary(PT::PrimitiveType_Activation, *x, std::nullopt, [=](FBB& b) {
    return fb::CreateActivation(b, fb::ActivationType_ELU, alpha, 0, 0, false).Union();
  });
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ch.op(PT::PrimitiveType_MulFusion, {elu, ch.scalar(gamma, ch.typeOf(*x))}, *y);
  return Status::ok();
}

// ThresholdedRelu → Where(x > alpha, x, 0).
Status lowerThresholdedRelu(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const float alpha, ops::floatAttr(n, "alpha", 1.0f));
  Chain ch(ctx, n);
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  const int type = ch.typeOf(*x);
  uint32_t above = ch.binary(PT::PrimitiveType_Greater, *x, ch.scalar(alpha, type), kTypeBool);
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ch.op(PT::PrimitiveType_Where, {above, *x, ch.scalar(0, type)}, *y);
  return Status::ok();
}

// Shrink → Where(x > lambd, x − bias, Where(x < −lambd, x + bias, 0)).
Status lowerShrink(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const float lambd, ops::floatAttr(n, "lambd", 0.5f));
  KILN_ASSIGN_OR_RETURN(const float bias, ops::floatAttr(n, "bias", 0.0f));
  Chain ch(ctx, n);
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  const int type = ch.typeOf(*x);
  uint32_t below = ch.binary(PT::PrimitiveType_Less, *x, ch.scalar(-lambd, type), kTypeBool);
  uint32_t raised = ch.binary(PT::PrimitiveType_AddFusion, *x, ch.scalar(bias, type));
  uint32_t lower =
      ch.op(PT::PrimitiveType_Where, {below, raised, ch.scalar(0, type)}, ch.tmpLike(*x));
  uint32_t above = ch.binary(PT::PrimitiveType_Greater, *x, ch.scalar(lambd, type), kTypeBool);
  uint32_t cut = ch.binary(PT::PrimitiveType_SubFusion, *x, ch.scalar(bias, type));
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ch.op(PT::PrimitiveType_Where, {above, cut, lower}, *y);
  return Status::ok();
}

// Hardmax → OneHot(ArgMaxFusion(x) {axis}, size, 1, 0) {axis}: ArgMax keeps the first maximum, as
// Hardmax does. Before opset 13 the input is coerced to 2-D at `axis` (Reshape around it).
Status lowerHardmax(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  if (rank < 1) return bad("input of unknown rank");
  const bool coerce = ctx.opset() < 13;
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", coerce ? 1 : -1));
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return bad("axis {} out of range", axis);
  auto shape = ctx.staticShape(n.input(0));
  if (!shape) return bad("Hardmax needs a known input shape");
  Chain ch(ctx, n);
  auto xin = ctx.input(n.input(0), Layout::Onnx);
  if (!xin) return xin.status();
  uint32_t x = *xin;
  const int type = ch.typeOf(x);
  std::vector<int32_t> dims(shape->begin(), shape->end());
  int64_t depth = (*shape)[size_t(axis)];
  int64_t opAxis = axis;
  if (coerce) {
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i)
      (i < axis ? outer : inner) *= (*shape)[size_t(i)];
    uint32_t s = ctx.intConst({outer, inner}, n.output(0)->name() + "_2d");
    x = ch.op(PT::PrimitiveType_Reshape, {x, s}, ch.tmp(type, {int32_t(outer), int32_t(inner)}));
    depth = inner, opAxis = 1;
    dims = {int32_t(outer), int32_t(inner)};
  }
  std::vector<int32_t> reduced = dims;
  reduced.erase(reduced.begin() + opAxis);
  uint32_t idx = ch.op(PT::PrimitiveType_ArgMaxFusion, {x}, ch.tmp(kTypeInt32, reduced),
                       [=](FBB& b) { return fb::CreateArgMaxFusion(b, opAxis, 1, false).Union(); });
  uint32_t d = ch.scalar(double(depth), kTypeInt32);
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  const uint32_t hot = coerce ? ch.tmp(type, dims) : *y;
  ch.op(PT::PrimitiveType_OneHot, {idx, d, ch.scalar(1, type), ch.scalar(0, type)}, hot,
        [=](FBB& b) { return fb::CreateOneHot(b, opAxis).Union(); });
  if (coerce) {
    uint32_t s = ctx.intConst(*shape, n.output(0)->name() + "_shape");
    ch.op(PT::PrimitiveType_Reshape, {hot, s}, *y);
  }
  return Status::ok();
}

KILN_MS_LOWERING("Softsign", checkFloatInput, lowerSoftsign);
KILN_MS_LOWERING("Hardmax", checkFloatInput, lowerHardmax);
KILN_MS_LOWERING("Selu", checkFloatActivation, lowerSelu);
KILN_MS_LOWERING("ThresholdedRelu", checkFloatActivation, lowerThresholdedRelu);
KILN_MS_LOWERING("Shrink", checkFloatActivation, lowerShrink);

} // namespace
} // namespace kiln::ms
