// .ms raising rules (reader, .ms → IR): TopKFusion.
#include <string>
#include <vector>

#include "backends/ms/ms_raise_context.h"

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
