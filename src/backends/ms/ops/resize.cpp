// .ms lowering rules of the resize family (Resize, Upsample): Resize over NHWC data with the
// output size as a tensor.
#include <cmath>

#include "../ms_context.h"
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
