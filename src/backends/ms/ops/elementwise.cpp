// .ms lowering rules of the elementwise family (Add, Mul, comparisons, logic, unary math, Sum,
// Max/Min, Cast, Where): one .ms op per ONNX op, NHWC when an operand already is.
#include "../ms_context.h"
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
    if (!shape) return bad("single-input {} with an unknown output shape", n.opType());
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
      {"Abs", fb::PrimitiveType_Abs},       {"Neg", fb::PrimitiveType_Neg},
      {"Floor", fb::PrimitiveType_Floor},   {"Ceil", fb::PrimitiveType_Ceil},
      {"Round", fb::PrimitiveType_Round},   {"Reciprocal", fb::PrimitiveType_Reciprocal},
      {"Sin", fb::PrimitiveType_Sin},       {"Cos", fb::PrimitiveType_Cos},
      {"Erf", fb::PrimitiveType_Erf},       {"Not", fb::PrimitiveType_LogicalNot},
      {"Sqrt", fb::PrimitiveType_Sqrt},     {"Log", fb::PrimitiveType_Log},
      {"Exp", fb::PrimitiveType_ExpFusion},
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
  ctx.emit(fb::PrimitiveType_Cast, emptyTable<fb::Cast>(), {*x, dst}, {*y});
  return Status::ok();
}

Status lowerWhere(LoweringContext& ctx, const Node& n) {
  std::vector<uint32_t> ins;
  for (const Value* v : n.inputs()) {
    if (!v) return bad("an omitted input");
    auto id = ctx.input(v, Layout::Onnx);
    if (!id) return id.status();
    ins.push_back(*id);
  }
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
KILN_MS_LOWERING("Reciprocal", acceptAll, lowerUnary);
KILN_MS_LOWERING("Round", acceptAll, lowerUnary);
KILN_MS_LOWERING("Sin", acceptAll, lowerUnary);
KILN_MS_LOWERING("Sqrt", acceptAll, lowerUnary);
KILN_MS_LOWERING("Cast", checkCast, lowerCast);
KILN_MS_LOWERING("Where", checkOperands, lowerWhere);
// ---- end of lowering

} // namespace
} // namespace kiln::ms
