// .om rules for GridSample → GridSampler2D (4-D data; the interpolation, padding and corner
// alignment as attributes).
#include "../om_context.h"

namespace kiln::om {
namespace {

// ONNX names the modes bilinear / bicubic through opset 19 and linear / cubic from opset 20;
// GridSampler2D takes the first spelling.
std::string geInterpolation(const std::string& mode) {
  if (mode == "linear") return "bilinear";
  if (mode == "cubic") return "bicubic";
  return mode;
}

KILN_OM_LOWERING(
    "GridSample",
    [](const Node& n, const OpContext&) -> std::string {
      if (rankOf(n.input(0)) != 4) return "GridSample that is not on 4-D data";
      std::string mode = geInterpolation(nodeString(n, "mode", "bilinear"));
      if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
        return "GridSample mode " + mode;
      std::string padding = nodeString(n, "padding_mode", "zeros");
      if (padding != "zeros" && padding != "border" && padding != "reflection")
        return "GridSample padding_mode " + padding;
      if (!isFloatType(n.input(0)->dtype())) return "GridSample on non-float data";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("GridSampler2D");
      l.input(o, l.in(0), "NCHW");
      l.input(o, l.in(1));
      auto& a = *o->mutable_attr();
      a["interpolation_mode"] = attrS(geInterpolation(nodeString(n, "mode", "bilinear")));
      a["padding_mode"] = attrS(nodeString(n, "padding_mode", "zeros"));
      a["align_corners"] = attrB(nodeInt(n, "align_corners", 0) != 0);
      l.outputs(o, "NCHW");
    });
KILN_OM_RAISING("GridSampler2D", [](Raiser& r, const OpDef& op) -> Status {
  Node* node = r.emit(op, "GridSample", {r.in(op, 0), r.in(op, 1)}, 1);
  node->setAttribute("mode", Attribute::ofString(getS(op, "interpolation_mode", "bilinear")));
  node->setAttribute("padding_mode", Attribute::ofString(getS(op, "padding_mode", "zeros")));
  node->setAttribute("align_corners", Attribute::ofInt(getB(op, "align_corners", false) ? 1 : 0));
  return Status::ok();
});

} // namespace
} // namespace kiln::om
