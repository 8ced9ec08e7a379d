// .ms raising rules (reader, .ms → IR): Resize → NCHW ONNX Resize.
#include <string>
#include <vector>

#include "backends/ms/ms_raise_context.h"

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
