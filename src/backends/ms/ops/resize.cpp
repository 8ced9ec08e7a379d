// .ms rules of the resize family (Resize, Upsample): Resize over NHWC data with the
// output size as a tensor; a nearest Resize of known sizes as two Gathers.
// Lowering (ONNX → .ms: a pure check and the lower that emits ops) and raising (the reader's
// rules for the .ms ops this family emits, back to ONNX ops) side by side.
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "kiln/runtime/executor.h"
#include "ops/attributes.h"
#include "ops/resize.h"

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

// The .ms Resize op over NHWC `x` with the size/scale tensor `size`.
Status emitResize(LoweringContext& ctx, const Node& n, const ResizeAttrs& attrs, int transform,
                  int64_t h, int64_t w, uint32_t x, uint32_t size) {
  auto y = ctx.output(n.output(0), Layout::Nhwc);
  if (!y) return y.status();
  const int method = attrs.method, nearestMode = attrs.nearestMode;
  const float cubic = attrs.cubic, extrapolation = attrs.extrapolation;
  const int64_t exclude = attrs.exclude;
  ctx.emit(fb::PrimitiveType_Resize,
           [=](FBB& b) {
             return fb::CreateResize(b, fb::Format_NHWC, static_cast<fb::ResizeMethod>(method), h,
                                     w, false, static_cast<fb::CoordinateTransformMode>(transform),
                                     cubic, exclude, extrapolation,
                                     static_cast<fb::NearestMode>(nearestMode))
                 .Union();
           },
           {x, size}, {*y});
  return Status::ok();
}

// The H and W scales ONNX's coordinate rule uses for a static Resize / Upsample: the constant
// scales, or output / input sizes (in double, then float, as the executor); nullopt when the
// scales are computed at run time.
std::optional<std::array<float, 2>> staticScales(LoweringContext& ctx, const Node& n,
                                                 bool isUpsample, const std::vector<int64_t>& in,
                                                 const std::vector<int64_t>& out) {
  const Value* scales = n.input(isUpsample ? 1 : 2);
  if (isUpsample && !scales) {
    const Attribute* attr = n.attribute("scales");
    if (attr && attr->kind() == AttrKind::Floats && attr->asFloats().size() == 4)
      return std::array<float, 2>{attr->asFloats()[2], attr->asFloats()[3]};
    if (!attr) {
      auto h = ops::floatAttr(n, "height_scale", 1.0f), w = ops::floatAttr(n, "width_scale", 1.0f);
      if (h && w) return std::array<float, 2>{*h, *w};
    }
    return std::nullopt;
  }
  if (scales && !(ctx.rankOf(scales) == 1 && ctx.dimOf(scales, 0) == 0)) {
    auto c = ctx.constOf(scales);
    if (!c) {
      // Scales fed at run time: static sizes pin them only for whole upsampling factors.
      for (size_t i = 2; i < 4; ++i)
        if (in[i] == 0 || out[i] % in[i] != 0) return std::nullopt;
      return std::array<float, 2>{static_cast<float>(out[2] / in[2]),
                                  static_cast<float>(out[3] / in[3])};
    }
    if (c->tensor.elementCount() != 4 || c->tensor.dtype() != DType::Float32) return std::nullopt;
    auto sc = c->tensor.copyValues<float>();
    return std::array<float, 2>{sc[2], sc[3]};
  }
  if (isUpsample || in[2] == 0 || in[3] == 0) return std::nullopt;
  return std::array<float, 2>{static_cast<float>(double(out[2]) / double(in[2])),
                              static_cast<float>(double(out[3]) / double(in[3]))};
}

// A nearest Resize of static sizes as Gathers along H and W of NHWC `x`, with the source rows
// and columns kiln picks by ONNX's rule (ops/resize.h, shared with the executor). The runtime's
// ResizeNearestNeighbor maps coordinates by its own rule per transformation mode and never reads
// nearest_mode (mindspore-lite nnacl_c/fp32/resize_fp32.c), so it picks other pixels for
// round_prefer_ceil, ceil, floor under half_pixel, and more.
Status lowerNearestAsGathers(LoweringContext& ctx, const Node& n, bool isUpsample,
                             const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                             const std::array<float, 2>& scales) {
  ops::ResizeCoordinateRule rule;
  if (isUpsample) {
    rule.transform = "asymmetric";
    rule.opset10Nearest = true;
  } else {
    KILN_ASSIGN_OR_RETURN(rule.transform,
                          ops::stringAttr(n, "coordinate_transformation_mode", "half_pixel"));
    KILN_ASSIGN_OR_RETURN(rule.nearestMode,
                          ops::stringAttr(n, "nearest_mode", "round_prefer_floor"));
  }
  auto x = ctx.input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), Layout::Nhwc);
  if (!y) return y.status();
  // Source rows (axis 0) and columns (axis 1); an axis that keeps every index needs no Gather.
  std::vector<std::vector<int64_t>> picks(2);
  std::vector<int> axes;
  for (int axis = 0; axis < 2; ++axis) {
    const int64_t inLen = in[2 + axis], outLen = out[2 + axis];
    bool identity = inLen == outLen;
    for (int64_t o = 0; o < outLen; ++o) {
      const float source =
          ops::resizeSourceCoordinate(rule, o, scales[axis], inLen, outLen, 0.0f, 1.0f);
      picks[axis].push_back(
          std::clamp<int64_t>(ops::resizeNearestIndex(rule, source, scales[axis]), 0, inLen - 1));
      identity = identity && picks[axis].back() == o;
    }
    if (!identity) axes.push_back(axis);
  }
  if (axes.empty()) axes.push_back(1); // a copy still has to write the output
  Chain ch(ctx, n);
  const std::string name = n.output(0)->name();
  uint32_t cur = *x;
  std::vector<int32_t> dims = ch.dimsOf(*x);
  for (int axis : axes) {
    dims[1 + axis] = static_cast<int32_t>(out[2 + axis]);
    const uint32_t to = axis == axes.back() ? *y : ch.tmp(ch.typeOf(*x), dims);
    ctx.emit(fb::PrimitiveType_Gather, emptyTable<fb::Gather>(),
             {cur, ctx.intConst(picks[axis], fmt::format("{}_source{}", name, axis)),
              ctx.intConst({1 + axis}, fmt::format("{}_axis{}", name, axis))},
             {to});
    cur = to;
  }
  return Status::ok();
}

// The interpolation matrix of one axis of `n` (0: H, 1: W): the executor's own Resize run on the
// identity along that axis with the other axis kept, so the taps (cubic coefficient,
// exclude_outside, border clamping, coordinates) are exactly the executor's. Returns [in, out]:
// entry (i, o) is input i's weight in output o.
Expected<Tensor> axisWeights(const Node& n, int64_t opset, int axis, int64_t inLen, int64_t outLen,
                             float scale, bool bySizes) {
  std::vector<float> eye(static_cast<size_t>(inLen * inLen), 0.0f);
  for (int64_t i = 0; i < inLen; ++i)
    eye[static_cast<size_t>(i * inLen + i)] = 1.0f;
  std::vector<rt::RtValue> storage;
  storage.reserve(4);
  std::vector<const rt::RtValue*> inputs(n.inputs().size(), nullptr);
  storage.push_back(
      rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, {1, 1, inLen, inLen}, eye)));
  inputs[0] = &storage.back();
  if (inputs.size() > 1 && n.input(1)) {
    storage.push_back(rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, {0}, {})));
    inputs[1] = &storage.back();
  }
  std::vector<float> scales = {1, 1, 1, 1};
  std::vector<int64_t> sizes = {1, 1, inLen, inLen};
  scales[2 + axis] = scale;
  sizes[2 + axis] = outLen;
  if (bySizes) {
    if (inputs.size() < 4) return bad("a sizes input");
    if (n.input(2)) {
      storage.push_back(rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, {0}, {})));
      inputs[2] = &storage.back();
    }
    storage.push_back(rt::RtValue::ofTensor(Tensor::fromValues<int64_t>(DType::Int64, {4}, sizes)));
    inputs[3] = &storage.back();
  } else {
    if (inputs.size() < 3) return bad("a scales input");
    storage.push_back(
        rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, {4}, scales)));
    inputs[2] = &storage.back();
    if (inputs.size() > 3) inputs[3] = nullptr;
  }
  auto out = rt::Executor::evaluateNode(n, inputs, opset);
  if (!out) return out.status();
  if (out->size() != 1 || !(*out)[0].isTensor()) return bad("no interpolation table");
  const Tensor& t = (*out)[0].tensor;
  if (t.elementCount() != inLen * outLen) return bad("an interpolation table of another size");
  std::vector<float> v = t.copyValues<float>();
  if (axis == 1) return Tensor::fromValues<float>(DType::Float32, {inLen, outLen}, v);
  std::vector<float> transposed(v.size()); // the H run gives [out, in]
  for (int64_t o = 0; o < outLen; ++o)
    for (int64_t i = 0; i < inLen; ++i)
      transposed[static_cast<size_t>(i * outLen + o)] = v[static_cast<size_t>(o * inLen + i)];
  return Tensor::fromValues<float>(DType::Float32, {inLen, outLen}, transposed);
}

// A cubic Resize of static sizes as two MatMuls with the executor's interpolation tables (W, then
// H between Transposes of the last two axes). The runtime's cubic Resize takes other border taps
// (test_resize_upsample_scales_cubic: 1.0 where ONNX gives 0.4727).
Status lowerCubicAsMatMuls(LoweringContext& ctx, const Node& n, const std::vector<int64_t>& in,
                           const std::vector<int64_t>& out, const std::array<float, 2>& scales) {
  const Value* scaleInput = n.inputs().size() > 2 ? n.input(2) : nullptr;
  const bool bySizes =
      !(scaleInput && !(ctx.rankOf(scaleInput) == 1 && ctx.dimOf(scaleInput, 0) == 0));
  KILN_ASSIGN_OR_RETURN(Tensor wTable,
                        axisWeights(n, ctx.opset(), 1, in[3], out[3], scales[1], bySizes));
  KILN_ASSIGN_OR_RETURN(Tensor hTable,
                        axisWeights(n, ctx.opset(), 0, in[2], out[2], scales[0], bySizes));
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  const std::string name = n.output(0)->name();
  KILN_ASSIGN_OR_RETURN(uint32_t wt, ctx.constTensor(wTable, name + "_width_taps"));
  KILN_ASSIGN_OR_RETURN(uint32_t ht, ctx.constTensor(hTable, name + "_height_taps"));
  Chain ch(ctx, n);
  auto i32 = [](int64_t v) { return static_cast<int32_t>(v); };
  auto matmul = [&](uint32_t a, uint32_t b, std::vector<int32_t> dims) {
    return ch.op(fb::PrimitiveType_MatMulFusion, {a, b}, ch.tmp(ch.typeOf(a), std::move(dims)),
                 [](FBB& fbb) { return fb::CreateMatMulFusion(fbb, false, false).Union(); });
  };
  uint32_t swap = ctx.intConst({0, 1, 3, 2}, name + "_swap_hw");
  auto transpose = [&](uint32_t a, std::vector<int32_t> dims, std::optional<uint32_t> to) {
    return ch.op(fb::PrimitiveType_Transpose, {a, swap}, to ? *to : ch.tmp(ch.typeOf(a), dims));
  };
  uint32_t wide = matmul(*x, wt, {i32(in[0]), i32(in[1]), i32(in[2]), i32(out[3])});
  uint32_t turned =
      transpose(wide, {i32(in[0]), i32(in[1]), i32(out[3]), i32(in[2])}, std::nullopt);
  uint32_t tall = matmul(turned, ht, {i32(in[0]), i32(in[1]), i32(out[3]), i32(out[2])});
  transpose(tall, {}, *y);
  return Status::ok();
}

// Resize over sizes known only at run time (ms.md §4.6: a 4-float second input scales H = [1] and
// W = [2] of the NHWC input and rounds; two int32 are the new [H, W]).
// - constant whole scales (2, 4, ...): the scale tensor [1, sh, sw, 1]; a whole scale gives the
//   same size rounded or floored, and the same coordinate mapping as ONNX's;
// - a sizes input (constant or computed): its H and W gathered as int32 [H, W], when the batch
//   and channel dims are known to stay.
// Anything else depends on the sizes, which only a fixed input shape settles.
Status lowerDynamicResize(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const ResizeAttrs attrs, resizeAttrs(n, ctx.opset()));
  const bool isUpsample = n.opType() == "Upsample" || ctx.opset() < 11;
  const Value* scalesValue = n.input(isUpsample ? 1 : 2);
  const Value* sizesValue = isUpsample ? nullptr : n.input(3);
  if (sizesValue && ctx.rankOf(sizesValue) == 1 && ctx.dimOf(sizesValue, 0) == 0)
    sizesValue = nullptr; // an empty sizes tensor stands for "use the scales"
  int transform = attrs.transform;
  auto x = [&]() { return ctx.input(n.input(0), Layout::Nhwc); };
  if (!sizesValue) {
    auto c = scalesValue ? ctx.constOf(scalesValue) : std::nullopt;
    if (!c || c->tensor.elementCount() != 4 || c->tensor.dtype() != DType::Float32)
      return dynamicShape("Resize with run-time scales over dynamic sizes");
    auto sc = c->tensor.copyValues<float>();
    if (sc[0] != 1.0f || sc[1] != 1.0f) return bad("resizing the batch or channel axis");
    for (size_t i = 2; i < 4; ++i)
      if (sc[i] < 1.0f || sc[i] != std::floor(sc[i]))
        return dynamicShape("Resize scale {} over a dynamic size (only whole scales keep ONNX's "
                            "sizes and coordinates)",
                            sc[i]);
    if (attrs.pytorchHalfPixel) {
      // Equal to half_pixel when the output size is > 1, which a whole scale ≥ 2 ensures.
      if (sc[2] < 2.0f || sc[3] < 2.0f)
        return dynamicShape("pytorch_half_pixel with scale 1 over a dynamic size");
      transform = fb::CoordinateTransformMode_HALF_PIXEL;
    }
    auto in = x();
    if (!in) return in.status();
    uint32_t size = ctx.floatConst({1.0f, sc[2], sc[3], 1.0f}, n.output(0)->name() + "_scale", {4});
    return emitResize(ctx, n, attrs, transform, 0, 0, *in, size);
  }
  // Sizes: the batch and channel dims must be known to stay.
  if (attrs.pytorchHalfPixel)
    return dynamicShape("pytorch_half_pixel with sizes over a dynamic size");
  if (ctx.rankOf(n.output(0)) != 4) return dynamicShape("Resize with an output of unknown rank");
  for (size_t i = 0; i < 2; ++i) {
    const Value* in = ctx.resolve(n.input(0));
    const Value* out = n.output(0);
    const Dim& a = in->shape()[i];
    const Dim& b = out->shape()[i];
    if (!(a == b) || (!a.isStatic() && !a.isSymbolic()))
      return dynamicShape("Resize sizes that may change the batch or channel axis");
  }
  auto in = x();
  if (!in) return in.status();
  uint32_t hw;
  if (auto c = ctx.constOf(sizesValue)) {
    auto v = intValues(c->tensor);
    if (v.size() != 4) return bad("{} sizes for a 4-D input", v.size());
    hw = ctx.intConst({v[2], v[3]}, n.output(0)->name() + "_size");
  } else {
    auto sizes = ctx.input(sizesValue, Layout::Onnx);
    if (!sizes) return sizes.status();
    const std::string base = n.output(0)->name();
    uint32_t idx = ctx.intConst({2, 3}, base + "_hw_index");
    uint32_t axis = ctx.intConst({0}, base + "_hw_axis");
    MsTensor t;
    t.name = base + "_hw";
    t.dataType = ctx.tensor(*sizes).dataType;
    t.nodeType = kNodeCNode;
    t.dims = {2};
    uint32_t gathered = ctx.addTensor(std::move(t));
    ctx.emit(fb::PrimitiveType_Gather, emptyTable<fb::Gather>(), {*sizes, idx, axis}, {gathered});
    hw = gathered;
    if (ctx.tensor(gathered).dataType != kTypeInt32) {
      MsTensor c32 = ctx.tensor(gathered);
      c32.name = base + "_hw_i32";
      c32.dataType = kTypeInt32;
      uint32_t to = ctx.addTensor(std::move(c32));
      uint32_t dst = ctx.intConst({kTypeInt32}, base + "_hw_i32_to", std::vector<int32_t>{});
      ctx.emit(fb::PrimitiveType_Cast, emptyTable<fb::Cast>(), {gathered, dst}, {to});
      hw = to;
    }
  }
  return emitResize(ctx, n, attrs, transform, 0, 0, *in, hw);
}

Status lowerResize(LoweringContext& ctx, const Node& n) {
  if (ctx.rankOf(n.input(0)) != 4)
    return bad("{}-D input (.ms Resize is 4-D)", ctx.rankOf(n.input(0)));
  auto inShape = ctx.staticShape(n.input(0));
  auto outShape = ctx.staticShape(n.output(0));
  // The output's rank too: a model may declare it otherwise (a fuzzed one said f32[]).
  if (outShape && outShape->size() != 4)
    return bad("{}-D output of a 4-D input", outShape->size());
  if (!outShape || !inShape) return lowerDynamicResize(ctx, n);
  if ((*outShape)[0] != (*inShape)[0] || (*outShape)[1] != (*inShape)[1])
    return bad("resizing the batch or channel axis");
  KILN_ASSIGN_OR_RETURN(const ResizeAttrs attrs, resizeAttrs(n, ctx.opset()));
  const bool isUpsample = n.opType() == "Upsample" || ctx.opset() < 11;
  int transform = attrs.transform;
  if (attrs.pytorchHalfPixel) {
    if ((*outShape)[2] <= 1 || (*outShape)[3] <= 1)
      return bad("coordinate_transformation_mode 'pytorch_half_pixel'");
    transform = fb::CoordinateTransformMode_HALF_PIXEL; // equal to half_pixel for sizes > 1
  }
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
  if (attrs.method == fb::ResizeMethod_NEAREST && !attrs.pytorchHalfPixel)
    if (auto scales = staticScales(ctx, n, isUpsample, *inShape, *outShape))
      return lowerNearestAsGathers(ctx, n, isUpsample, *inShape, *outShape, *scales);
  if (attrs.method == fb::ResizeMethod_CUBIC && !isUpsample && !attrs.pytorchHalfPixel)
    if (auto scales = staticScales(ctx, n, isUpsample, *inShape, *outShape))
      return lowerCubicAsMatMuls(ctx, n, *inShape, *outShape, *scales);
  auto x = ctx.input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  uint32_t size = ctx.intConst({h, w}, n.output(0)->name() + "_size");
  return emitResize(ctx, n, attrs, transform, h, w, *x, size);
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
    if (!ctx.isConstant(si)) {
      // Sizes computed at run time: two int32 [H, W] (what kiln writes for dynamic sizes).
      auto d = ctx.dims(si);
      if (!dt || !isInteger(*dt) || d.size() != 1 || d[0] != 2)
        return ctx.nodeUnsupported("a run-time size input must be 2 integers [H, W]");
      KILN_ASSIGN_OR_RETURN(Value * hw, ctx.int64Input(1));
      Value* sizes = ctx.emit("Concat", {nc(), hw}, {{"axis", Attribute::ofInt(0)}});
      y = ctx.emit("Resize", {nchw, nullptr, nullptr, sizes}, std::move(attrs));
      return ctx.bind(0, ctx.toNhwc(y));
    }
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
