// .om rules for Gather → GatherV2 and the 1:1 gather / scatter ops.
#include "../om_context.h"

namespace kiln::om {
namespace {

// Gather → GatherV2 with the axis as a constant input.
KILN_OM_LOWERING("Gather", noCheck, [](Lowerer& l, const Node& n) {
  OpDef* o = l.op("GatherV2");
  l.input(o, l.in(0));
  l.input(o, l.in(1));
  l.input(o, l.constInts("axis", {nodeInt(n, "axis", 0)}));
  (*o->mutable_attr())["batch_dims"] = attrI(0);
  l.outputs(o);
});
KILN_OM_RAISING("GatherV2", [](Raiser& r, const OpDef& op) -> Status {
  auto axis = r.constIntsIn(op, 2);
  if (!axis || axis->size() != 1) return r.unsupported(op, "axis is not a constant scalar");
  r.emit(op, "Gather", {r.in(op, 0), r.in(op, 1)}, 1)
      ->setAttribute("axis", Attribute::ofInt((*axis)[0]));
  return Status::ok();
});
// Scatter (opset 9-10, deprecated) is ScatterElements without a reduction.
KILN_OM_LOWERING(
    "Scatter",
    [](const Node& n, const OpContext&) -> std::string {
      for (const auto& [name, value] : n.attributes())
        if (name != "axis") return fmt::format("attribute '{}' of Scatter", name);
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("ScatterElements");
      for (size_t i = 0; i < 3; ++i)
        l.input(o, l.in(i));
      (*o->mutable_attr())["axis"] = attrI(nodeInt(n, "axis", 0));
      l.outputs(o);
    });
// Compress: the positions where condition is true (NonZero, as a 1-D list), gathered along the
// axis (of the flattened input when there is no axis). A condition shorter than the axis leaves
// the rest out, as ONNX says.
KILN_OM_LOWERING(
    "Compress",
    [](const Node& n, const OpContext&) -> std::string {
      if (n.attribute("axis") && nodeInt(n, "axis", 0) < 0 && rankOf(n.input(0)) < 0)
        return "Compress along a negative axis of unknown rank";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      Port x = l.in(0);
      int64_t axis = nodeInt(n, "axis", 0);
      if (axis < 0) axis += rankOf(n.input(0));
      if (!n.attribute("axis")) {
        OpDef* f = l.op("Reshape", "flat");
        l.input(f, x);
        l.input(f, l.constInts("flat_shape", {-1}));
        x = l.output(f, x.dtype, Shape({Dim()}), "");
      }
      OpDef* nz = l.op("NonZero", "positions");
      l.input(nz, l.in(1));
      Port positions = l.output(nz, DType::Int64, Shape({Dim::known(1), Dim()}), "");
      OpDef* r = l.op("Reshape", "positions_1d");
      l.input(r, positions);
      l.input(r, l.constInts("positions_shape", {-1}));
      positions = l.output(r, DType::Int64, Shape({Dim()}), "");
      OpDef* o = l.op("GatherV2");
      l.input(o, x);
      l.input(o, positions);
      l.input(o, l.constInts("axis", {axis}));
      (*o->mutable_attr())["batch_dims"] = attrI(0);
      l.outputs(o);
    });
void gatherScatterRules() {
  simple("GatherElements", "GatherElements", {{"axis", "dim"}}, 11, noCheck, __FILE__);
  // GraphEngine's GatherNd has no batch_dims: only the attribute-free form lowers.
  simple("GatherND", "GatherNd", {}, 12, noCheck, __FILE__);
  simple("ScatterElements", "ScatterElements", {{"axis", "axis"}, {"reduction", "reduction"}}, 11,
         noCheck, __FILE__);
}

// ScatterND → TensorScatterUpdate, or TensorScatterAdd for reduction "add" (float16 / float32 /
// int32 / int8 / uint8); GraphEngine has no multiplying / max / min counterpart.
KILN_OM_LOWERING(
    "ScatterND",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 11)
        return fmt::format("ScatterND of opset {} (kiln lowers opset 11 and later)", context.opset);
      std::string reduction = nodeString(n, "reduction", "none");
      if (reduction == "none") return "";
      if (reduction != "add") return "ScatterND with reduction " + reduction;
      DType t = n.input(0)->dtype();
      if (t != DType::Float32 && t != DType::Float16 && t != DType::Int32 && t != DType::Int8 &&
          t != DType::UInt8)
        return "ScatterND add on this data type";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      bool add = nodeString(n, "reduction", "none") == "add";
      OpDef* o = l.op(add ? "TensorScatterAdd" : "TensorScatterUpdate");
      for (size_t i = 0; i < 3; ++i)
        l.input(o, l.in(i));
      l.outputs(o);
    });
void scatterNdRaisingRules() {
  for (const char* type : {"TensorScatterUpdate", "TensorScatterAdd"})
    addRaising(
        type,
        [](Raiser& r, const OpDef& op) -> Status {
          Node* node = r.emit(op, "ScatterND", {r.in(op, 0), r.in(op, 1), r.in(op, 2)}, 1);
          if (op.type() == std::string("TensorScatterAdd"))
            node->setAttribute("reduction", Attribute::ofString("add"));
          return Status::ok();
        },
        __FILE__);
}
const bool kScatterNdRaisingRulesRegistered = (scatterNdRaisingRules(), true);
const bool kGatherScatterRulesRegistered = (gatherScatterRules(), true);

} // namespace
} // namespace kiln::om
