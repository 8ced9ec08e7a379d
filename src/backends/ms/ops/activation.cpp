// .ms rules of the activation family (Relu, Sigmoid, Tanh, Clip, HardSigmoid, PRelu,
// Softmax, ...): Activation tables, PReLUFusion, Softmax / LogSoftmax.
// Lowering (ONNX → .ms: a pure check and the lower that emits ops) and raising (the reader's
// rules for the .ms ops this family emits, back to ONNX ops) side by side.
#include <cmath>
#include <string>
#include <vector>

#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

// The attributes this family reads, kind-checked: a wrong kind is a refusal, never a throw.
std::string checkActivation(const Node& n, const lowering::OpContext&) {
  for (const char* name : {"alpha", "beta", "min", "max"})
    if (auto v = ops::floatAttr(n, name, 0); !v) return v.status().message();
  if (auto v = ops::stringAttr(n, "approximate", "none"); !v) return v.status().message();
  return {};
}

// Clip with run-time bounds or on integers: Maximum with the lower bound, Minimum with the upper.
Status lowerClipMinMax(LoweringContext& ctx, const Node& n) {
  const Layout layout = ctx.availableNhwc(n.input(0)) ? Layout::Nhwc : Layout::Onnx;
  auto x = ctx.input(n.input(0), layout);
  if (!x) return x.status();
  std::vector<std::pair<fb::PrimitiveType, uint32_t>> steps;
  for (size_t i = 1; i < 3; ++i) {
    const Value* b = n.input(i);
    if (!b) continue;
    if (ctx.rankOf(b) > 1 || (ctx.rankOf(b) == 1 && ctx.dimOf(b, 0) != 1))
      return bad("Clip bound '{}' is not a scalar", b->name());
    auto id = ctx.input(b, Layout::Onnx);
    if (!id) return id.status();
    steps.push_back({i == 1 ? fb::PrimitiveType_Maximum : fb::PrimitiveType_Minimum, *id});
  }
  if (steps.empty()) {
    ctx.setAlias(n.output(0), n.input(0));
    return Status::ok();
  }
  uint32_t cur = *x;
  for (size_t k = 0; k < steps.size(); ++k) {
    uint32_t y;
    if (k + 1 == steps.size()) {
      auto o = ctx.output(n.output(0), layout);
      if (!o) return o.status();
      y = *o;
    } else {
      MsTensor t = ctx.tensor(cur);
      t.name = n.output(0)->name() + "_lower";
      t.nodeType = kNodeCNode;
      t.data.reset();
      t.quantParams.clear();
      y = ctx.addTensor(std::move(t));
    }
    AttrBuilder attrs = steps[k].first == fb::PrimitiveType_Maximum
                            ? AttrBuilder(emptyTable<fb::Maximum>())
                            : AttrBuilder(emptyTable<fb::Minimum>());
    ctx.emit(steps[k].first, attrs, {cur, steps[k].second}, {y});
    cur = y;
  }
  return Status::ok();
}

Status lowerActivation(LoweringContext& ctx, const Node& n) {
  const std::string& op = n.opType();
  const Value* in = n.input(0);
  if (op == "Clip") {
    bool constant =
        isFloatingPoint(ctx.resolve(in)->dtype()) || ctx.resolve(in)->dtype() == DType::Undefined;
    for (size_t i = 1; i < 3; ++i)
      if (n.input(i) && !ctx.constOf(n.input(i))) constant = false;
    if (!constant) return lowerClipMinMax(ctx, n);
  }
  if (!isFloatingPoint(ctx.resolve(in)->dtype()) && ctx.resolve(in)->dtype() != DType::Undefined)
    return bad("{} on {} data (.ms activations are float)", op,
               dtypeName(ctx.resolve(in)->dtype()));
  const Layout layout = ctx.availableNhwc(in) ? Layout::Nhwc : Layout::Onnx;
  int type = fb::ActivationType_NO_ACTIVATION;
  float alpha = 0, minVal = 0, maxVal = 0;
  bool approximate = false;
  if (op == "Relu")
    type = fb::ActivationType_RELU;
  else if (op == "Sigmoid")
    type = fb::ActivationType_SIGMOID;
  else if (op == "Tanh")
    type = fb::ActivationType_TANH;
  else if (op == "HardSwish")
    type = fb::ActivationType_HSWISH;
  else if (op == "Softplus")
    type = fb::ActivationType_SOFTPLUS;
  else if (op == "LeakyRelu") {
    type = fb::ActivationType_LEAKY_RELU;
    KILN_ASSIGN_OR_RETURN(alpha, ops::floatAttr(n, "alpha", 0.01f));
  } else if (op == "Elu") {
    type = fb::ActivationType_ELU;
    KILN_ASSIGN_OR_RETURN(alpha, ops::floatAttr(n, "alpha", 1.0f));
  } else if (op == "Gelu") {
    type = fb::ActivationType_GELU;
    KILN_ASSIGN_OR_RETURN(const std::string mode, ops::stringAttr(n, "approximate", "none"));
    approximate = mode == "tanh";
  } else if (op == "HardSigmoid") {
    KILN_ASSIGN_OR_RETURN(const float a, ops::floatAttr(n, "alpha", 0.2f));
    KILN_ASSIGN_OR_RETURN(const float b, ops::floatAttr(n, "beta", 0.5f));
    if (std::fabs(a - 1.0f / 6) < 1e-6f && std::fabs(b - 0.5f) < 1e-6f) {
      type = fb::ActivationType_HSIGMOID;
    } else {
      // relu6-style HSIGMOID is fixed at x/6 + 1/2; other slopes: clip(a·x + b, 0, 1) as three ops.
      auto x = ctx.input(in, layout);
      if (!x) return x.status();
      const std::string base = n.output(0)->name();
      auto mid = [&](const std::string& suffix) {
        MsTensor t = ctx.tensor(*x);
        t.name = base + suffix;
        t.nodeType = kNodeCNode;
        t.data.reset();
        t.quantParams.clear();
        return ctx.addTensor(std::move(t));
      };
      uint32_t ta = ctx.floatConst({a}, base + "_alpha", {1});
      uint32_t tb = ctx.floatConst({b}, base + "_beta", {1});
      uint32_t scaled = mid("_scaled");
      ctx.emit(fb::PrimitiveType_MulFusion, emptyTable<fb::MulFusion>(), {*x, ta}, {scaled});
      uint32_t shifted = mid("_shifted");
      ctx.emit(fb::PrimitiveType_AddFusion, emptyTable<fb::AddFusion>(), {scaled, tb}, {shifted});
      auto y = ctx.output(n.output(0), layout);
      if (!y) return y.status();
      ctx.emit(fb::PrimitiveType_Activation,
               [](FBB& b) {
                 return fb::CreateActivation(b, fb::ActivationType_HARD_TANH, 0, 0, 1).Union();
               },
               {shifted}, {*y});
      return Status::ok();
    }
  } else if (op == "Clip") {
    double lo = -std::numeric_limits<double>::infinity(), hi = -lo;
    if (n.attribute("min")) {
      KILN_ASSIGN_OR_RETURN(lo, ops::floatAttr(n, "min", 0));
    }
    if (n.attribute("max")) {
      KILN_ASSIGN_OR_RETURN(hi, ops::floatAttr(n, "max", 0));
    }
    for (size_t i = 1; i < 3; ++i) {
      const Value* v = n.input(i);
      if (!v) continue;
      auto c = ctx.constOf(v);
      if (!c) return bad("non-constant Clip bound '{}'", v->name());
      auto s = scalarValue(c->tensor);
      if (!s) return bad("Clip bound '{}' is not a scalar", v->name());
      (i == 1 ? lo : hi) = *s;
    }
    if (lo == 0 && std::isinf(hi) && hi > 0)
      type = fb::ActivationType_RELU;
    else if (lo == 0 && hi == 6)
      type = fb::ActivationType_RELU6;
    else {
      type = fb::ActivationType_HARD_TANH;
      minVal = std::isinf(lo) ? -std::numeric_limits<float>::max() : static_cast<float>(lo);
      maxVal = std::isinf(hi) ? std::numeric_limits<float>::max() : static_cast<float>(hi);
    }
  }
  auto x = ctx.input(in, layout);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), layout);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_Activation,
           [=](FBB& b) {
             return fb::CreateActivation(b, static_cast<fb::ActivationType>(type), alpha, minVal,
                                         maxVal, approximate)
                 .Union();
           },
           {*x}, {*y});
  return Status::ok();
}

// PRelu with a run-time or broadcasting slope: Maximum(x, 0) + Minimum(x, 0) * slope.
Status lowerPReluMinMax(LoweringContext& ctx, const Node& n) {
  if (ctx.resolve(n.input(0))->dtype() != DType::Float32 &&
      ctx.resolve(n.input(0))->dtype() != DType::Undefined)
    return bad("PRelu on {} data", dtypeName(ctx.resolve(n.input(0))->dtype()));
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  const std::string base = n.output(0)->name();
  Expected<uint32_t> slope = 0u;
  auto slopeConst = ctx.constOf(n.input(1));
  const int rank = ctx.rankOf(n.input(0));
  auto channels = rank >= 2 ? ctx.dimOf(n.input(0), 1) : std::nullopt;
  if (slopeConst && slopeConst->tensor.dims().size() == 1 && channels && rank >= 3 &&
      slopeConst->tensor.dims()[0] == *channels && *channels != 1) {
    // A [C] slope is per channel (axis 1): reshaped to [C, 1, ...] so it broadcasts that way.
    Tensor t = slopeConst->quantized ? dequantize(*slopeConst) : slopeConst->tensor;
    std::vector<int32_t> dims(static_cast<size_t>(rank - 1), 1);
    dims[0] = static_cast<int32_t>(*channels);
    slope = ctx.floatConst(t.copyValues<float>(), slopeConst->name + "_per_channel", dims);
  } else {
    slope = ctx.input(n.input(1), Layout::Onnx);
  }
  if (!slope) return slope.status();
  uint32_t zero = ctx.floatConst({0.0f}, base + "_zero", {});
  auto mid = [&](const std::string& suffix) {
    MsTensor t = ctx.tensor(*x);
    t.name = base + suffix;
    t.nodeType = kNodeCNode;
    t.data.reset();
    t.quantParams.clear();
    return ctx.addTensor(std::move(t));
  };
  uint32_t pos = mid("_pos"), neg = mid("_neg");
  ctx.emit(fb::PrimitiveType_Maximum, emptyTable<fb::Maximum>(), {*x, zero}, {pos});
  ctx.emit(fb::PrimitiveType_Minimum, emptyTable<fb::Minimum>(), {*x, zero}, {neg});
  MsTensor scaled;
  scaled.name = base + "_scaled";
  scaled.dataType = kTypeFloat32;
  uint32_t sc = ctx.addTensor(std::move(scaled));
  ctx.emit(fb::PrimitiveType_MulFusion, emptyTable<fb::MulFusion>(), {neg, *slope}, {sc});
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_AddFusion, emptyTable<fb::AddFusion>(), {pos, sc}, {*y});
  return Status::ok();
}

Status lowerPRelu(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  auto slope = ctx.constOf(n.input(1));
  if (!slope) return lowerPReluMinMax(ctx, n);
  Tensor s = slope->quantized ? dequantize(*slope) : slope->tensor;
  auto c = rank >= 2 ? ctx.dimOf(n.input(0), 1) : std::nullopt;
  const uint64_t count = s.elementCount();
  // Per-channel slopes ([C], [C,1,1]) or one shared slope; anything else broadcasts differently.
  bool perChannel = c && count == static_cast<uint64_t>(*c) &&
                    (s.dims().size() == static_cast<size_t>(rank) - 1 && s.dims()[0] == *c);
  if ((count != 1 && !perChannel) || (count != 1 && rank != 4 && rank != 2))
    return lowerPReluMinMax(ctx, n);
  const Layout layout = rank == 4 ? Layout::Nhwc : Layout::Onnx;
  auto x = ctx.input(n.input(0), layout);
  if (!x) return x.status();
  std::vector<float> v = s.copyValues<float>();
  uint32_t ts = ctx.floatConst(v, slope->name, {static_cast<int32_t>(v.size())});
  auto y = ctx.output(n.output(0), layout);
  if (!y) return y.status();
  const bool shared = count == 1;
  ctx.emit(fb::PrimitiveType_PReLUFusion,
           [=](FBB& b) { return fb::CreatePReLUFusion(b, shared).Union(); }, {*x, ts}, {*y});
  return Status::ok();
}

std::string checkSoftmax(const Node& n, const lowering::OpContext&) {
  auto axis = ops::intAttr(n, "axis", -1);
  return axis ? std::string() : axis.status().message();
}

Status lowerSoftmax(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", ctx.opset() < 13 ? 1 : -1));
  if (axis < 0) {
    if (rank < 0) return dynamicShape("negative axis over an unknown rank");
    axis += rank;
  }
  if (ctx.opset() < 13 && axis != rank - 1) {
    // Before opset 13 the input is flattened to 2-D at `axis`; equal to a last-axis softmax only
    // when every later axis has size 1 ... or when the axis is the last one.
    bool trailingOnes = true;
    for (int i = static_cast<int>(axis) + 1; i < rank; ++i)
      trailingOnes = trailingOnes && ctx.dimOf(n.input(0), static_cast<size_t>(i)) == 1;
    if (!trailingOnes) return bad("axis {} with opset {} (2-D coerced softmax)", axis, ctx.opset());
  }
  const bool nhwc = rank == 4 && ctx.availableNhwc(n.input(0));
  const int64_t msAxis =
      nhwc ? std::find(kToNhwc.begin(), kToNhwc.end(), axis) - kToNhwc.begin() : axis;
  auto x = ctx.input(n.input(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!y) return y.status();
  if (n.opType() == "LogSoftmax")
    ctx.emit(fb::PrimitiveType_LogSoftmax,
             [=](FBB& b) { return fb::CreateLogSoftmax(b, msAxis).Union(); }, {*x}, {*y});
  else
    ctx.emit(fb::PrimitiveType_Softmax,
             [=](FBB& b) {
               return fb::CreateSoftmax(b, b.CreateVector(std::vector<int64_t>{msAxis})).Union();
             },
             {*x}, {*y});
  return Status::ok();
}

KILN_MS_LOWERING("Clip", checkActivation, lowerActivation);
KILN_MS_LOWERING("Elu", checkActivation, lowerActivation);
KILN_MS_LOWERING("Gelu", checkActivation, lowerActivation);
KILN_MS_LOWERING("HardSigmoid", checkActivation, lowerActivation);
KILN_MS_LOWERING("HardSwish", checkActivation, lowerActivation);
KILN_MS_LOWERING("LeakyRelu", checkActivation, lowerActivation);
KILN_MS_LOWERING("Relu", checkActivation, lowerActivation);
KILN_MS_LOWERING("Sigmoid", checkActivation, lowerActivation);
KILN_MS_LOWERING("Softplus", checkActivation, lowerActivation);
KILN_MS_LOWERING("Tanh", checkActivation, lowerActivation);
KILN_MS_LOWERING("PRelu", acceptAll, lowerPRelu);
KILN_MS_LOWERING("LogSoftmax", checkSoftmax, lowerSoftmax);
KILN_MS_LOWERING("Softmax", checkSoftmax, lowerSoftmax);
// ---- end of lowering

} // namespace
} // namespace kiln::ms

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

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
