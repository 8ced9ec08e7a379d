// .ms raising rules (reader, .ms → IR): arithmetic, comparison, logic, unary math, Cast, Where.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends/ms/ms_raise_context.h"

namespace kiln::ms {

namespace {

Status raiseAddFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  return ctx.binary("Add", p.value_as_AddFusion()->activation_type());
}

Status raiseSubFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  return ctx.binary("Sub", p.value_as_SubFusion()->activation_type());
}

Status raiseMulFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  return ctx.binary("Mul", p.value_as_MulFusion()->activation_type());
}

Status raiseDivFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  return ctx.binary("Div", p.value_as_DivFusion()->activation_type());
}

Status raiseRealDiv(RaisingContext& ctx, const msfb::Primitive&) {
  return ctx.binary("Div", msfb::ActivationType_NO_ACTIVATION);
}

Status raiseMaximum(RaisingContext& ctx, const msfb::Primitive&) {
  return ctx.binary("Max", msfb::ActivationType_NO_ACTIVATION);
}

Status raiseMinimum(RaisingContext& ctx, const msfb::Primitive&) {
  return ctx.binary("Min", msfb::ActivationType_NO_ACTIVATION);
}

Status raiseEqual(RaisingContext& ctx, const msfb::Primitive&) {
  return ctx.binary("Equal", msfb::ActivationType_NO_ACTIVATION);
}

Status raiseLess(RaisingContext& ctx, const msfb::Primitive&) {
  return ctx.binary("Less", msfb::ActivationType_NO_ACTIVATION);
}

Status raiseLessEqual(RaisingContext& ctx, const msfb::Primitive&) {
  return ctx.binary("LessOrEqual", msfb::ActivationType_NO_ACTIVATION);
}

Status raiseGreater(RaisingContext& ctx, const msfb::Primitive&) {
  return ctx.binary("Greater", msfb::ActivationType_NO_ACTIVATION);
}

Status raiseGreaterEqual(RaisingContext& ctx, const msfb::Primitive&) {
  return ctx.binary("GreaterOrEqual", msfb::ActivationType_NO_ACTIVATION);
}

Status raiseLogicalAnd(RaisingContext& ctx, const msfb::Primitive&) {
  return ctx.binary("And", msfb::ActivationType_NO_ACTIVATION);
}

Status raiseLogicalOr(RaisingContext& ctx, const msfb::Primitive&) {
  return ctx.binary("Or", msfb::ActivationType_NO_ACTIVATION);
}

Status raiseNotEqual(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * a, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(1));
  return ctx.bind(0, ctx.emit("Not", {ctx.emit("Equal", {a, b})}));
}

Status raiseSquaredDifference(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * a, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(1));
  Value* d = ctx.emit("Sub", {a, b});
  return ctx.bind(0, ctx.emit("Mul", {d, d}));
}

Status raiseFloorDiv(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * a, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(1));
  auto dt = ms::dtypeOfTypeId(ctx.tensor(ctx.inIndex(0))->dataType());
  if (dt && !isFloatingPoint(*dt)) return ctx.nodeUnsupported("integer FloorDiv");
  return ctx.bind(0, ctx.emit("Floor", {ctx.emit("Div", {a, b})}));
}

Status raiseFloorModOrMod(RaisingContext& ctx, const msfb::Primitive& p) {
  KILN_ASSIGN_OR_RETURN(Value * a, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(1));
  // Mod truncates (the sign of a, C fmod); FloorMod floors (the sign of b).
  if (p.value_type() == msfb::PrimitiveType_Mod)
    return ctx.bind(0, ctx.emit("Mod", {a, b}, {{"fmod", Attribute::ofInt(1)}}));
  auto dt = ms::dtypeOfTypeId(ctx.tensor(ctx.inIndex(0))->dataType());
  if (dt && isFloatingPoint(*dt)) {
    // a − floor(a / b)·b: ONNX Mod floors integers only.
    Value* q = ctx.emit("Floor", {ctx.emit("Div", {a, b})});
    return ctx.bind(0, ctx.emit("Sub", {a, ctx.emit("Mul", {q, b})}));
  }
  return ctx.bind(0, ctx.emit("Mod", {a, b}));
}

Status raisePowFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* pw = p.value_as_PowFusion();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  if (pw->scale() != 1.0f) x = ctx.emit("Mul", {x, ctx.scalar(pw->scale(), ctx.floatType())});
  if (pw->shift() != 0.0f) x = ctx.emit("Add", {x, ctx.scalar(pw->shift(), ctx.floatType())});
  KILN_ASSIGN_OR_RETURN(Value * e, ctx.in(1));
  return ctx.bind(0, ctx.emit("Pow", {x, e}));
}

Status raiseAbs(RaisingContext& ctx, const msfb::Primitive&) { return ctx.unary("Abs"); }

Status raiseNeg(RaisingContext& ctx, const msfb::Primitive&) { return ctx.unary("Neg"); }

Status raiseFloor(RaisingContext& ctx, const msfb::Primitive&) { return ctx.unary("Floor"); }

Status raiseCeil(RaisingContext& ctx, const msfb::Primitive&) { return ctx.unary("Ceil"); }

Status raiseRound(RaisingContext& ctx, const msfb::Primitive&) { return ctx.unary("Round"); }

Status raiseSqrt(RaisingContext& ctx, const msfb::Primitive&) { return ctx.unary("Sqrt"); }

Status raiseLog(RaisingContext& ctx, const msfb::Primitive&) { return ctx.unary("Log"); }

Status raiseSin(RaisingContext& ctx, const msfb::Primitive&) { return ctx.unary("Sin"); }

Status raiseCos(RaisingContext& ctx, const msfb::Primitive&) { return ctx.unary("Cos"); }

Status raiseErf(RaisingContext& ctx, const msfb::Primitive&) { return ctx.unary("Erf"); }

Status raiseReciprocal(RaisingContext& ctx, const msfb::Primitive&) {
  return ctx.unary("Reciprocal");
}

Status raiseLogicalNot(RaisingContext& ctx, const msfb::Primitive&) { return ctx.unary("Not"); }

Status raiseRsqrt(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  return ctx.bind(0, ctx.emit("Reciprocal", {ctx.emit("Sqrt", {x})}));
}

Status raiseSquare(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  return ctx.bind(0, ctx.emit("Mul", {x, x}));
}

Status raiseLog1p(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  return ctx.bind(0, ctx.emit("Log", {ctx.emit("Add", {x, ctx.scalar(1, ctx.floatType())})}));
}

Status raiseIsFinite(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Value* bad = ctx.emit("Or", {ctx.emit("IsInf", {x}), ctx.emit("IsNaN", {x})});
  return ctx.bind(0, ctx.emit("Not", {bad}));
}

Status raiseExpFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* e = p.value_as_ExpFusion();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  float base = e->base();
  if (!(base == -1.0f || base > 0)) return ctx.nodeUnsupported("ExpFusion base must be -1 or > 0");
  float factor = e->scale() * (base == -1.0f ? 1.0f : std::log(base));
  float shift = e->shift() * (base == -1.0f ? 1.0f : std::log(base));
  if (factor != 1.0f) x = ctx.emit("Mul", {x, ctx.scalar(factor, ctx.floatType())});
  if (shift != 0.0f) x = ctx.emit("Add", {x, ctx.scalar(shift, ctx.floatType())});
  return ctx.bind(0, ctx.emit("Exp", {x}));
}

Status raiseCast(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  std::optional<DType> to;
  if (ctx.inputCount() > 1) {
    KILN_ASSIGN_OR_RETURN(auto t, ctx.constInts(1));
    if (t.size() != 1) return ctx.nodeUnsupported("Cast type must be one value");
    to = ms::dtypeOfTypeId(int(t[0]));
    if (!to) return ctx.nodeUnsupported(fmt::format("Cast to TypeId {}", t[0]));
  } else {
    to = ms::dtypeOfTypeId(ctx.tensor(ctx.outIndex(0))->dataType());
    if (!to) return ctx.nodeUnsupported("Cast without a type input");
  }
  return ctx.bind(0, ctx.emit("Cast", {x}, {{"to", Attribute::ofInt(dtypeToOnnx(*to))}}));
}

Status raiseWhereOrSelect(RaisingContext& ctx, const msfb::Primitive&) {
  if (ctx.inputCount() != 3) return ctx.nodeUnsupported("needs condition, x and y");
  KILN_ASSIGN_OR_RETURN(Value * c, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * a, ctx.in(1));
  KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(2));
  return ctx.bind(0, ctx.emit("Where", {c, a, b}));
}

Status raiseScaleFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* s = p.value_as_ScaleFusion();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  if (ctx.inputCount() < 2) return ctx.nodeUnsupported("needs input and scale");
  auto xd = ctx.dims(ctx.inIndex(0));
  auto sd = ctx.dims(ctx.inIndex(1));
  int64_t rank = int64_t(xd.size());
  int64_t axis = s->axis() < 0 ? s->axis() + rank : s->axis();
  if (rank == 0 || axis < 0 || axis + int64_t(sd.size()) > rank)
    return ctx.nodeUnsupported("ScaleFusion axis does not fit the input rank");
  // The scale covers dims [axis, axis + rank(scale)); trailing dims broadcast.
  std::vector<int64_t> shape = sd;
  shape.resize(size_t(rank - axis), 1);
  KILN_ASSIGN_OR_RETURN(Value * scale, ctx.in(1));
  if (int64_t(shape.size()) != int64_t(sd.size()))
    scale = ctx.emit("Reshape", {scale, ctx.ints(shape)});
  Value* y = ctx.emit("Mul", {x, scale});
  if (ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(2));
    if (int64_t(shape.size()) != int64_t(sd.size())) b = ctx.emit("Reshape", {b, ctx.ints(shape)});
    y = ctx.emit("Add", {y, b});
  }
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(y, s->activation_type()));
  return ctx.bind(0, y);
}

Status raiseBiasAdd(RaisingContext& ctx, const msfb::Primitive&) {
  return ctx.binary("Add", msfb::ActivationType_NO_ACTIVATION);
}

Status raiseAddNOrEltwise(RaisingContext& ctx, const msfb::Primitive& p) {
  std::string op = "Sum";
  if (p.value_type() == msfb::PrimitiveType_Eltwise) {
    auto mode = p.value_as_Eltwise()->mode();
    if (mode == msfb::EltwiseMode_PROD)
      op = "Mul";
    else if (mode == msfb::EltwiseMode_MAXIMUM)
      op = "Max";
    else if (mode != msfb::EltwiseMode_SUM)
      return ctx.nodeUnsupported("Eltwise mode");
  }
  std::vector<Value*> ins;
  for (size_t k = 0; k < ctx.inputCount(); ++k) {
    KILN_ASSIGN_OR_RETURN(Value * v, ctx.in(k));
    ins.push_back(v);
  }
  if (ins.empty()) return ctx.nodeUnsupported("needs at least one input");
  if (op == "Mul") {
    Value* y = ins[0];
    for (size_t k = 1; k < ins.size(); ++k)
      y = ctx.emit("Mul", {y, ins[k]});
    return ctx.bind(0, y);
  }
  return ctx.bind(0, ctx.emit(op, ins));
}

} // namespace

KILN_MS_RAISING(AddFusion, raiseAddFusion);
KILN_MS_RAISING(SubFusion, raiseSubFusion);
KILN_MS_RAISING(MulFusion, raiseMulFusion);
KILN_MS_RAISING(DivFusion, raiseDivFusion);
KILN_MS_RAISING(RealDiv, raiseRealDiv);
KILN_MS_RAISING(Maximum, raiseMaximum);
KILN_MS_RAISING(Minimum, raiseMinimum);
KILN_MS_RAISING(Equal, raiseEqual);
KILN_MS_RAISING(Less, raiseLess);
KILN_MS_RAISING(LessEqual, raiseLessEqual);
KILN_MS_RAISING(Greater, raiseGreater);
KILN_MS_RAISING(GreaterEqual, raiseGreaterEqual);
KILN_MS_RAISING(LogicalAnd, raiseLogicalAnd);
KILN_MS_RAISING(LogicalOr, raiseLogicalOr);
KILN_MS_RAISING(NotEqual, raiseNotEqual);
KILN_MS_RAISING(SquaredDifference, raiseSquaredDifference);
KILN_MS_RAISING(FloorDiv, raiseFloorDiv);
KILN_MS_RAISING(FloorMod, raiseFloorModOrMod);
KILN_MS_RAISING(Mod, raiseFloorModOrMod);
KILN_MS_RAISING(PowFusion, raisePowFusion);
KILN_MS_RAISING(Abs, raiseAbs);
KILN_MS_RAISING(Neg, raiseNeg);
KILN_MS_RAISING(Floor, raiseFloor);
KILN_MS_RAISING(Ceil, raiseCeil);
KILN_MS_RAISING(Round, raiseRound);
KILN_MS_RAISING(Sqrt, raiseSqrt);
KILN_MS_RAISING(Log, raiseLog);
KILN_MS_RAISING(Sin, raiseSin);
KILN_MS_RAISING(Cos, raiseCos);
KILN_MS_RAISING(Erf, raiseErf);
KILN_MS_RAISING(Reciprocal, raiseReciprocal);
KILN_MS_RAISING(LogicalNot, raiseLogicalNot);
KILN_MS_RAISING(Rsqrt, raiseRsqrt);
KILN_MS_RAISING(Square, raiseSquare);
KILN_MS_RAISING(Log1p, raiseLog1p);
KILN_MS_RAISING(IsFinite, raiseIsFinite);
KILN_MS_RAISING(ExpFusion, raiseExpFusion);
KILN_MS_RAISING(Cast, raiseCast);
KILN_MS_RAISING(Where, raiseWhereOrSelect);
KILN_MS_RAISING(Select, raiseWhereOrSelect);
KILN_MS_RAISING(ScaleFusion, raiseScaleFusion);
KILN_MS_RAISING(BiasAdd, raiseBiasAdd);
KILN_MS_RAISING(AddN, raiseAddNOrEltwise);
KILN_MS_RAISING(Eltwise, raiseAddNOrEltwise);

} // namespace kiln::ms
