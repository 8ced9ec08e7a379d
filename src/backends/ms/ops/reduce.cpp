// .ms rules of the reduce family (Reduce*, ArgMax, ArgMin, CumSum): ReduceFusion,
// ArgMaxFusion / ArgMinFusion, CumSum.
// Lowering (ONNX → .ms: a pure check and the lower that emits ops) and raising (the reader's
// rules for the .ms ops this family emits, back to ONNX ops) side by side.
#include <array>
#include <fmt/format.h>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

std::string checkReduce(const Node& n, const lowering::OpContext&) {
  for (const char* name : {"keepdims", "noop_with_empty_axes", "axis", "exclusive", "reverse"})
    if (auto v = ops::intAttr(n, name, 0); !v) return v.status().message();
  if (auto v = ops::intsAttr(n, "axes", {}); !v) return v.status().message();
  auto noop = ops::intAttr(n, "noop_with_empty_axes", 0);
  if (*noop != 0 && !n.attribute("axes") && !n.input(1)) return "noop_with_empty_axes=1";
  // Run-time axes lower only as noop_with_empty_axes' identity (known shapes tell it apart).
  if (n.opType().rfind("Reduce", 0) == 0 && *noop == 0) return buildTimeInputReason(n, 1, "axes");
  return {};
}

// CumSum's axis: a rank-1 input has one axis whatever the value says.
std::string checkCumSum(const Node& n, const lowering::OpContext& context) {
  if (std::string reason = checkReduce(n, context); !reason.empty()) return reason;
  if (declaredRank(n.input(0)) == 1) return {};
  return buildTimeInputReason(n, 1, "axis");
}

Status lowerReduce(LoweringContext& ctx, const Node& n) {
  static const std::map<std::string, fb::ReduceMode> modes = {
      {"ReduceMean", fb::ReduceMode_ReduceMean},
      {"ReduceMax", fb::ReduceMode_ReduceMax},
      {"ReduceMin", fb::ReduceMode_ReduceMin},
      {"ReduceProd", fb::ReduceMode_ReduceProd},
      {"ReduceSum", fb::ReduceMode_ReduceSum},
      {"ReduceSumSquare", fb::ReduceMode_ReduceSumSquare},
      {"ReduceL1", fb::ReduceMode_ReduceASum},
      {"ReduceL2", fb::ReduceMode_ReduceL2},
      {"ReduceLogSum", fb::ReduceMode_ReduceSum},
      {"ReduceLogSumExp", fb::ReduceMode_ReduceSum},
  };
  const fb::ReduceMode mode = modes.at(n.opType());
  // ReduceLogSum = Log ∘ ReduceSum, ReduceLogSumExp = Log ∘ ReduceSum ∘ Exp (no .ms mode).
  const bool logOf = n.opType() == "ReduceLogSum" || n.opType() == "ReduceLogSumExp";
  const bool expFirst = n.opType() == "ReduceLogSumExp";
  auto emitReduce = [&](uint32_t x, uint32_t axes, uint32_t y, bool keepDims) {
    Chain ch(ctx, n);
    if (expFirst) x = ch.exp(x);
    const uint32_t out = y;
    if (logOf) y = ch.tmpLike(out);
    // The runtime's float ReduceMax over other than the last axis starts from FLT_MIN, the
    // smallest positive float, instead of the lowest one (mindspore-lite
    // nnacl_c/fp32/reduce_fp32.c, ReduceMaxPreDeal), so all-negative data reduces to 1.2e-38;
    // its ReduceMin starts from FLT_MAX. max(x) is taken as -min(-x), which is exact.
    const bool viaMin = mode == fb::ReduceMode_ReduceMax &&
                        (ch.typeOf(x) == kTypeFloat32 || ch.typeOf(x) == kTypeFloat16);
    const fb::ReduceMode emitted = viaMin ? fb::ReduceMode_ReduceMin : mode;
    if (viaMin) {
      x = ch.unary(fb::PrimitiveType_Neg, x);
      y = ch.tmpLike(out);
    }
    ctx.emit(
        fb::PrimitiveType_ReduceFusion,
        [=](FBB& b) { return fb::CreateReduceFusion(b, keepDims, emitted, false, 0.0f).Union(); },
        {x, axes}, {y});
    if (viaMin) ch.op(fb::PrimitiveType_Neg, {y}, out);
    if (logOf) ch.op(fb::PrimitiveType_Log, {y}, out);
  };
  const int rank = ctx.rankOf(n.input(0));
  if (rank < 0) return dynamicShape("reduction over an unknown rank");
  std::optional<std::vector<int64_t>> axes;
  KILN_ASSIGN_OR_RETURN(const bool keep, ops::intAttr(n, "keepdims", 1));
  if (n.attribute("axes")) {
    KILN_ASSIGN_OR_RETURN(axes, ops::intsAttr(n, "axes", {}));
  } else if (n.input(1) && heldEmpty(n.input(1)) && !*ops::intAttr(n, "noop_with_empty_axes", 0)) {
    axes = std::vector<int64_t>{}; // every axis, whatever feeds the empty list
  } else if (n.input(1)) {
    auto c = ctx.constOf(n.input(1));
    if (!c) {
      // Axes fed at run time: the runtime reads them while building the model, so only
      // noop_with_empty_axes' identity lowers.
      KILN_ASSIGN_OR_RETURN(const int64_t noop, ops::intAttr(n, "noop_with_empty_axes", 0));
      if (noop != 0) {
        // Known shapes tell the two cases apart: a changed shape means the axes were not
        // empty; an unchanged one is the no-op (or a reduction over size-1 axes, which is the
        // identity for these modes).
        auto inShape = ctx.staticShape(n.input(0));
        auto outShape = ctx.staticShape(n.output(0));
        if (!inShape || !outShape) return bad("noop_with_empty_axes=1 with unknown shapes");
        if (*inShape == *outShape) {
          static const std::set<std::string> identity = {"ReduceSum", "ReduceMean", "ReduceMax",
                                                         "ReduceMin", "ReduceProd"};
          if (!identity.count(n.opType()))
            return bad("noop_with_empty_axes=1 with run-time axes and an unchanged shape");
          auto x = ctx.input(n.input(0), Layout::Onnx);
          if (!x) return x.status();
          uint32_t s = ctx.intConst(*outShape, n.output(0)->name() + "_shape");
          auto y = ctx.output(n.output(0), Layout::Onnx);
          if (!y) return y.status();
          ctx.emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {*x, s}, {*y});
          return Status::ok();
        }
      }
      return buildTimeInputRefusal(n, 1, "axes");
    }
    axes = intValues(c->tensor);
  }
  std::vector<int64_t> list;
  if (!axes || axes->empty()) {
    KILN_ASSIGN_OR_RETURN(const int64_t noop, ops::intAttr(n, "noop_with_empty_axes", 0));
    if (noop != 0) return bad("noop_with_empty_axes=1");
    for (int i = 0; i < rank; ++i)
      list.push_back(i);
  } else {
    for (int64_t a : *axes)
      list.push_back(a < 0 ? a + rank : a);
  }
  const bool nhwc = keep && rank == 4 && ctx.availableNhwc(n.input(0));
  if (nhwc)
    for (auto& a : list)
      a = std::find(kToNhwc.begin(), kToNhwc.end(), a) - kToNhwc.begin();
  std::sort(list.begin(), list.end());
  auto x = ctx.input(n.input(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!x) return x.status();
  uint32_t ta = ctx.intConst(list, n.output(0)->name() + "_axes");
  auto y = ctx.output(n.output(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!y) return y.status();
  emitReduce(*x, ta, *y, keep);
  return Status::ok();
}

std::string checkArgMinMax(const Node& n, const lowering::OpContext& context) {
  if (std::string reason = checkReduce(n, context); !reason.empty()) return reason;
  auto last = ops::intAttr(n, "select_last_index", 0);
  if (!last) return last.status().message();
  return {};
}

Status lowerArgMinMax(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", 0));
  if (axis < 0) {
    if (rank < 0) return dynamicShape("negative axis over an unknown rank");
    axis += rank;
  }
  KILN_ASSIGN_OR_RETURN(const bool keep, ops::intAttr(n, "keepdims", 1));
  KILN_ASSIGN_OR_RETURN(const int64_t last, ops::intAttr(n, "select_last_index", 0));
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  std::optional<std::array<uint32_t, 3>> finish; // top − first → out
  if (last != 0) {
    // The last extreme: the first one of the input reversed along the axis, counted from the end
    // (size − 1 − index).
    auto size = ctx.dimOf(n.input(0), static_cast<size_t>(axis));
    if (!size) return bad("select_last_index=1 over an unknown axis size");
    Chain ch(ctx, n);
    const std::vector<int64_t> axes{axis};
    *x = ch.unary(fb::PrimitiveType_ReverseV2, *x, std::nullopt,
                  [=](FBB& b) { return fb::CreateReverseV2(b, b.CreateVector(axes)).Union(); });
    const uint32_t first = ch.tmpLike(*y);
    const uint32_t out = *y;
    *y = first;
    finish = {ch.scalar(double(*size - 1), ch.typeOf(out)), first, out};
  }
  if (n.opType() == "ArgMax")
    ctx.emit(fb::PrimitiveType_ArgMaxFusion,
             [=](FBB& b) { return fb::CreateArgMaxFusion(b, axis, 1, keep, false).Union(); }, {*x},
             {*y});
  else
    ctx.emit(fb::PrimitiveType_ArgMinFusion,
             [=](FBB& b) { return fb::CreateArgMinFusion(b, axis, 1, keep, false).Union(); }, {*x},
             {*y});
  if (finish)
    ctx.emit(fb::PrimitiveType_SubFusion, emptyTable<fb::SubFusion>(), {(*finish)[0], (*finish)[1]},
             {(*finish)[2]});
  return Status::ok();
}

Status lowerCumSum(LoweringContext& ctx, const Node& n) {
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  // The runtime reads the axis while building the model: a constant, or the one axis of a
  // rank-1 input (any other value is invalid in ONNX).
  int64_t axis = 0;
  if (auto c = ctx.constOf(n.input(1))) {
    auto axisValues = intValues(c->tensor);
    if (axisValues.size() != 1) return bad("axis with {} values", axisValues.size());
    axis = axisValues[0];
    if (axis < 0) axis += ctx.rankOf(n.input(0));
  } else if (ctx.rankOf(n.input(0)) != 1) {
    return buildTimeInputRefusal(n, 1, "axis");
  }
  uint32_t ta = ctx.intConst({axis}, n.output(0)->name() + "_axis", std::vector<int32_t>{});
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  KILN_ASSIGN_OR_RETURN(const bool exclusive, ops::intAttr(n, "exclusive", 0));
  KILN_ASSIGN_OR_RETURN(const bool reverse, ops::intAttr(n, "reverse", 0));
  ctx.emit(fb::PrimitiveType_CumSum,
           [=](FBB& b) { return fb::CreateCumSum(b, exclusive, reverse).Union(); }, {*x, ta}, {*y});
  return Status::ok();
}

KILN_MS_LOWERING("ReduceL1", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceL2", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceLogSum", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceLogSumExp", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceMax", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceMean", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceMin", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceProd", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceSum", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceSumSquare", checkReduce, lowerReduce);
KILN_MS_LOWERING("ArgMax", checkArgMinMax, lowerArgMinMax);
KILN_MS_LOWERING("ArgMin", checkArgMinMax, lowerArgMinMax);
KILN_MS_LOWERING("CumSum", checkCumSum, lowerCumSum);
// ---- end of lowering

} // namespace
} // namespace kiln::ms

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

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
  // Constant axes naming every axis of the input's rank reduce it whole: raised without axes, so
  // passes see a whole-tensor reduction (the .ms writer's DynamicQuantizeLinear range, which
  // fuse-dynamic-quant rebuilds) without knowing the rank.
  if (!axes.empty() && !dynamicAxes) {
    const auto rank = static_cast<int64_t>(ctx.dims(ctx.inIndex(0)).size());
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    size_t covered = 0;
    for (int64_t a : axes) {
      const int64_t axis = a < 0 ? a + rank : a;
      if (axis < 0 || axis >= rank || seen[static_cast<size_t>(axis)]) break;
      seen[static_cast<size_t>(axis)] = true;
      ++covered;
    }
    if (rank > 0 && covered == axes.size() && covered == static_cast<size_t>(rank)) axes.clear();
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

// ReverseV2 (emitted for select_last_index) → Slice stepping −1 from the end over each axis.
Status raiseReverseV2(RaisingContext& ctx, const msfb::Primitive& p) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  auto* axisList = p.value_as_ReverseV2()->axis();
  if (!axisList || axisList->size() == 0) return ctx.nodeUnsupported("ReverseV2 without axes");
  std::vector<int64_t> axes(axisList->begin(), axisList->end());
  const std::vector<int64_t> starts(axes.size(), -1), steps(axes.size(), -1);
  const std::vector<int64_t> ends(axes.size(), std::numeric_limits<int64_t>::min());
  return ctx.bind(
      0, ctx.emit("Slice", {x, ctx.ints(starts), ctx.ints(ends), ctx.ints(axes), ctx.ints(steps)}));
}

} // namespace

KILN_MS_RAISING(ReverseV2, raiseReverseV2);
KILN_MS_RAISING(ReduceFusion, raiseReduceFusion);
KILN_MS_RAISING(ArgMaxFusion, raiseArgMinMaxFusion);
KILN_MS_RAISING(ArgMinFusion, raiseArgMinMaxFusion);
KILN_MS_RAISING(CumSum, raiseCumSum);

} // namespace kiln::ms
