// .ms lowering rules of the reduce family (Reduce*, ArgMax, ArgMin, CumSum): ReduceFusion,
// ArgMaxFusion / ArgMinFusion, CumSum.
#include "../ms_context.h"
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
  return {};
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
  };
  const fb::ReduceMode mode = modes.at(n.opType());
  const int rank = ctx.rankOf(n.input(0));
  if (rank < 0) return bad("reduction over an unknown rank");
  std::optional<std::vector<int64_t>> axes;
  KILN_ASSIGN_OR_RETURN(const bool keep, ops::intAttr(n, "keepdims", 1));
  if (n.attribute("axes")) {
    KILN_ASSIGN_OR_RETURN(axes, ops::intsAttr(n, "axes", {}));
  } else if (n.input(1)) {
    auto c = ctx.constOf(n.input(1));
    if (!c) {
      // Axes fed at run time: int32, ONNX layout (an empty list reduces every axis, as in ONNX).
      KILN_ASSIGN_OR_RETURN(const int64_t noop, ops::intAttr(n, "noop_with_empty_axes", 0));
      if (noop != 0) return bad("noop_with_empty_axes=1");
      const bool keepDims = keep;
      auto x = ctx.input(n.input(0), Layout::Onnx);
      if (!x) return x.status();
      auto ta = ctx.int32Input(n.input(1));
      if (!ta) return ta.status();
      auto y = ctx.output(n.output(0), Layout::Onnx);
      if (!y) return y.status();
      ctx.emit(
          fb::PrimitiveType_ReduceFusion,
          [=](FBB& b) { return fb::CreateReduceFusion(b, keepDims, mode, false, 0.0f).Union(); },
          {*x, *ta}, {*y});
      return Status::ok();
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
  ctx.emit(fb::PrimitiveType_ReduceFusion,
           [=](FBB& b) { return fb::CreateReduceFusion(b, keep, mode, false, 0.0f).Union(); },
           {*x, ta}, {*y});
  return Status::ok();
}

std::string checkArgMinMax(const Node& n, const lowering::OpContext& context) {
  if (std::string reason = checkReduce(n, context); !reason.empty()) return reason;
  auto last = ops::intAttr(n, "select_last_index", 0);
  if (!last) return last.status().message();
  if (*last != 0) return "select_last_index=1";
  return {};
}

Status lowerArgMinMax(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", 0));
  if (axis < 0) {
    if (rank < 0) return bad("negative axis over an unknown rank");
    axis += rank;
  }
  KILN_ASSIGN_OR_RETURN(const bool keep, ops::intAttr(n, "keepdims", 1));
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (n.opType() == "ArgMax")
    ctx.emit(fb::PrimitiveType_ArgMaxFusion,
             [=](FBB& b) { return fb::CreateArgMaxFusion(b, axis, 1, keep, false).Union(); }, {*x},
             {*y});
  else
    ctx.emit(fb::PrimitiveType_ArgMinFusion,
             [=](FBB& b) { return fb::CreateArgMinFusion(b, axis, 1, keep, false).Union(); }, {*x},
             {*y});
  return Status::ok();
}

Status lowerCumSum(LoweringContext& ctx, const Node& n) {
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto c = ctx.constOf(n.input(1));
  uint32_t ta;
  if (c) {
    auto axisValues = intValues(c->tensor);
    if (axisValues.size() != 1) return bad("axis with {} values", axisValues.size());
    int64_t axis = axisValues[0];
    if (axis < 0) axis += ctx.rankOf(n.input(0));
    ta = ctx.intConst({axis}, n.output(0)->name() + "_axis", std::vector<int32_t>{});
  } else {
    auto dyn = ctx.int32Input(n.input(1));
    if (!dyn) return dyn.status();
    ta = *dyn;
  }
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
KILN_MS_LOWERING("ReduceMax", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceMean", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceMin", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceProd", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceSum", checkReduce, lowerReduce);
KILN_MS_LOWERING("ReduceSumSquare", checkReduce, lowerReduce);
KILN_MS_LOWERING("ArgMax", checkArgMinMax, lowerArgMinMax);
KILN_MS_LOWERING("ArgMin", checkArgMinMax, lowerArgMinMax);
KILN_MS_LOWERING("CumSum", checkReduce, lowerCumSum);
// ---- end of lowering

} // namespace
} // namespace kiln::ms
