// .ms raising rules (reader, .ms → IR): batch/instance/layer norm, LRN, Lp/L2 normalization.
#include <string>
#include <vector>

#include "backends/ms/ms_raise_context.h"

namespace kiln::ms {

namespace {

Status raiseBatchNorm(RaisingContext& ctx, const msfb::Primitive& p) {
  bool fused = p.value_type() == msfb::PrimitiveType_FusedBatchNorm;
  float eps = fused ? p.value_as_FusedBatchNorm()->epsilon() : p.value_as_BatchNorm()->epsilon();
  if (fused && p.value_as_FusedBatchNorm()->mode() != 0)
    return ctx.nodeUnsupported("training-mode batch norm");
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Value *scale, *bias, *mean, *var;
  if (fused) {
    KILN_ASSIGN_OR_RETURN(scale, ctx.in(1));
    KILN_ASSIGN_OR_RETURN(bias, ctx.in(2));
    KILN_ASSIGN_OR_RETURN(mean, ctx.in(3));
    KILN_ASSIGN_OR_RETURN(var, ctx.in(4));
  } else {
    KILN_ASSIGN_OR_RETURN(mean, ctx.in(1));
    KILN_ASSIGN_OR_RETURN(var, ctx.in(2));
    Value* ones = ctx.emit("Add", {ctx.emit("Mul", {mean, ctx.scalar(0, ctx.floatType())}),
                                   ctx.scalar(1, ctx.floatType())});
    scale = ones;
    bias = ctx.emit("Mul", {mean, ctx.scalar(0, ctx.floatType())});
  }
  auto rank = ctx.dims(ctx.inIndex(0)).size();
  bool nhwc = rank == 4;
  Value* xin = nhwc ? ctx.toNchw(x) : x;
  Value* y = ctx.emit("BatchNormalization", {xin, scale, bias, mean, var},
                      {{"epsilon", Attribute::ofFloat(eps)}});
  return ctx.bind(0, nhwc ? ctx.toNhwc(y) : y);
}

Status raiseInstanceNorm(RaisingContext& ctx, const msfb::Primitive& p) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * gamma, ctx.in(1));
  KILN_ASSIGN_OR_RETURN(Value * beta, ctx.in(2));
  Value* y = ctx.emit("InstanceNormalization", {ctx.toNchw(x), gamma, beta},
                      {{"epsilon", Attribute::ofFloat(p.value_as_InstanceNorm()->epsilon())}});
  return ctx.bind(0, ctx.toNhwc(y));
}

Status raiseLayerNormFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* l = p.value_as_LayerNormFusion();
  if (l->begin_norm_axis() != l->begin_params_axis())
    return ctx.nodeUnsupported("begin_norm_axis differs from begin_params_axis");
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  std::vector<Value*> ins{x};
  if (ctx.inputCount() > 1) {
    KILN_ASSIGN_OR_RETURN(Value * gamma, ctx.in(1));
    ins.push_back(gamma);
  }
  if (ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * beta, ctx.in(2));
    ins.push_back(beta);
  }
  if (ins.size() < 2) return ctx.nodeUnsupported("LayerNormFusion without gamma");
  return ctx.bind(0, ctx.emit("LayerNormalization", ins,
                              {{"axis", Attribute::ofInt(l->begin_norm_axis())},
                               {"epsilon", Attribute::ofFloat(l->epsilon())}}));
}

Status raiseLRN(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* l = p.value_as_LRN();
  if (l->norm_region() && l->norm_region()->size() && l->norm_region()->str() != "ACROSS_CHANNELS")
    return ctx.nodeUnsupported("LRN norm_region " + l->norm_region()->str());
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  int64_t size = 2 * l->depth_radius() + 1;
  // The .ms alpha multiplies the plain window sum; ONNX divides its alpha by the size.
  Value* y = ctx.emit("LRN", {ctx.toNchw(x)},
                      {{"size", Attribute::ofInt(size)},
                       {"alpha", Attribute::ofFloat(l->alpha() * float(size))},
                       {"beta", Attribute::ofFloat(l->beta())},
                       {"bias", Attribute::ofFloat(l->bias())}});
  return ctx.bind(0, ctx.toNhwc(y));
}

Status raiseLpNormalization(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* l = p.value_as_LpNormalization();
  return ctx.unary("LpNormalization",
                   {{"axis", Attribute::ofInt(l->axis())}, {"p", Attribute::ofInt(l->p())}});
}

Status raiseL2NormalizeFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* l = p.value_as_L2NormalizeFusion();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  auto axes = ctx.longs(l->axis());
  std::vector<Value*> ins{ctx.emit("Mul", {x, x})};
  if (!axes.empty()) ins.push_back(ctx.ints(axes));
  Value* sum = ctx.emit("ReduceSum", ins, {{"keepdims", Attribute::ofInt(1)}});
  Value* norm =
      ctx.emit("Sqrt", {ctx.emit("Max", {sum, ctx.scalar(l->epsilon(), ctx.floatType())})});
  Value* y = ctx.emit("Div", {x, norm});
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(y, l->activation_type()));
  return ctx.bind(0, y);
}

} // namespace

KILN_MS_RAISING(FusedBatchNorm, raiseBatchNorm);
KILN_MS_RAISING(BatchNorm, raiseBatchNorm);
KILN_MS_RAISING(InstanceNorm, raiseInstanceNorm);
KILN_MS_RAISING(LayerNormFusion, raiseLayerNormFusion);
KILN_MS_RAISING(LRN, raiseLRN);
KILN_MS_RAISING(LpNormalization, raiseLpNormalization);
KILN_MS_RAISING(L2NormalizeFusion, raiseL2NormalizeFusion);

} // namespace kiln::ms
