// .ms rules of the math_misc family (TopK): TopKFusion (the k smallest through Neg, see lowerTopK).
// Lowering (ONNX → .ms: a pure check and the lower that emits ops) and raising (the reader's
// rules for the .ms ops this family emits, back to ONNX ops) side by side.
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

std::string checkTopK(const Node& n, const lowering::OpContext&) {
  for (const char* name : {"axis", "k", "largest", "sorted"})
    if (auto v = ops::intAttr(n, name, 0); !v) return v.status().message();
  if (!n.attribute("k") && !n.input(1)) return "no k";
  return {};
}

Status lowerTopK(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", -1));
  if (axis < 0) {
    if (rank < 0) return dynamicShape("negative axis over an unknown rank");
    axis += rank;
  }
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  std::optional<int64_t> k;
  if (n.attribute("k")) {
    KILN_ASSIGN_OR_RETURN(k, ops::intAttr(n, "k", 0));
  } else if (auto c = ctx.constOf(n.input(1))) {
    auto v = intValues(c->tensor);
    if (v.size() == 1) k = v[0];
  }
  uint32_t tk;
  if (k) {
    tk = ctx.intConst({*k}, n.output(0)->name() + "_k");
  } else {
    if (!n.input(1)) return bad("no k");
    auto dyn = ctx.int32Input(n.input(1));
    if (!dyn) return dyn.status();
    tk = *dyn;
  }
  KILN_ASSIGN_OR_RETURN(const bool largest, ops::intAttr(n, "largest", 1));
  KILN_ASSIGN_OR_RETURN(const bool sorted, ops::intAttr(n, "sorted", 1));
  std::vector<uint32_t> outs;
  for (const Value* o : n.outputs()) {
    auto y = ctx.output(o, Layout::Onnx);
    if (!y) return y.status();
    outs.push_back(*y);
  }
  // The runtime's TopK always takes the k largest: its kernel sorts with a descending comparator
  // and never reads `largest` (mindspore-lite nnacl_c/fp32/topk_fp32.c, Topk). The k smallest of
  // x are the k largest of −x, in the same order and with the same indices (ties: lower index
  // first either way), so the values are negated back.
  Chain ch(ctx, n);
  const uint32_t data = largest ? *x : ch.unary(fb::PrimitiveType_Neg, *x);
  std::vector<uint32_t> topOuts = outs;
  if (!largest) topOuts[0] = ch.tmpLike(outs[0]);
  ctx.emit(
      fb::PrimitiveType_TopKFusion,
      [=](FBB& b) { return fb::CreateTopKFusion(b, sorted, axis, /*largest=*/1).Union(); },
      {data, tk}, topOuts);
  if (!largest) ch.op(fb::PrimitiveType_Neg, {topOuts[0]}, outs[0]);
  return Status::ok();
}

KILN_MS_LOWERING("TopK", checkTopK, lowerTopK);
// ---- end of lowering

} // namespace
} // namespace kiln::ms

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

namespace kiln::ms {

namespace {

Status raiseTopKFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* t = p.value_as_TopKFusion();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * k, ctx.int64Input(1));
  k = ctx.emit("Reshape", {k, ctx.ints({1})});
  Node* node = ctx.emitNode("TopK", {x, k}, 2,
                            {{"axis", Attribute::ofInt(t->axis())},
                             {"largest", Attribute::ofInt(t->largest() ? 1 : 0)},
                             {"sorted", Attribute::ofInt(t->sorted() ? 1 : 0)}});
  KILN_TRY(ctx.bind(0, node->output(0)));
  if (ctx.outputCount() > 1) {
    Value* idx = node->output(1);
    auto dt = ms::dtypeOfTypeId(ctx.tensor(ctx.outIndex(1))->dataType());
    if (dt && *dt != DType::Int64)
      idx = ctx.emit("Cast", {idx}, {{"to", Attribute::ofInt(dtypeToOnnx(*dt))}});
    KILN_TRY(ctx.bind(1, idx));
  }
  return Status::ok();
}

} // namespace

KILN_MS_RAISING(TopKFusion, raiseTopKFusion);

} // namespace kiln::ms
