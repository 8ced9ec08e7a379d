// .ms rules of the resize family (Resize, Upsample): Resize over NHWC data with the
// output size as a tensor.
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

// Resize / Upsample attributes as .ms Resize fields, decoded once for check and lower.
struct ResizeAttrs {
  int method = fb::ResizeMethod_NEAREST;
  int transform = fb::CoordinateTransformMode_HALF_PIXEL;
  bool pytorchHalfPixel = false; // half_pixel only for output sizes > 1
  int nearestMode = fb::NearestMode_NORMAL;
  float cubic = -0.75f;
  int64_t exclude = 0;
  float extrapolation = 0;
};

Expected<ResizeAttrs> resizeAttrs(const Node& n, int64_t opset) {
  ResizeAttrs a;
  KILN_ASSIGN_OR_RETURN(const std::string mode, ops::stringAttr(n, "mode", "nearest"));
  if (mode == "nearest")
    a.method = fb::ResizeMethod_NEAREST;
  else if (mode == "linear" || mode == "bilinear")
    a.method = fb::ResizeMethod_LINEAR;
  else if (mode == "cubic")
    a.method = fb::ResizeMethod_CUBIC;
  else
    return bad("mode '{}'", mode);
  const bool isUpsample = n.opType() == "Upsample" || opset < 11;
  std::string coord = "asymmetric";
  if (!isUpsample) {
    KILN_ASSIGN_OR_RETURN(coord,
                          ops::stringAttr(n, "coordinate_transformation_mode", "half_pixel"));
  }
  if (coord == "asymmetric")
    a.transform = fb::CoordinateTransformMode_ASYMMETRIC;
  else if (coord == "align_corners")
    a.transform = fb::CoordinateTransformMode_ALIGN_CORNERS;
  else if (coord == "half_pixel")
    a.transform = fb::CoordinateTransformMode_HALF_PIXEL;
  else if (coord == "pytorch_half_pixel")
    a.pytorchHalfPixel = true; // equal to half_pixel for sizes > 1
  else
    return bad("coordinate_transformation_mode '{}'", coord);
  KILN_ASSIGN_OR_RETURN(const std::string nearest,
                        ops::stringAttr(n, "nearest_mode", "round_prefer_floor"));
  if (a.method == fb::ResizeMethod_NEAREST) {
    if (isUpsample)
      a.nearestMode = fb::NearestMode_FLOOR;
    else if (nearest == "round_prefer_floor")
      a.nearestMode = fb::NearestMode_ROUND_HALF_DOWN;
    else if (nearest == "round_prefer_ceil")
      a.nearestMode = fb::NearestMode_ROUND_HALF_UP;
    else if (nearest == "floor")
      a.nearestMode = fb::NearestMode_FLOOR;
    else if (nearest == "ceil")
      a.nearestMode = fb::NearestMode_CEIL;
    else
      return bad("nearest_mode '{}'", nearest);
  }
  KILN_ASSIGN_OR_RETURN(const int64_t antialias, ops::intAttr(n, "antialias", 0));
  if (antialias != 0) return bad("antialias=1");
  if (n.attribute("axes")) return bad("axes attribute");
  KILN_ASSIGN_OR_RETURN(const std::string policy,
                        ops::stringAttr(n, "keep_aspect_ratio_policy", "stretch"));
  if (policy != "stretch") return bad("keep_aspect_ratio_policy");
  KILN_ASSIGN_OR_RETURN(a.cubic, ops::floatAttr(n, "cubic_coeff_a", -0.75f));
  KILN_ASSIGN_OR_RETURN(a.exclude, ops::intAttr(n, "exclude_outside", 0));
  KILN_ASSIGN_OR_RETURN(a.extrapolation, ops::floatAttr(n, "extrapolation_value", 0));
  return a;
}

std::string checkResize(const Node& n, const lowering::OpContext& context) {
  auto a = resizeAttrs(n, context.opset);
  if (!a) return a.status().message();
  if (const int rank = declaredRank(n.input(0)); rank >= 0 && rank != 4)
    return fmt::format("{}-D input (.ms Resize is 4-D)", rank);
  return {};
}

Status lowerResize(LoweringContext& ctx, const Node& n) {
  if (ctx.rankOf(n.input(0)) != 4)
    return bad("{}-D input (.ms Resize is 4-D)", ctx.rankOf(n.input(0)));
  auto inShape = ctx.staticShape(n.input(0));
  auto outShape = ctx.staticShape(n.output(0));
  if (!outShape || !inShape) return bad("Resize with unknown input/output sizes");
  if ((*outShape)[0] != (*inShape)[0] || (*outShape)[1] != (*inShape)[1])
    return bad("resizing the batch or channel axis");
  KILN_ASSIGN_OR_RETURN(const ResizeAttrs attrs, resizeAttrs(n, ctx.opset()));
  const bool isUpsample = n.opType() == "Upsample" || ctx.opset() < 11;
  const int method = attrs.method, nearestMode = attrs.nearestMode;
  int transform = attrs.transform;
  if (attrs.pytorchHalfPixel) {
    if ((*outShape)[2] <= 1 || (*outShape)[3] <= 1)
      return bad("coordinate_transformation_mode 'pytorch_half_pixel'");
    transform = fb::CoordinateTransformMode_HALF_PIXEL; // equal to half_pixel for sizes > 1
  }
  const float cubic = attrs.cubic, extrapolation = attrs.extrapolation;
  const int64_t exclude = attrs.exclude;
  const int64_t h = (*outShape)[2], w = (*outShape)[3];
  // .ms maps coordinates with in/out sizes; a scale whose product with the input size is not whole
  // maps them differently, so only whole products lower.
  if (const Value* sv = n.input(isUpsample ? 1 : 2)) {
    if (auto c = ctx.constOf(sv);
        c && c->tensor.elementCount() == 4 && c->tensor.dtype() == DType::Float32) {
      auto sc = c->tensor.copyValues<float>();
      for (size_t i = 2; i < 4; ++i) {
        const double scaled = static_cast<double>((*inShape)[i]) * sc[i];
        if (std::fabs(scaled - std::round(scaled)) > 1e-6)
          return bad("scale {} on a size of {} (not a whole output size)", sc[i], (*inShape)[i]);
      }
    } else if (!c && !(ctx.rankOf(sv) == 1 && ctx.dimOf(sv, 0) == 0)) {
      // Scales fed at run time: the static sizes pin the scale only for whole upsampling factors.
      for (size_t i = 2; i < 4; ++i)
        if ((*inShape)[i] == 0 || (*outShape)[i] % (*inShape)[i] != 0)
          return bad("run-time scales with sizes {} -> {} (scale not recoverable)", (*inShape)[i],
                     (*outShape)[i]);
    }
  }
  auto x = ctx.input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  uint32_t size = ctx.intConst({h, w}, n.output(0)->name() + "_size");
  auto y = ctx.output(n.output(0), Layout::Nhwc);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_Resize,
           [=](FBB& b) {
             return fb::CreateResize(b, fb::Format_NHWC, static_cast<fb::ResizeMethod>(method), h,
                                     w, false, static_cast<fb::CoordinateTransformMode>(transform),
                                     cubic, exclude, extrapolation,
                                     static_cast<fb::NearestMode>(nearestMode))
                 .Union();
           },
           {*x, size}, {*y});
  return Status::ok();
}

KILN_MS_LOWERING("Resize", checkResize, lowerResize);
KILN_MS_LOWERING("Upsample", checkResize, lowerResize);
// ---- end of lowering

} // namespace
} // namespace kiln::ms

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

namespace kiln::ms {

namespace {

Status raiseResize(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::Resize* r = p.value_as_Resize();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Value* nchw = ctx.toNchw(x);
  Node::AttributeList attrs;
  switch (r->method()) {
  case msfb::ResizeMethod_LINEAR:
    attrs.push_back({"mode", Attribute::ofString("linear")});
    break;
  case msfb::ResizeMethod_NEAREST:
    attrs.push_back({"mode", Attribute::ofString("nearest")});
    break;
  case msfb::ResizeMethod_CUBIC:
    attrs.push_back({"mode", Attribute::ofString("cubic")});
    attrs.push_back({"cubic_coeff_a", Attribute::ofFloat(r->cubic_coeff())});
    break;
  default:
    return ctx.nodeUnsupported("resize method UNKNOWN");
  }
  switch (r->coordinate_transform_mode()) {
  case msfb::CoordinateTransformMode_ASYMMETRIC:
    attrs.push_back({"coordinate_transformation_mode", Attribute::ofString("asymmetric")});
    break;
  case msfb::CoordinateTransformMode_ALIGN_CORNERS:
    attrs.push_back({"coordinate_transformation_mode", Attribute::ofString("align_corners")});
    break;
  case msfb::CoordinateTransformMode_HALF_PIXEL:
    attrs.push_back({"coordinate_transformation_mode", Attribute::ofString("half_pixel")});
    break;
  default:
    return ctx.nodeUnsupported("coordinate_transform_mode");
  }
  if (r->method() == msfb::ResizeMethod_NEAREST) {
    const char* mode = "round_prefer_floor";
    switch (r->nearest_mode()) {
    case msfb::NearestMode_NORMAL:
    case msfb::NearestMode_ROUND_HALF_DOWN:
      mode = "round_prefer_floor";
      break;
    case msfb::NearestMode_ROUND_HALF_UP:
      mode = "round_prefer_ceil";
      break;
    case msfb::NearestMode_FLOOR:
      mode = "floor";
      break;
    case msfb::NearestMode_CEIL:
      mode = "ceil";
      break;
    default:
      return ctx.nodeUnsupported("nearest_mode");
    }
    attrs.push_back({"nearest_mode", Attribute::ofString(mode)});
  }
  if (r->exclude_outside()) attrs.push_back({"exclude_outside", Attribute::ofInt(1)});
  Value* y;
  auto nc = [&]() { // [N, C] of the NCHW input
    return ctx.emit("Slice", {ctx.emit("Shape", {nchw}), ctx.ints({0}), ctx.ints({2})});
  };
  if (ctx.inputCount() > 1) {
    uint32_t si = ctx.inIndex(1);
    auto dt = ms::dtypeOfTypeId(ctx.tensor(si)->dataType());
    if (!ctx.isConstant(si)) return ctx.nodeUnsupported("the size/scale input must be a constant");
    if (dt && isFloatingPoint(*dt)) {
      KILN_ASSIGN_OR_RETURN(auto s, ctx.constFloats(1));
      if (s.size() != 4) return ctx.nodeUnsupported("float scales need 4 values (NHWC)");
      Value* scales = ctx.constant(
          Tensor::fromValues(DType::Float32, {4}, std::vector<float>{s[0], s[3], s[1], s[2]}));
      y = ctx.emit("Resize", {nchw, nullptr, scales}, std::move(attrs));
    } else {
      KILN_ASSIGN_OR_RETURN(auto s, ctx.constInts(1));
      std::vector<int64_t> hw;
      if (s.size() == 4)
        hw = {s[1], s[2]};
      else if (s.size() == 2)
        hw = s;
      else
        return ctx.nodeUnsupported("integer sizes need 2 ([H, W]) or 4 (NHWC) values");
      Value* sizes = ctx.emit("Concat", {nc(), ctx.ints(hw)}, {{"axis", Attribute::ofInt(0)}});
      y = ctx.emit("Resize", {nchw, nullptr, nullptr, sizes}, std::move(attrs));
    }
  } else {
    Value* sizes = ctx.emit("Concat", {nc(), ctx.ints({r->new_height(), r->new_width()})},
                            {{"axis", Attribute::ofInt(0)}});
    y = ctx.emit("Resize", {nchw, nullptr, nullptr, sizes}, std::move(attrs));
  }
  return ctx.bind(0, ctx.toNhwc(y));
}

} // namespace

KILN_MS_RAISING(Resize, raiseResize);

} // namespace kiln::ms
