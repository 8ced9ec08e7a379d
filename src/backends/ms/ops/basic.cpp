// .ms rules of the basic family (Identity, Constant, Shape, Size): aliases, constants
// materialized where they are read, Shape / Size ops.
// Lowering (ONNX → .ms: a pure check and the lower that emits ops) and raising (the reader's
// rules for the .ms ops this family emits, back to ONNX ops) side by side.
#include <string>
#include <vector>

#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

// Constants are materialized where they are read.
Status lowerConstant(LoweringContext& ctx, const Node& n) {
  if (ctx.constOf(n.output(0))) return Status::ok();
  return bad("a Constant of a kind .ms tensors do not hold (strings, sparse values)");
}

Status lowerIdentity(LoweringContext& ctx, const Node& n) {
  ctx.setAlias(n.output(0), n.input(0));
  return Status::ok();
}

std::string checkShape(const Node& n, const lowering::OpContext&) {
  if (n.opType() == "Shape" && (n.attribute("start") || n.attribute("end")))
    return "start/end attributes";
  return {};
}

Status lowerShape(LoweringContext& ctx, const Node& n) {
  const std::string& op = n.opType();
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (op == "Shape")
    ctx.emit(fb::PrimitiveType_Shape, emptyTable<fb::Shape>(), {*x}, {*y});
  else
    ctx.emit(fb::PrimitiveType_Size, emptyTable<fb::Size>(), {*x}, {*y});
  return Status::ok();
}

KILN_MS_LOWERING("Constant", acceptAll, lowerConstant);
KILN_MS_LOWERING("Identity", acceptAll, lowerIdentity);
KILN_MS_LOWERING("Shape", checkShape, lowerShape);
KILN_MS_LOWERING("Size", checkShape, lowerShape);
// ---- end of lowering

} // namespace
} // namespace kiln::ms

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

namespace kiln::ms {

namespace {

Status raiseDropout(RaisingContext& ctx, const msfb::Primitive&) { return ctx.unary("Identity"); }

Status raiseShape(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Value* y = ctx.emit("Shape", {x});
  auto dt = ms::dtypeOfTypeId(ctx.tensor(ctx.outIndex(0))->dataType());
  if (dt && *dt != DType::Int64)
    y = ctx.emit("Cast", {y}, {{"to", Attribute::ofInt(dtypeToOnnx(*dt))}});
  return ctx.bind(0, y);
}

Status raiseSize(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Value* y = ctx.emit("Size", {x});
  auto dt = ms::dtypeOfTypeId(ctx.tensor(ctx.outIndex(0))->dataType());
  if (dt && *dt != DType::Int64)
    y = ctx.emit("Cast", {y}, {{"to", Attribute::ofInt(dtypeToOnnx(*dt))}});
  return ctx.bind(0, y);
}

} // namespace

KILN_MS_RAISING(Dropout, raiseDropout);
KILN_MS_RAISING(Shape, raiseShape);
KILN_MS_RAISING(Size, raiseSize);

} // namespace kiln::ms
