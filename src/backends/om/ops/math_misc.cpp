// .om rules for TopK → TopKV2, Einsum and Det → MatrixDeterminant.
#include "../om_context.h"

namespace kiln::om {
namespace {

KILN_OM_LOWERING(
    "TopK",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 10 && !n.attribute("k")) return "TopK without k";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("TopKV2");
      l.input(o, l.in(0));
      l.input(o, l.opset < 10 ? l.constInts("k", {nodeInt(n, "k", 1)}) : l.in(1));
      auto& a = *o->mutable_attr();
      a["dim"] = attrI(nodeInt(n, "axis", -1));
      a["largest"] = attrB(nodeInt(n, "largest", 1) != 0);
      a["sorted"] = attrB(nodeInt(n, "sorted", 1) != 0);
      l.outputs(o);
    });
KILN_OM_RAISING("TopKV2", [](Raiser& r, const OpDef& op) -> Status {
  Node* node = r.emit(op, "TopK", {r.in(op, 0), r.in(op, 1)}, 2);
  node->setAttribute("axis", Attribute::ofInt(getI(op, "dim", -1)));
  node->setAttribute("largest", Attribute::ofInt(getB(op, "largest", true)));
  node->setAttribute("sorted", Attribute::ofInt(getB(op, "sorted", true)));
  return Status::ok();
});
void einsumRules() {
  // Det → MatrixDeterminant ([..., M, M] of float32 / double).
  simple(
      "Det", "MatrixDeterminant", {}, 11,
      [](const Node& n, const OpContext&) -> std::string {
        DType t = n.input(0)->dtype();
        return t == DType::Float32 || t == DType::Float64 ? "" : "Det on this data type";
      },
      __FILE__);
}
const bool kEinsumRulesRegistered = (einsumRules(), true);

// Einsum → Einsum with N, the input count the IR requires.
KILN_OM_LOWERING(
    "Einsum",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 12) return "Einsum of opset 11 or earlier";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("Einsum");
      for (size_t i = 0; i < n.inputs().size(); ++i)
        l.input(o, l.in(i));
      (*o->mutable_attr())["equation"] = attrS(nodeString(n, "equation", ""));
      (*o->mutable_attr())["N"] = attrI(static_cast<int64_t>(n.inputs().size()));
      l.outputs(o);
    });
KILN_OM_RAISING("Einsum", [](Raiser& r, const OpDef& op) -> Status {
  std::vector<Value*> inputs;
  for (int i = 0; i < op.input_size(); ++i)
    if (!isControlInput(op.input(i))) inputs.push_back(r.in(op, i));
  r.emit(op, "Einsum", inputs, 1)
      ->setAttribute("equation", Attribute::ofString(getS(op, "equation", "")));
  return Status::ok();
});

} // namespace
} // namespace kiln::om
