// .ms raising rules (reader, .ms → IR): Activation, LeakyRelu, Elu, Softmax, PReLU, Clip, GLU.
#include <string>
#include <vector>

#include "backends/ms/ms_raise_context.h"

namespace kiln::ms {

namespace {

Status raiseActivation(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* a = p.value_as_Activation();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * y, ctx.activation(x, a->activation_type(), a->alpha(), a->min_val(),
                                                  a->max_val(), a->approximate()));
  return ctx.bind(0, y);
}

Status raiseLeakyRelu(RaisingContext& ctx, const msfb::Primitive& p) {
  return ctx.unary("LeakyRelu",
                   {{"alpha", Attribute::ofFloat(p.value_as_LeakyRelu()->negative_slope())}});
}

Status raiseElu(RaisingContext& ctx, const msfb::Primitive& p) {
  return ctx.unary("Elu", {{"alpha", Attribute::ofFloat(p.value_as_Elu()->alpha())}});
}

Status raiseSoftmax(RaisingContext& ctx, const msfb::Primitive& p) {
  auto axis = ctx.longs(p.value_as_Softmax()->axis());
  if (axis.size() != 1) return ctx.nodeUnsupported("Softmax needs exactly one axis");
  return ctx.unary("Softmax", ctx.axisAttr(axis[0]));
}

Status raiseLogSoftmax(RaisingContext& ctx, const msfb::Primitive& p) {
  return ctx.unary("LogSoftmax", ctx.axisAttr(p.value_as_LogSoftmax()->axis()));
}

Status raisePReLUFusion(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * slope, ctx.in(1));
  return ctx.bind(0, ctx.emit("PRelu", {x, slope}));
}

Status raiseClip(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* c = p.value_as_Clip();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Value* lo = ctx.inputCount() > 1 ? nullptr : ctx.scalar(c->min(), ctx.floatType());
  Value* hi = ctx.inputCount() > 2 ? nullptr : ctx.scalar(c->max(), ctx.floatType());
  if (!lo) {
    KILN_ASSIGN_OR_RETURN(lo, ctx.in(1));
  }
  if (!hi) {
    KILN_ASSIGN_OR_RETURN(hi, ctx.in(2));
  }
  return ctx.bind(0, ctx.emit("Clip", {x, lo, hi}));
}

Status raiseGLU(RaisingContext& ctx, const msfb::Primitive& p) {
  int64_t axis = p.value_as_GLU()->axis();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Node* halves = ctx.emitNode(
      "Split", {x}, 2, {{"axis", Attribute::ofInt(axis)}, {"num_outputs", Attribute::ofInt(2)}});
  return ctx.bind(0,
                  ctx.emit("Mul", {halves->output(0), ctx.emit("Sigmoid", {halves->output(1)})}));
}

} // namespace

KILN_MS_RAISING(Activation, raiseActivation);
KILN_MS_RAISING(LeakyRelu, raiseLeakyRelu);
KILN_MS_RAISING(Elu, raiseElu);
KILN_MS_RAISING(Softmax, raiseSoftmax);
KILN_MS_RAISING(LogSoftmax, raiseLogSoftmax);
KILN_MS_RAISING(PReLUFusion, raisePReLUFusion);
KILN_MS_RAISING(Clip, raiseClip);
KILN_MS_RAISING(GLU, raiseGLU);

} // namespace kiln::ms
