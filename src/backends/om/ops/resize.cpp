// .om rules for Resize → ResizeNearestNeighborV2 / ResizeBilinearV2 on the H and W of NCHW data.
#include <algorithm>
#include <cmath>

#include "../om_context.h"
#include "ops/resize.h"

namespace kiln::om {
namespace {

// Whether resizing an axis from `in` to `out` by `scale` computes what GraphEngine's out / in
// ratio computes: ONNX's output size is floor(in * scale) (so 9 * 0.33333334 gives 3), but its
// coordinates follow the scale, which then need not be out / in exactly.
bool scaleMatchesSize(const Node& n, float scale, int64_t in, int64_t out) {
  if (static_cast<double>(scale) * static_cast<double>(in) == static_cast<double>(out)) return true;
  if (scale <= 0 ||
      std::floor(static_cast<double>(scale) * static_cast<double>(in)) != static_cast<double>(out))
    return false;
  std::string mode = nodeString(n, "mode", "nearest");
  // The executor's rule (ops/resize.h): coordinates in float32, as ONNX Runtime.
  ops::ResizeCoordinateRule rule;
  rule.transform = nodeString(n, "coordinate_transformation_mode", "half_pixel");
  rule.nearestMode = nodeString(n, "nearest_mode", "round_prefer_floor");
  const float sizeScale = static_cast<float>(out) / static_cast<float>(in);
  auto pixel = [&](float c, float byScale) {
    return std::clamp<int64_t>(ops::resizeNearestIndex(rule, c, byScale), 0, in - 1);
  };
  for (int64_t x = 0; x < out; ++x) {
    const float byScale = ops::resizeSourceCoordinate(rule, x, scale, in, out, 0, 1);
    const float bySize = ops::resizeSourceCoordinate(rule, x, sizeScale, in, out, 0, 1);
    if (mode == "nearest" ? pixel(byScale, scale) != pixel(bySize, sizeScale) : byScale != bySize)
      return false;
  }
  return true;
}

// "" when the Resize is one of ResizeNearestNeighborV2 / ResizeBilinearV2 (static H / W resize
// whose coordinates those ops compute); else why not, and the ONNX-semantics Resize op takes it.
std::string v2Reason(const Node& n) {
  // The output's rank too: a model may declare it otherwise (a fuzzed one said f32[]).
  if (rankOf(n.input(0)) != 4 || rankOf(n.output(0)) != 4 || !staticShape(n.input(0)) ||
      !staticShape(n.output(0)))
    return "Resize that is not on static 4-D data";
  auto in = n.input(0)->shape().staticDims(), out = n.output(0)->shape().staticDims();
  if (in[0] != out[0] || in[1] != out[1]) return "Resize of the N or C axis";
  // With scales ONNX maps coordinates by the scale itself; GraphEngine by out / in (and the
  // raised Resize by its sizes): the two must pick the same source pixels.
  if (const Tensor* scales = constInput(n, 2);
      scales && scales->dtype() == DType::Float32 && scales->elementCount() == 4) {
    auto v = scales->copyValues<float>();
    for (size_t i = 2; i < 4; ++i)
      if (!scaleMatchesSize(n, v[i], in[i], out[i]))
        return "Resize by a scale that does not give a whole output size";
  } else if (hasInput(n, 2) && !hasInput(n, 3)) {
    return "Resize scales computed at run time";
  }
  std::string mode = nodeString(n, "mode", "nearest");
  std::string coord = nodeString(n, "coordinate_transformation_mode", "half_pixel");
  if (mode == "nearest") {
    std::string nearest = nodeString(n, "nearest_mode", "round_prefer_floor");
    bool legacy = coord == "asymmetric" && nearest == "floor";
    bool centers = coord == "half_pixel" && nearest == "round_prefer_ceil";
    bool corners = coord == "align_corners" && nearest == "round_prefer_ceil";
    if (!legacy && !centers && !corners)
      return "Resize nearest with " + coord + " / " + nearest;
    return "";
  }
  if (mode == "linear") {
    if (coord != "asymmetric" && coord != "half_pixel" && coord != "align_corners")
      return "Resize linear with " + coord;
    return "";
  }
  return "Resize mode " + mode;
}

KILN_OM_LOWERING(
    "Resize",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 11) return "Resize of opset 10 or earlier";
      if (n.attribute("antialias") && nodeInt(n, "antialias", 0)) return "Resize with antialias";
      if (n.attribute("axes")) return "Resize with axes";
      if (nodeString(n, "keep_aspect_ratio_policy", "stretch") != "stretch")
        return "Resize with keep_aspect_ratio_policy";
      // GraphEngine's Resize (ONNX semantics: roi / scales / sizes inputs, every mode) is 4-D.
      if (rankOf(n.input(0)) != 4) return "Resize that is not on 4-D data";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      if (!v2Reason(n).empty()) {
        OpDef* o = l.op("Resize");
        for (size_t i = 0; i < 4; ++i)
          l.input(o, hasInput(n, i) ? l.in(i) : Port{});
        auto& a = *o->mutable_attr();
        a["coordinate_transformation_mode"] =
            attrS(nodeString(n, "coordinate_transformation_mode", "half_pixel"));
        a["cubic_coeff_a"] = attrF(nodeFloat(n, "cubic_coeff_a", -0.75f));
        a["exclude_outside"] = attrI(nodeInt(n, "exclude_outside", 0));
        a["extrapolation_value"] = attrF(nodeFloat(n, "extrapolation_value", 0.0f));
        a["mode"] = attrS(nodeString(n, "mode", "nearest"));
        a["nearest_mode"] = attrS(nodeString(n, "nearest_mode", "round_prefer_floor"));
        l.outputs(o, "NCHW");
        return;
      }
      auto out = n.output(0)->shape().staticDims();
      std::string mode = nodeString(n, "mode", "nearest");
      std::string coord = nodeString(n, "coordinate_transformation_mode", "half_pixel");
      OpDef* o = l.op(mode == "nearest" ? "ResizeNearestNeighborV2" : "ResizeBilinearV2");
      l.input(o, l.in(0), "NCHW");
      l.input(o, l.constant("size", Tensor::fromValues<int32_t>(
                                        DType::Int32, {2},
                                        std::vector<int32_t>{int32_t(out[2]), int32_t(out[3])})));
      auto& a = *o->mutable_attr();
      a["align_corners"] = attrB(coord == "align_corners");
      a["half_pixel_centers"] = attrB(coord == "half_pixel");
      l.outputs(o, "NCHW");
    });
// Upsample (opset 7-9; deprecated since 10): the asymmetric / floor Resize by scales.
KILN_OM_LOWERING(
    "Upsample",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 9) return "Upsample of opset 8 or earlier (scales as an attribute)";
      std::string mode = nodeString(n, "mode", "nearest");
      if (mode != "nearest" && mode != "linear") return "Upsample mode " + mode;
      if (rankOf(n.input(0)) != 4) return "Upsample that is not on 4-D data";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("Resize");
      l.input(o, l.in(0));
      l.input(o, Port{});
      l.input(o, l.in(1));
      l.input(o, Port{});
      auto& a = *o->mutable_attr();
      a["coordinate_transformation_mode"] = attrS("asymmetric");
      a["mode"] = attrS(nodeString(n, "mode", "nearest"));
      a["nearest_mode"] = attrS("floor");
      l.outputs(o, "NCHW");
    });
KILN_OM_RAISING("Resize", [](Raiser& r, const OpDef& op) -> Status {
  Node* node = r.emit(op, "Resize", {r.in(op, 0), r.in(op, 1), r.in(op, 2), r.in(op, 3)}, 1);
  node->setAttribute("coordinate_transformation_mode",
                     Attribute::ofString(getS(op, "coordinate_transformation_mode", "half_pixel")));
  node->setAttribute("cubic_coeff_a", Attribute::ofFloat(getF(op, "cubic_coeff_a", -0.75f)));
  node->setAttribute("exclude_outside", Attribute::ofInt(getI(op, "exclude_outside", 0)));
  node->setAttribute("extrapolation_value",
                     Attribute::ofFloat(getF(op, "extrapolation_value", 0.0f)));
  node->setAttribute("mode", Attribute::ofString(getS(op, "mode", "nearest")));
  node->setAttribute("nearest_mode",
                     Attribute::ofString(getS(op, "nearest_mode", "round_prefer_floor")));
  return Status::ok();
});
void resizeRaisingRules() {
  for (const char* type : {"ResizeNearestNeighborV2", "ResizeBilinearV2"})
    addRaising(
        type,
        [](Raiser& r, const OpDef& op) -> Status {
          Value* x = r.in(op, 0);
          auto size = r.constIntsIn(op, 1);
          if (!size || size->size() != 2 || rankOf(x) != 4 || !x->shape()[0].isStatic() ||
              !x->shape()[1].isStatic())
            return r.unsupported(op, "size is not a constant [H, W] of 4-D data");
          bool nearest = op.type() == "ResizeNearestNeighborV2";
          bool corners = getB(op, "align_corners", false),
               centers = getB(op, "half_pixel_centers", false);
          Value* sizes =
              r.constInts(op.name() + "_sizes",
                          {x->shape()[0].value(), x->shape()[1].value(), (*size)[0], (*size)[1]});
          Node* node = r.emit(op, "Resize", {x, nullptr, nullptr, sizes}, 1);
          node->setAttribute("mode", Attribute::ofString(nearest ? "nearest" : "linear"));
          node->setAttribute("coordinate_transformation_mode",
                             Attribute::ofString(corners   ? "align_corners"
                                                 : centers ? "half_pixel"
                                                           : "asymmetric"));
          if (nearest)
            node->setAttribute(
                "nearest_mode",
                Attribute::ofString(corners || centers ? "round_prefer_ceil" : "floor"));
          return Status::ok();
        },
        __FILE__);
}
const bool kResizeRaisingRulesRegistered = (resizeRaisingRules(), true);

} // namespace
} // namespace kiln::om
