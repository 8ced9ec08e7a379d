// .ms raising rules (reader, .ms → IR): ReduceFusion, ArgMax/ArgMin, CumSum.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends/ms/ms_raise_context.h"

namespace kiln::ms {

namespace {

Status raiseReduceFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::ReduceFusion* r = p.value_as_ReduceFusion();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  std::vector<int64_t> axes;
  Value* dynamicAxes = nullptr; // axes computed at run time (a graph input, a Shape chain)
  if (ctx.inputCount() > 1) {
    if (ctx.isConstant(ctx.inIndex(1))) {
      KILN_ASSIGN_OR_RETURN(axes, ctx.constInts(1));
    } else {
      if (r->reduce_to_end()) return ctx.nodeUnsupported("reduce_to_end needs constant axes");
      KILN_ASSIGN_OR_RETURN(dynamicAxes, ctx.int64Input(1));
      dynamicAxes = ctx.emit("Reshape", {dynamicAxes, ctx.ints({-1})});
    }
  }
  if (r->reduce_to_end()) {
    if (axes.size() != 1) return ctx.nodeUnsupported("reduce_to_end needs one start axis");
    auto rank = ctx.dims(ctx.inIndex(0)).size();
    if (rank == 0) return ctx.nodeUnsupported("reduce_to_end needs the input rank");
    int64_t start = axes[0] < 0 ? axes[0] + int64_t(rank) : axes[0];
    axes.clear();
    for (int64_t a = start; a < int64_t(rank); ++a)
      axes.push_back(a);
  }
  std::string op;
  bool abs = false;
  switch (r->mode()) {
  case msfb::ReduceMode_ReduceMean:
    op = "ReduceMean";
    break;
  case msfb::ReduceMode_ReduceMax:
    op = "ReduceMax";
    break;
  case msfb::ReduceMode_ReduceMin:
    op = "ReduceMin";
    break;
  case msfb::ReduceMode_ReduceProd:
    op = "ReduceProd";
    break;
  case msfb::ReduceMode_ReduceSum:
    op = "ReduceSum";
    break;
  case msfb::ReduceMode_ReduceSumSquare:
    op = "ReduceSumSquare";
    break;
  case msfb::ReduceMode_ReduceASum:
    op = "ReduceSum", abs = true;
    break;
  case msfb::ReduceMode_ReduceL2:
    op = "ReduceSumSquare";
    break;
  default:
    return ctx.nodeUnsupported(fmt::format("reduce mode {}", msfb::EnumNameReduceMode(r->mode())));
  }
  if (abs) x = ctx.emit("Abs", {x});
  std::vector<Value*> ins{x};
  if (dynamicAxes)
    ins.push_back(dynamicAxes); // an empty axes tensor reduces every axis, as in .ms
  else if (!axes.empty())
    ins.push_back(ctx.ints(axes));
  Value* y = ctx.emit(op, ins, {{"keepdims", Attribute::ofInt(r->keep_dims() ? 1 : 0)}});
  if (r->mode() == msfb::ReduceMode_ReduceL2) y = ctx.emit("Sqrt", {y});
  return ctx.bind(0, y);
}

Status raiseArgMinMaxFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  bool isMax = p.value_type() == msfb::PrimitiveType_ArgMaxFusion;
  int64_t axis, topK;
  bool keep, outValue;
  if (isMax) {
    auto* a = p.value_as_ArgMaxFusion();
    axis = a->axis(), topK = a->top_k(), keep = a->keep_dims(), outValue = a->out_max_value();
  } else {
    auto* a = p.value_as_ArgMinFusion();
    axis = a->axis(), topK = a->top_k(), keep = a->keep_dims(), outValue = a->out_max_value();
  }
  if (topK > 1) return ctx.nodeUnsupported("top_k > 1");
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Node::AttributeList attrs{{"axis", Attribute::ofInt(axis)},
                            {"keepdims", Attribute::ofInt(keep ? 1 : 0)}};
  if (outValue) {
    if (ctx.outputCount() > 1) return ctx.nodeUnsupported("out_max_value with two outputs");
    return ctx.bind(0, ctx.emit(isMax ? "ReduceMax" : "ReduceMin", {x, ctx.ints({axis})},
                                {{"keepdims", Attribute::ofInt(keep ? 1 : 0)}}));
  }
  Value* y = ctx.emit(isMax ? "ArgMax" : "ArgMin", {x}, std::move(attrs));
  auto dt = ms::dtypeOfTypeId(ctx.tensor(ctx.outIndex(0))->dataType());
  if (dt && *dt != DType::Int64)
    y = ctx.emit("Cast", {y}, {{"to", Attribute::ofInt(dtypeToOnnx(*dt))}});
  return ctx.bind(0, y);
}

Status raiseCumSum(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* c = p.value_as_CumSum();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * axis, ctx.int64Input(1));
  return ctx.bind(0, ctx.emit("CumSum", {x, axis},
                              {{"exclusive", Attribute::ofInt(c->exclusive() ? 1 : 0)},
                               {"reverse", Attribute::ofInt(c->reverse() ? 1 : 0)}}));
}

} // namespace

KILN_MS_RAISING(ReduceFusion, raiseReduceFusion);
KILN_MS_RAISING(ArgMaxFusion, raiseArgMinMaxFusion);
KILN_MS_RAISING(ArgMinFusion, raiseArgMinMaxFusion);
KILN_MS_RAISING(CumSum, raiseCumSum);

} // namespace kiln::ms
