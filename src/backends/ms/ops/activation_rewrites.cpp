// .ms rules of the activation family, rewritten half: Softsign (no .ms activation type the runtime
// populates) and Hardmax (no .ms op), built from ops .ms has. Lowering only: the ops emitted are
// read back by the elementwise, reduce and shape_ops files.
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

} // namespace
} // namespace kiln::ms
