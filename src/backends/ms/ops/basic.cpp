// .ms lowering rules of the basic family (Identity, Constant, Shape, Size): aliases, constants
// materialized where they are read, Shape / Size ops.
#include "../ms_context.h"
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
