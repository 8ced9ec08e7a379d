// .ms rules of the norm family (BatchNormalization, InstanceNormalization,
// LayerNormalization, LpNormalization, LRN, Dropout).
// Lowering (ONNX → .ms: a pure check and the lower that emits ops) and raising (the reader's
// rules for the .ms ops this family emits, back to ONNX ops) side by side.
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "ops/attributes.h"
#include "ops/norm.h"

namespace kiln::ms {

Status lowerBatchNormTraining(LoweringContext& ctx, const Node& n);       // norm_training.cpp
Status lowerBatchNormComputedParams(LoweringContext& ctx, const Node& n); // norm_training.cpp

namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

// The attributes this family reads, kind-checked: a wrong kind is a refusal, never a throw.
std::string attributeReason(const Node& n) {
  for (const char* name : {"training_mode", "axis", "p", "size", "seed"})
    if (auto v = ops::intAttr(n, name, 0); !v) return v.status().message();
  for (const char* name : {"epsilon", "momentum", "alpha", "beta", "bias", "ratio"})
    if (auto v = ops::floatAttr(n, name, 0); !v) return v.status().message();
  return {};
}

std::string checkBatchNorm(const Node& n, const lowering::OpContext&) {
  if (std::string reason = attributeReason(n); !reason.empty()) return reason;
  if (*ops::intAttr(n, "training_mode", 0) != 0) return {}; // batch statistics: norm_training.cpp
  if (const int rank = declaredRank(n.input(0)); rank >= 0 && (rank < 2 || rank > 5))
    return fmt::format("{}-D input (.ms FusedBatchNorm: 4-D or 2-D; 3-D and 5-D are reshaped)",
                       rank);
  for (size_t i = 1; i < n.outputs().size(); ++i)
    if (outputUsed(n, i)) return "training outputs (running mean/var)";
  return {};
}

// 3-D [N, C, L] and 5-D [N, C, D, H, W] inputs run as 4-D: viewed as [N, C, L, 1] or
// [N, C, D·H, W], normalized in NHWC and viewed back.
Status lowerBatchNormReshaped(LoweringContext& ctx, const Node& n, float eps, float momentum) {
  auto shape = ctx.staticShape(n.input(0));
  if (!shape) return bad("{}-D input of unknown shape", ctx.rankOf(n.input(0)));
  const auto& d = *shape;
  const std::vector<int64_t> view = d.size() == 3 ? std::vector<int64_t>{d[0], d[1], d[2], 1}
                                                  : std::vector<int64_t>{d[0], d[1], d[2] * d[3], d[4]};
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  const std::string base = n.output(0)->name();
  uint32_t x4 = ctx.reshapeTensor(*x, view, base + "_4d");
  uint32_t xn = ctx.transposeTensor(x4, true, base + "_4d_nhwc");
  std::vector<uint32_t> ins{xn};
  for (size_t i = 1; i < 5; ++i) {
    auto id = ctx.input(n.input(i), Layout::Onnx);
    if (!id) return id.status();
    ins.push_back(*id);
  }
  uint32_t yn = ctx.intermediate(xn, base + "_bn_nhwc");
  ctx.emit(fb::PrimitiveType_FusedBatchNorm,
           [=](FBB& b) { return fb::CreateFusedBatchNorm(b, eps, momentum, 0).Union(); }, ins,
           {yn});
  uint32_t y4 = ctx.transposeTensor(yn, false, base + "_bn_4d");
  uint32_t s = ctx.intConst(d, base + "_shape");
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {y4, s}, {*y});
  return Status::ok();
}

Status lowerBatchNorm(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const int64_t training, ops::intAttr(n, "training_mode", 0));
  if (training != 0) return lowerBatchNormTraining(ctx, n);
  // FusedBatchNorm reads scale/bias/mean/var as weights when the model is built.
  for (size_t i = 1; i < 5; ++i)
    if (!ctx.constOf(n.input(i))) return lowerBatchNormComputedParams(ctx, n);
  const int rank = ctx.rankOf(n.input(0));
  KILN_ASSIGN_OR_RETURN(const float eps, ops::floatAttr(n, "epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(const float momentum, ops::floatAttr(n, "momentum", 0.9f));
  if (rank == 3 || rank == 5) return lowerBatchNormReshaped(ctx, n, eps, momentum);
  if (rank != 4 && rank != 2) return bad("{}-D input (.ms FusedBatchNorm: 4-D or 2-D)", rank);
  const Layout layout = rank == 4 ? Layout::Nhwc : Layout::Onnx;
  std::vector<uint32_t> ins;
  auto x = ctx.input(n.input(0), layout);
  if (!x) return x.status();
  ins.push_back(*x);
  for (size_t i = 1; i < 5; ++i) {
    auto id = ctx.input(n.input(i), Layout::Onnx);
    if (!id) return id.status();
    ins.push_back(*id);
  }
  auto y = ctx.output(n.output(0), layout);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_FusedBatchNorm,
           [=](FBB& b) { return fb::CreateFusedBatchNorm(b, eps, momentum, 0).Union(); }, ins,
           {*y});
  return Status::ok();
}

std::string checkNorm(const Node& n, const lowering::OpContext&) { return attributeReason(n); }

std::string checkInstanceNorm(const Node& n, const lowering::OpContext& context) {
  if (std::string reason = checkNorm(n, context); !reason.empty()) return reason;
  if (const int rank = declaredRank(n.input(0)); rank >= 0 && rank != 4)
    return fmt::format("{}-D input (.ms InstanceNorm is 4-D)", rank);
  return {};
}

Status lowerInstanceNorm(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  if (rank != 4) return bad("{}-D input (.ms InstanceNorm is 4-D)", rank);
  KILN_ASSIGN_OR_RETURN(const float eps, ops::floatAttr(n, "epsilon", 1e-5f));
  auto x = ctx.input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  auto g = ctx.input(n.input(1), Layout::Onnx);
  if (!g) return g.status();
  auto be = ctx.input(n.input(2), Layout::Onnx);
  if (!be) return be.status();
  auto y = ctx.output(n.output(0), Layout::Nhwc);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_InstanceNorm,
           [=](FBB& b) { return fb::CreateInstanceNorm(b, eps).Union(); }, {*x, *g, *be}, {*y});
  return Status::ok();
}

std::string checkLayerNorm(const Node& n, const lowering::OpContext&) {
  if (std::string reason = attributeReason(n); !reason.empty()) return reason;
  for (size_t i = 1; i < n.outputs().size(); ++i)
    if (outputUsed(n, i)) return "the Mean/InvStdDev outputs";
  return {};
}

Status lowerLayerNorm(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  if (rank < 0) return dynamicShape("unknown rank");
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", -1));
  if (axis < 0) axis += rank;
  KILN_ASSIGN_OR_RETURN(const float eps, ops::floatAttr(n, "epsilon", 1e-5f));
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto g = ctx.input(n.input(1), Layout::Onnx);
  if (!g) return g.status();
  uint32_t beta;
  if (n.input(2)) {
    auto id = ctx.input(n.input(2), Layout::Onnx);
    if (!id) return id.status();
    beta = *id;
  } else {
    auto gs = ctx.staticShape(n.input(1));
    if (!gs) return bad("no bias and an unknown scale shape");
    uint64_t count = 1;
    std::vector<int32_t> dims;
    for (int64_t d : *gs) {
      count *= static_cast<uint64_t>(d);
      dims.push_back(static_cast<int32_t>(d));
    }
    beta = ctx.floatConst(std::vector<float>(count, 0.0f), n.output(0)->name() + "_bias", dims);
  }
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_LayerNormFusion,
           [=](FBB& b) { return fb::CreateLayerNormFusion(b, axis, eps, true, axis).Union(); },
           {*x, *g, beta}, {*y});
  return Status::ok();
}

Status lowerLpNorm(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", -1));
  if (axis < 0) {
    if (rank < 0) return dynamicShape("negative axis over an unknown rank");
    axis += rank;
  }
  KILN_ASSIGN_OR_RETURN(const int64_t p, ops::intAttr(n, "p", 2));
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_LpNormalization,
           [=](FBB& b) { return fb::CreateLpNormalization(b, axis, p).Union(); }, {*x}, {*y});
  return Status::ok();
}

std::string checkLrn(const Node& n, const lowering::OpContext&) {
  if (std::string reason = attributeReason(n); !reason.empty()) return reason;
  if (const int64_t size = *ops::intAttr(n, "size", 1); size % 2 == 0)
    return fmt::format("even size {}", size);
  if (const int rank = declaredRank(n.input(0)); rank >= 0 && rank != 4)
    return fmt::format("{}-D input (.ms LRN is 4-D)", rank);
  return {};
}

Status lowerLrn(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  // LRN: ONNX scales the square sum by alpha/size; .ms (TF style) by alpha per element.
  if (rank != 4) return bad("{}-D input (.ms LRN is 4-D)", rank);
  KILN_ASSIGN_OR_RETURN(const int64_t size, ops::intAttr(n, "size", 1));
  KILN_ASSIGN_OR_RETURN(const float alphaAttr, ops::floatAttr(n, "alpha", 1e-4f));
  const float alpha = alphaAttr / static_cast<float>(size);
  KILN_ASSIGN_OR_RETURN(const float beta, ops::floatAttr(n, "beta", 0.75f));
  KILN_ASSIGN_OR_RETURN(const float bias, ops::floatAttr(n, "bias", 1.0f));
  auto x = ctx.input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), Layout::Nhwc);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_LRN,
           [=](FBB& b) {
             return fb::CreateLRN(b, (size - 1) / 2, bias, alpha, beta,
                                  b.CreateString("ACROSS_CHANNELS"))
                 .Union();
           },
           {*x}, {*y});
  return Status::ok();
}

std::string checkDropout(const Node& n, const lowering::OpContext&) {
  return attributeReason(n);
}

// Elements a training-mode Dropout may draw for: its draws are a constant of this many floats.
constexpr uint64_t kMaxDropoutDraws = uint64_t(1) << 20;

// Training-mode Dropout (training_mode not a constant false, ratio not a constant 0): the
// executor draws its keep mask from a seeded generator (ops::dropoutDraws: the same draws on
// every run), so the draws are a constant and the mask is keep = draws >= ratio; then
// y = Where(keep, x · 1/(1 − ratio), 0). A constant ratio makes keep itself a constant; a run-time
// one is compared at run time against the draws rounded down to float32 (exact for a float32 or
// float16 ratio: u >= r ⇔ ⌊u⌋ >= r). A run-time training_mode t selects:
// y = Where(t, dropped, x), mask = keep | !t. A ratio of 0 keeps every element (scale 1).
Status lowerTrainingDropout(LoweringContext& ctx, const Node& n, std::optional<double> ratio,
                            std::optional<double> training) {
  auto shape = ctx.staticShape(n.input(0));
  if (!shape)
    return dynamicShape("training-mode Dropout over a dynamic shape (its draws are a constant)");
  uint64_t count = 1;
  for (int64_t d : *shape)
    count *= uint64_t(d);
  if (count > kMaxDropoutDraws)
    return bad("training-mode Dropout over {} elements (its draws are a constant, at most {})",
               count, kMaxDropoutDraws);
  if (ratio && (*ratio < 0 || *ratio >= 1)) return bad("ratio {} outside [0, 1)", *ratio);
  KILN_ASSIGN_OR_RETURN(const int64_t seed, ops::intAttr(n, "seed", 0));
  const std::vector<double> draws = ops::dropoutDraws(seed, count);
  // The .ms has no random op kiln can match, so the mask's draws are fixed: say so once per node.
  std::fprintf(stderr,
               "kiln: note: Dropout '%s' may run in training mode: its random draws are made once "
               "at conversion (seed %lld) and stored in the .ms, so every training-mode run drops "
               "the same elements\n",
               n.name().c_str(), static_cast<long long>(seed));
  Chain ch(ctx, n);
  auto xin = ctx.input(n.input(0), Layout::Onnx);
  if (!xin) return xin.status();
  const uint32_t x = *xin;
  const int type = ch.typeOf(x);
  if (type != kTypeFloat32 && type != kTypeFloat16 && type != kTypeFloat64)
    return bad("training-mode Dropout over {} data", dtypeName(n.input(0)->dtype()));
  const std::vector<int32_t> dims(shape->begin(), shape->end());
  uint32_t keep, scale;
  if (ratio) {
    std::vector<double> kept(count);
    for (uint64_t i = 0; i < count; ++i)
      kept[i] = draws[i] >= *ratio ? 1 : 0;
    keep = ch.constant(kept, kTypeBool, dims);
    scale = ch.scalar(double(static_cast<float>(1.0 / (1.0 - *ratio))), type);
  } else {
    std::vector<double> lowered(count);
    for (uint64_t i = 0; i < count; ++i) {
      float f = static_cast<float>(draws[i]);
      if (double(f) > draws[i]) f = std::nextafter(f, -1.0f);
      lowered[i] = f;
    }
    auto rin = ctx.input(n.input(1), Layout::Onnx);
    if (!rin) return rin.status();
    const uint32_t r = ch.cast(*rin, kTypeFloat32);
    keep = ch.binary(fb::PrimitiveType_GreaterEqual, ch.constant(lowered, kTypeFloat32, dims), r,
                     kTypeBool);
    uint32_t rest = ch.binary(fb::PrimitiveType_SubFusion, ch.scalar(1, kTypeFloat32), r);
    scale = ch.cast(ch.unary(fb::PrimitiveType_Reciprocal, rest), type);
  }
  std::optional<uint32_t> t;
  if (!training) {
    auto tin = ctx.input(n.input(2), Layout::Onnx);
    if (!tin) return tin.status();
    t = *tin;
  }
  const uint32_t scaled = ch.binary(fb::PrimitiveType_MulFusion, x, scale);
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  const uint32_t dropped = t ? ch.tmp(type, dims) : *y;
  ch.op(fb::PrimitiveType_Where, {keep, scaled, ch.scalar(0, type)}, dropped);
  if (t) ch.op(fb::PrimitiveType_Where, {*t, dropped, x}, *y);
  if (outputUsed(n, 1)) {
    auto m = ctx.output(n.output(1), Layout::Onnx);
    if (!m) return m.status();
    if (t)
      ch.op(fb::PrimitiveType_LogicalOr, {keep, ch.unary(fb::PrimitiveType_LogicalNot, *t)}, *m);
    else
      ch.op(fb::PrimitiveType_Reshape, {keep, ctx.intConst(*shape, n.output(1)->name() + "_shape")},
            *m);
  }
  return Status::ok();
}

// Dropout at inference is the identity; in training mode, lowerTrainingDropout.
Status lowerDropout(LoweringContext& ctx, const Node& n) {
  if (n.input(2)) {
    auto c = ctx.constOf(n.input(2));
    std::optional<double> on;
    if (c && c->tensor.elementCount() == 1) on = rt::elementAsDouble(c->tensor, 0); // bool
    std::optional<double> ratio = 0.5; // opset 12's default when the input is omitted
    if (n.input(1)) {
      auto r = ctx.constOf(n.input(1));
      ratio = r ? scalarValue(r->tensor) : std::nullopt;
    }
    // Training mode drops elements unless the ratio is 0.
    if ((!on || *on != 0) && (!ratio || *ratio != 0))
      return lowerTrainingDropout(ctx, n, ratio, on);
  }
  ctx.setAlias(n.output(0), n.input(0));
  if (outputUsed(n, 1)) {
    // Nothing dropped: the mask is all true (a ConstantOfShape of the known shape).
    auto shape = ctx.staticShape(n.input(0));
    if (!shape) return bad("the mask output of Dropout over an unknown shape");
    uint32_t s = ctx.intConst(*shape, n.output(1)->name() + "_shape");
    auto m = ctx.output(n.output(1), Layout::Onnx);
    if (!m) return m.status();
    ctx.emit(
        fb::PrimitiveType_ConstantOfShape,
        [](FBB& b) {
          return fb::CreateConstantOfShape(b, kTypeBool, b.CreateVector(std::vector<float>{1.0f}))
              .Union();
        },
        {s}, {*m});
  }
  return Status::ok();
}

KILN_MS_LOWERING("BatchNormalization", checkBatchNorm, lowerBatchNorm);
KILN_MS_LOWERING("InstanceNormalization", checkInstanceNorm, lowerInstanceNorm);
KILN_MS_LOWERING("LayerNormalization", checkLayerNorm, lowerLayerNorm);
KILN_MS_LOWERING("LpNormalization", checkNorm, lowerLpNorm);
KILN_MS_LOWERING("LRN", checkLrn, lowerLrn);
KILN_MS_LOWERING("Dropout", checkDropout, lowerDropout);
// ---- end of lowering

} // namespace
} // namespace kiln::ms

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

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
