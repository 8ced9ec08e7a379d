// .ms raising rules (reader, .ms → IR): Dropout, Shape, Size.
#include <string>
#include <vector>

#include "backends/ms/ms_raise_context.h"

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
