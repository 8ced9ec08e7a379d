// .ms rules of the detection family (NonMaxSuppression). Lowering (ONNX → .ms: a pure check and
// the lower that emits ops) and raising (the reader's rule for the .ms op) side by side.
#include <fmt/format.h>
#include <limits>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

// .ms NonMaxSuppression(boxes, scores, max_output (i32), iou_threshold, score_threshold) → i32
// [selected, 3]. The runtime counts max_output over everything it selected, not per batch and
// class as ONNX does, so several batches or classes run one NonMaxSuppression each (on sliced
// boxes and scores, their batch and class added back to the rows) and are concatenated in ONNX's
// order. It keeps scores above the threshold with 0 when none is given, so an omitted
// score_threshold becomes −inf.
std::string checkNms(const Node& n, const lowering::OpContext&) {
  auto box = ops::intAttr(n, "center_point_box", 0);
  if (!box) return box.status().message();
  if (*box != 0 && *box != 1) return fmt::format("center_point_box {}", *box);
  const Value* scores = n.inputs().size() > 1 ? n.input(1) : nullptr;
  if (!scores) return "an omitted scores input";
  const Shape& s = scores->shape();
  if (!s.hasRank() || s.rank() != 3 || !s[0].isStatic() || !s[1].isStatic())
    return "scores with unknown batch and class counts (.ms caps max_output over all of them)";
  if (s[0].value() * s[1].value() > 64)
    return fmt::format("{} batches × {} classes (one .ms NonMaxSuppression each; at most 64)",
                       s[0].value(), s[1].value());
  return {};
}

Status lowerNms(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const int64_t centerBox, ops::intAttr(n, "center_point_box", 0));
  Chain ch(ctx, n);
  std::vector<uint32_t> ins;
  for (size_t i = 0; i < 2; ++i) {
    auto id = ctx.input(n.input(i), Layout::Onnx);
    if (!id) return id.status();
    if (ch.typeOf(*id) != kTypeFloat32) return bad("boxes and scores must be float32");
    ins.push_back(*id);
  }
  auto optional = [&](size_t i) -> const Value* {
    return n.inputs().size() > i ? n.input(i) : nullptr;
  };
  if (const Value* v = optional(2)) {
    auto id = ctx.int32Input(v);
    if (!id) return id.status();
    ins.push_back(*id);
  } else {
    ins.push_back(ch.scalar(0, kTypeInt32));
  }
  for (size_t i : {size_t(3), size_t(4)}) {
    if (const Value* v = optional(i)) {
      auto id = ctx.input(v, Layout::Onnx);
      if (!id) return id.status();
      if (ch.typeOf(*id) != kTypeFloat32) return bad("thresholds must be float32");
      ins.push_back(*id);
    } else {
      ins.push_back(ch.scalar(i == 3 ? 0.0 : -std::numeric_limits<double>::infinity(),
                              kTypeFloat32));
    }
  }
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  const uint32_t sel = ch.typeOf(*y) == kTypeInt32 ? *y : ch.tmp(kTypeInt32, {-1, 3});
  auto attrs = [=](FBB& b) { return fb::CreateNonMaxSuppression(b, centerBox).Union(); };
  auto boxDims = ctx.staticShape(n.input(0));
  auto scoreDims = ctx.staticShape(n.input(1));
  if (!boxDims || !scoreDims || boxDims->size() != 3 || scoreDims->size() != 3)
    return bad("boxes and scores of unknown shape");
  const int64_t batches = (*scoreDims)[0], classes = (*scoreDims)[1], count = (*scoreDims)[2];
  if (batches * classes == 1) {
    ch.op(fb::PrimitiveType_NonMaxSuppression, ins, sel, attrs);
  } else {
    const std::string base = n.output(0)->name();
    auto slice = [&](uint32_t x, std::vector<int64_t> begin, std::vector<int64_t> end,
                     std::vector<int32_t> dims) {
      uint32_t tb = ctx.intConst(begin, base + "_nms_begin");
      uint32_t te = ctx.intConst(end, base + "_nms_end");
      uint32_t ts = ctx.intConst({1, 1, 1}, base + "_nms_steps");
      return ch.op(fb::PrimitiveType_StridedSlice, {x, tb, te, ts}, ch.tmp(kTypeFloat32, dims),
                   [](FBB& b) { return fb::CreateStridedSlice(b, 0, 0, 0, 0, 0).Union(); });
    };
    std::vector<uint32_t> parts;
    for (int64_t bi = 0; bi < batches; ++bi) {
      uint32_t boxes = slice(ins[0], {bi, 0, 0}, {bi + 1, count, 4}, {1, int32_t(count), 4});
      for (int64_t ci = 0; ci < classes; ++ci) {
        uint32_t scores =
            slice(ins[1], {bi, ci, 0}, {bi + 1, ci + 1, count}, {1, 1, int32_t(count)});
        std::vector<uint32_t> one = ins;
        one[0] = boxes, one[1] = scores;
        uint32_t part = ch.op(fb::PrimitiveType_NonMaxSuppression, one, ch.tmp(kTypeInt32, {-1, 3}),
                              attrs);
        uint32_t where = ch.constant({double(bi), double(ci), 0}, kTypeInt32, {1, 3});
        parts.push_back(ch.binary(fb::PrimitiveType_AddFusion, part, where));
      }
    }
    ch.op(fb::PrimitiveType_Concat, parts, sel,
          [](FBB& b) { return fb::CreateConcat(b, 0).Union(); });
  }
  if (sel != *y) {
    uint32_t to = ctx.intConst({ch.typeOf(*y)}, n.output(0)->name() + "_to",
                               std::vector<int32_t>{});
    ch.op(fb::PrimitiveType_Cast, {sel, to}, *y);
  }
  return Status::ok();
}

KILN_MS_LOWERING("NonMaxSuppression", checkNms, lowerNms);
// ---- end of lowering

// ---- Raising (.ms → IR).

Status raiseNonMaxSuppression(RaisingContext& ctx, const msfb::Primitive& p) {
  if (ctx.inputCount() < 2) return ctx.nodeUnsupported("needs boxes and scores");
  std::vector<Value*> ins;
  KILN_ASSIGN_OR_RETURN(Value * boxes, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * scores, ctx.in(1));
  ins = {boxes, scores};
  if (ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * m, ctx.int64Input(2));
    ins.push_back(ctx.emit("Reshape", {m, ctx.ints({1})}));
  }
  for (size_t i = 3; i < ctx.inputCount() && i < 5; ++i) {
    KILN_ASSIGN_OR_RETURN(Value * t, ctx.in(i));
    ins.push_back(ctx.emit("Reshape", {t, ctx.ints({1})}));
  }
  Value* y = ctx.emit(
      "NonMaxSuppression", ins,
      {{"center_point_box", Attribute::ofInt(p.value_as_NonMaxSuppression()->center_point_box())}});
  auto dt = ms::dtypeOfTypeId(ctx.tensor(ctx.outIndex(0))->dataType());
  if (dt && *dt != DType::Int64)
    y = ctx.emit("Cast", {y}, {{"to", Attribute::ofInt(dtypeToOnnx(*dt))}});
  return ctx.bind(0, y);
}

} // namespace

KILN_MS_RAISING(NonMaxSuppression, raiseNonMaxSuppression);

} // namespace kiln::ms
