// .ms raising rules (reader, .ms → IR): MatMulFusion, FullConnection → Gemm or MatMul.
#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/ms/ms_raise_context.h"

namespace kiln::ms {

namespace {

Status raiseMatMulFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::MatMulFusion* m = p.value_as_MatMulFusion();
  KILN_ASSIGN_OR_RETURN(Value * a, ctx.in(0));
  int channel = -1;
  if (ctx.inputCount() > 1) {
    auto bd = ctx.dims(ctx.inIndex(1));
    if (bd.size() >= 2) channel = int(m->transpose_b() ? bd.size() - 2 : bd.size() - 1);
  }
  KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(1, {std::nullopt, {}, channel}));
  // Plain 2-D products are a Gemm, which reads a stored [N, K] weight in place (transB).
  size_t rankA = ctx.dims(ctx.inIndex(0)).size(),
         rankB = ctx.inputCount() > 1 ? ctx.dims(ctx.inIndex(1)).size() : 0;
  size_t rankBias = ctx.inputCount() > 2 ? ctx.dims(ctx.inIndex(2)).size() : 1;
  if (rankA == 2 && rankB == 2 && rankBias == 1) {
    std::vector<Value*> ins{a, b};
    if (ctx.inputCount() > 2) {
      KILN_ASSIGN_OR_RETURN(Value * bias, ctx.in(2));
      ins.push_back(bias);
    }
    Value* y = ctx.emit("Gemm", ins,
                        {{"transA", Attribute::ofInt(m->transpose_a() ? 1 : 0)},
                         {"transB", Attribute::ofInt(m->transpose_b() ? 1 : 0)}});
    KILN_ASSIGN_OR_RETURN(y, ctx.activation(y, m->activation_type()));
    return ctx.bind(0, y);
  }
  auto swapLast = [&](Value* v, uint32_t index) -> Expected<Value*> {
    auto d = ctx.dims(index);
    if (d.size() < 2) return ctx.nodeUnsupported("transposed operand needs rank >= 2");
    std::vector<int64_t> perm(d.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[d.size() - 1], perm[d.size() - 2]);
    return ctx.transpose(v, perm);
  };
  if (m->transpose_a()) {
    KILN_ASSIGN_OR_RETURN(a, swapLast(a, ctx.inIndex(0)));
  }
  if (m->transpose_b()) {
    KILN_ASSIGN_OR_RETURN(b, swapLast(b, ctx.inIndex(1)));
  }
  Value* y = ctx.emit("MatMul", {a, b});
  if (ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * bias, ctx.in(2));
    y = ctx.emit("Add", {y, bias});
  }
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(y, m->activation_type()));
  return ctx.bind(0, y);
}

Status raiseFullConnection(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::FullConnection* f = p.value_as_FullConnection();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  if (ctx.inputCount() < 2) return ctx.nodeUnsupported("needs input and weight");
  auto wd = ctx.dims(ctx.inIndex(1));
  if (wd.size() != 2) return ctx.nodeUnsupported("weight must be 2-D [N, K]");
  KILN_ASSIGN_OR_RETURN(Value * w, ctx.in(1, {std::nullopt, {}, 0}));
  // Flatten the input to [M, K], multiply by Wᵀ, then restore the leading dims.
  Value* flat = f->use_axis() ? ctx.emit("Flatten", {x}, {{"axis", Attribute::ofInt(f->axis())}})
                              : ctx.emit("Reshape", {x, ctx.ints({-1, wd[1]})});
  std::vector<Value*> ins{flat, w};
  if (f->has_bias() && ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(2));
    ins.push_back(b);
  }
  Value* y = ctx.emit("Gemm", ins, {{"transB", Attribute::ofInt(1)}});
  auto od = ctx.dims(ctx.outIndex(0));
  bool staticOut =
      !od.empty() && std::all_of(od.begin(), od.end(), [](int64_t v) { return v > 0; });
  if (staticOut && od.size() != 2) y = ctx.emit("Reshape", {y, ctx.ints(od)});
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(y, f->activation_type()));
  return ctx.bind(0, y);
}

} // namespace

KILN_MS_RAISING(MatMulFusion, raiseMatMulFusion);
KILN_MS_RAISING(FullConnection, raiseFullConnection);

} // namespace kiln::ms
