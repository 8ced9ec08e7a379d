// .ms rules of the elementwise family (Add, Mul, comparisons, logic, unary math, Sum,
// Max/Min, Cast, Where): one .ms op per ONNX op, NHWC when an operand already is.
// Lowering (ONNX → .ms: a pure check and the lower that emits ops) and raising (the reader's
// rules for the .ms ops this family emits, back to ONNX ops) side by side.
#include <cmath>
#include <fmt/format.h>
#include <optional>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

// Ops whose every input is read: none may be omitted.
std::string checkOperands(const Node& n, const lowering::OpContext&) {
  for (const Value* v : n.inputs())
    if (!v) return "an omitted input";
  return {};
}

std::string checkMod(const Node& n, const lowering::OpContext& context) {
  auto fmod = ops::intAttr(n, "fmod", 0);
  return fmod ? checkOperands(n, context) : fmod.status().message();
}

// Elementwise binary ops: NHWC when the result is 4-D and an operand already is NHWC (constants
// are rank-padded and permuted to match), else the ONNX layout.
Status lowerBinary(LoweringContext& ctx, const Node& n) {
  static const std::map<std::string, fb::PrimitiveType> types = {
      {"Add", fb::PrimitiveType_AddFusion},
      {"Sub", fb::PrimitiveType_SubFusion},
      {"Mul", fb::PrimitiveType_MulFusion},
      {"Div", fb::PrimitiveType_DivFusion},
      {"Pow", fb::PrimitiveType_PowFusion},
      {"Max", fb::PrimitiveType_Maximum},
      {"Min", fb::PrimitiveType_Minimum},
      {"Equal", fb::PrimitiveType_Equal},
      {"Less", fb::PrimitiveType_Less},
      {"Greater", fb::PrimitiveType_Greater},
      {"LessOrEqual", fb::PrimitiveType_LessEqual},
      {"GreaterOrEqual", fb::PrimitiveType_GreaterEqual},
      {"And", fb::PrimitiveType_LogicalAnd},
      {"Or", fb::PrimitiveType_LogicalOr},
  };
  fb::PrimitiveType type;
  if (n.opType() == "Mod") {
    KILN_ASSIGN_OR_RETURN(const int64_t fmod, ops::intAttr(n, "fmod", 0));
    type = fmod ? fb::PrimitiveType_Mod : fb::PrimitiveType_FloorMod;
  } else
    type = types.at(n.opType());
  const Value* outV = ctx.fusedOutput(n);
  bool nhwc = outV->shape().hasRank() && outV->shape().rank() == 4;
  bool anyNhwc = false;
  for (const Value* v : n.inputs()) {
    if (!v) continue;
    if (ctx.constOf(v)) continue;
    if (ctx.availableNhwc(v))
      anyNhwc = true;
    else if (ctx.rankOf(v) != 4)
      nhwc = false;
  }
  nhwc = nhwc && anyNhwc;
  std::vector<uint32_t> ins;
  for (const Value* v : n.inputs()) {
    if (!v) return bad("omitted input");
    auto c = ctx.constOf(v);
    auto id =
        nhwc && c ? ctx.broadcastConstNhwc(*c) : ctx.input(v, nhwc ? Layout::Nhwc : Layout::Onnx);
    if (!id) return id.status();
    ins.push_back(*id);
  }
  // The runtime's PowFusion takes an exponent of the base's shape or of one element, and gives
  // its output the base's shape (PowerInferShape, nnacl/infer/power_infer.c): other operands are
  // broadcast to the output shape first.
  if (type == fb::PrimitiveType_PowFusion && !nhwc) {
    if (auto out = ctx.staticShape(outV)) {
      std::vector<int32_t> dims(out->begin(), out->end());
      for (size_t i = 0; i < 2; ++i) {
        auto shape = ctx.staticShape(n.input(i));
        int64_t count = 1;
        for (int64_t d : shape ? *shape : *out)
          count *= d;
        if (!shape || *shape == *out || (i == 1 && count == 1)) continue;
        Chain ch(ctx, n);
        const std::vector<int64_t> target = *out;
        ins[i] = ch.op(fb::PrimitiveType_BroadcastTo,
                       {ins[i], ctx.intConst(target, n.output(0)->name() + "_shape")},
                       ch.tmp(ch.typeOf(ins[i]), dims), [=](FBB& b) {
                         return fb::CreateBroadcastTo(b, b.CreateVector(target)).Union();
                       });
      }
    }
  }
  auto y = ctx.output(outV, nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!y) return y.status();
  const int act = ctx.activationFor(n);
  AttrBuilder attrs;
  switch (type) {
  case fb::PrimitiveType_AddFusion:
    attrs = [=](FBB& b) {
      return fb::CreateAddFusion(b, static_cast<fb::ActivationType>(act)).Union();
    };
    break;
  case fb::PrimitiveType_SubFusion:
    attrs = [=](FBB& b) {
      return fb::CreateSubFusion(b, static_cast<fb::ActivationType>(act)).Union();
    };
    break;
  case fb::PrimitiveType_MulFusion:
    attrs = [=](FBB& b) {
      return fb::CreateMulFusion(b, static_cast<fb::ActivationType>(act)).Union();
    };
    break;
  case fb::PrimitiveType_DivFusion:
    attrs = [=](FBB& b) {
      return fb::CreateDivFusion(b, static_cast<fb::ActivationType>(act)).Union();
    };
    break;
  case fb::PrimitiveType_PowFusion:
    attrs = [](FBB& b) { return fb::CreatePowFusion(b, 1.0f, 0.0f).Union(); };
    break;
  default:
    attrs = [type](FBB& b) {
      // Attribute-free tables: an empty table of the right union member.
      flatbuffers::uoffset_t start = b.StartTable();
      (void)type;
      return flatbuffers::Offset<void>(b.EndTable(start));
    };
  }
  ctx.emit(type, attrs, ins, {*y});
  return Status::ok();
}

// A bias-corrected quantized weight (see constOf) is materialized where it is read.
Status lowerAdd(LoweringContext& ctx, const Node& n) {
  auto c = ctx.constOf(n.output(0));
  if (c && c->quantized) return Status::ok();
  return lowerBinary(ctx, n);
}

// Sum / Max / Min / Mean with N inputs.
Status lowerVariadic(LoweringContext& ctx, const Node& n) {
  std::vector<const Value*> ins;
  for (const Value* v : n.inputs())
    if (v) ins.push_back(v);
  if (ins.size() == 1) {
    auto x = ctx.input(ins[0], Layout::Onnx);
    if (!x) return x.status();
    // A copy through Reshape keeps the output a node-produced tensor with its own name.
    auto shape = ctx.staticShape(n.output(0));
    if (!shape) return dynamicShape("single-input {} with an unknown output shape", n.opType());
    uint32_t s = ctx.intConst(*shape, n.output(0)->name() + "_shape");
    auto y = ctx.output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    ctx.emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {*x, s}, {*y});
    return Status::ok();
  }
  if (n.opType() == "Sum") {
    // AddN needs equal shapes; broadcasting sums chain AddFusion instead.
    std::vector<uint32_t> ids;
    for (const Value* v : ins) {
      auto id = ctx.input(v, Layout::Onnx);
      if (!id) return id.status();
      ids.push_back(*id);
    }
    bool same = true;
    for (const Value* v : ins)
      same = same && ctx.staticShape(v) && ctx.staticShape(v) == ctx.staticShape(n.output(0));
    if (same) {
      auto y = ctx.output(n.output(0), Layout::Onnx);
      if (!y) return y.status();
      ctx.emit(fb::PrimitiveType_AddN, emptyTable<fb::AddN>(), ids, {*y});
      return Status::ok();
    }
  }
  // Chain pairwise.
  fb::PrimitiveType type = n.opType() == "Max"   ? fb::PrimitiveType_Maximum
                           : n.opType() == "Min" ? fb::PrimitiveType_Minimum
                                                 : fb::PrimitiveType_AddFusion;
  auto acc = ctx.input(ins[0], Layout::Onnx);
  if (!acc) return acc.status();
  uint32_t cur = *acc;
  for (size_t i = 1; i < ins.size(); ++i) {
    auto next = ctx.input(ins[i], Layout::Onnx);
    if (!next) return next.status();
    uint32_t y;
    if (i + 1 == ins.size()) {
      auto o = ctx.output(n.output(0), Layout::Onnx);
      if (!o) return o.status();
      y = *o;
    } else {
      MsTensor t;
      t.name = fmt::format("{}_partial{}", n.output(0)->name(), i);
      t.dataType = ctx.tensor(cur).dataType;
      y = ctx.addTensor(std::move(t));
    }
    AttrBuilder attrs =
        type == fb::PrimitiveType_AddFusion ? AttrBuilder(emptyTable<fb::AddFusion>())
        : type == fb::PrimitiveType_Maximum ? AttrBuilder(emptyTable<fb::Maximum>())
                                            : AttrBuilder(emptyTable<fb::Minimum>());
    ctx.emit(type, attrs, {cur, *next}, {y});
    cur = y;
  }
  return Status::ok();
}

Status lowerMaxMin(LoweringContext& ctx, const Node& n) {
  size_t count = 0;
  for (const Value* v : n.inputs())
    count += v != nullptr;
  return count == 2 ? lowerBinary(ctx, n) : lowerVariadic(ctx, n);
}

Status lowerUnary(LoweringContext& ctx, const Node& n) {
  static const std::map<std::string, fb::PrimitiveType> types = {
      {"Abs", fb::PrimitiveType_Abs},        {"Neg", fb::PrimitiveType_Neg},
      {"Floor", fb::PrimitiveType_Floor},    {"Ceil", fb::PrimitiveType_Ceil},
      {"Sin", fb::PrimitiveType_Sin},        {"Cos", fb::PrimitiveType_Cos},
      {"Erf", fb::PrimitiveType_Erf},        {"Not", fb::PrimitiveType_LogicalNot},
      {"Log", fb::PrimitiveType_Log},        {"Exp", fb::PrimitiveType_ExpFusion},
  };
  const fb::PrimitiveType type = types.at(n.opType());
  const Layout layout = ctx.availableNhwc(n.input(0)) ? Layout::Nhwc : Layout::Onnx;
  auto x = ctx.input(n.input(0), layout);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), layout);
  if (!y) return y.status();
  AttrBuilder attrs;
  if (type == fb::PrimitiveType_ExpFusion)
    attrs = [](FBB& b) { return fb::CreateExpFusion(b, -1.0f, 1.0f, 0.0f).Union(); };
  else
    attrs = [](FBB& b) {
      flatbuffers::uoffset_t start = b.StartTable();
      return flatbuffers::Offset<void>(b.EndTable(start));
    };
  ctx.emit(type, attrs, {*x}, {*y});
  return Status::ok();
}

const std::set<DType>& castTypes() {
  static const std::set<DType> ok = {DType::Bool,  DType::UInt8,   DType::Int8,   DType::Int32,
                                     DType::Int64, DType::Float32, DType::Float16};
  return ok;
}

std::string checkCast(const Node& n, const lowering::OpContext&) {
  auto to = ops::intAttr(n, "to", 1);
  if (!to) return to.status().message();
  if (!castTypes().count(static_cast<DType>(*to)))
    return fmt::format("Cast to {} (.ms Cast makes bool/uint8/int8/int32/int64/float32/float16)",
                       dtypeName(static_cast<DType>(*to)));
  return {};
}

// The runtime's float32 → float16 Cast (Float32ToShort in nnacl/nnacl_common.c) drops the
// mantissa's low 13 bits: it truncates where ONNX rounds to nearest. Rounding `x` to float16's 11
// significant bits first makes the truncation exact: Veltkamp's split, t = 8193·x,
// r = t − (t − x), in float32 arithmetic. |x| ≥ 65520 (float16 overflows), inf and NaN pass as
// they are (t would be inf there and r NaN).
uint32_t roundedToHalf(LoweringContext& ctx, const Node& n, uint32_t x) {
  Chain ch(ctx, n);
  const int f32 = kTypeFloat32;
  uint32_t t = ch.binary(fb::PrimitiveType_MulFusion, x, ch.scalar(8193, f32));
  uint32_t r =
      ch.binary(fb::PrimitiveType_SubFusion, t, ch.binary(fb::PrimitiveType_SubFusion, t, x));
  uint32_t inRange = ch.binary(fb::PrimitiveType_Less, ch.unary(fb::PrimitiveType_Abs, x),
                               ch.scalar(65520, f32), kTypeBool);
  return ch.op(fb::PrimitiveType_Where, {inRange, r, x}, ch.tmpLike(x));
}

Status lowerCast(LoweringContext& ctx, const Node& n) {
  const DType from = ctx.resolve(n.input(0))->dtype();
  KILN_ASSIGN_OR_RETURN(const int64_t toAttr, ops::intAttr(n, "to", 1));
  const DType to = static_cast<DType>(toAttr);
  const std::set<DType>& ok = castTypes();
  if (from != DType::Undefined && !ok.count(from))
    return bad("Cast from {} (.ms Cast takes bool/uint8/int8/int32/int64/float32/float16)",
               dtypeName(from));
  if (!ok.count(to))
    return bad("Cast to {} (.ms Cast makes bool/uint8/int8/int32/int64/float32/float16)",
               dtypeName(to));
  const Layout layout = ctx.availableNhwc(n.input(0)) ? Layout::Nhwc : Layout::Onnx;
  auto x = ctx.input(n.input(0), layout);
  if (!x) return x.status();
  uint32_t dst = ctx.intConst({*typeIdOf(to)}, n.output(0)->name() + "_to", std::vector<int32_t>{});
  auto y = ctx.output(n.output(0), layout);
  if (!y) return y.status();
  uint32_t src = *x;
  if (from == DType::Float32 && to == DType::Float16) src = roundedToHalf(ctx, n, src);
  ctx.emit(fb::PrimitiveType_Cast, emptyTable<fb::Cast>(), {src, dst}, {*y});
  return Status::ok();
}

Status lowerWhere(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(std::vector<uint32_t> ins, ctx.inputs(n, Layout::Onnx));
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_Where, emptyTable<fb::Where>(), ins, {*y});
  return Status::ok();
}

KILN_MS_LOWERING("Add", checkOperands, lowerAdd);
KILN_MS_LOWERING("And", checkOperands, lowerBinary);
KILN_MS_LOWERING("Div", checkOperands, lowerBinary);
KILN_MS_LOWERING("Equal", checkOperands, lowerBinary);
KILN_MS_LOWERING("Greater", checkOperands, lowerBinary);
KILN_MS_LOWERING("GreaterOrEqual", checkOperands, lowerBinary);
KILN_MS_LOWERING("Less", checkOperands, lowerBinary);
KILN_MS_LOWERING("LessOrEqual", checkOperands, lowerBinary);
KILN_MS_LOWERING("Mod", checkMod, lowerBinary);
KILN_MS_LOWERING("Mul", checkOperands, lowerBinary);
KILN_MS_LOWERING("Or", checkOperands, lowerBinary);
KILN_MS_LOWERING("Pow", checkOperands, lowerBinary);
KILN_MS_LOWERING("Sub", checkOperands, lowerBinary);
KILN_MS_LOWERING("Max", acceptAll, lowerMaxMin);
KILN_MS_LOWERING("Min", acceptAll, lowerMaxMin);
KILN_MS_LOWERING("Sum", acceptAll, lowerVariadic);
KILN_MS_LOWERING("Abs", acceptAll, lowerUnary);
KILN_MS_LOWERING("Ceil", acceptAll, lowerUnary);
KILN_MS_LOWERING("Cos", acceptAll, lowerUnary);
KILN_MS_LOWERING("Erf", acceptAll, lowerUnary);
KILN_MS_LOWERING("Exp", acceptAll, lowerUnary);
KILN_MS_LOWERING("Floor", acceptAll, lowerUnary);
KILN_MS_LOWERING("Log", acceptAll, lowerUnary);
KILN_MS_LOWERING("Neg", acceptAll, lowerUnary);
KILN_MS_LOWERING("Not", acceptAll, lowerUnary);
KILN_MS_LOWERING("Sin", acceptAll, lowerUnary);
KILN_MS_LOWERING("Cast", checkCast, lowerCast);
KILN_MS_LOWERING("Where", checkOperands, lowerWhere);
// ---- end of lowering

} // namespace
} // namespace kiln::ms

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

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

// log1p(x) = log(w)·x/(w − 1) with w = 1 + x (the rounding of w cancels), x where w rounds to 1.
Status raiseLog1p(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  auto dt = ms::dtypeOfTypeId(ctx.tensor(ctx.inIndex(0))->dataType()).value_or(ctx.floatType());
  Value* one = ctx.scalar(1, dt);
  Value* w = ctx.emit("Add", {x, one});
  Value* d = ctx.emit("Sub", {w, one});
  Value* exact = ctx.emit("Div", {ctx.emit("Mul", {ctx.emit("Log", {w}), x}), d});
  Value* tiny = ctx.emit("Equal", {d, ctx.scalar(0, dt)});
  return ctx.bind(0, ctx.emit("Where", {tiny, x, exact}));
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

Status raiseWhereOrSelect(RaisingContext& ctx, const msfb::Primitive& p) {
  if (ctx.inputCount() == 1 && p.value_type() == msfb::PrimitiveType_Where) {
    // One input: the positions of the true elements, int32 [count, rank].
    KILN_ASSIGN_OR_RETURN(Value * c, ctx.in(0));
    Value* nz = ctx.emit("NonZero", {c});
    Value* rows = ctx.emit("Transpose", {nz}, {{"perm", Attribute::ofInts({1, 0})}});
    return ctx.bind(
        0, ctx.emit("Cast", {rows}, {{"to", Attribute::ofInt(dtypeToOnnx(DType::Int32))}}));
  }
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
