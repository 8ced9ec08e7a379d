// .om rules for BatchNormalization, LayerNormalization, InstanceNormalization and Dropout.
#include "../om_context.h"

namespace kiln::om {
namespace {

// Dropout in inference is the identity; ONNX Identity is GraphEngine's Identity.
KILN_OM_LOWERING(
    "Dropout",
    [](const Node& n, const OpContext&) -> std::string {
      if (n.outputs().size() > 1 && n.output(1) &&
          (n.output(1)->hasUses() || n.output(1)->isGraphOutput()))
        return "Dropout's mask output";
      if (hasInput(n, 2)) {
        const Tensor* t = constInput(n, 2);
        if (!t || t->byteSize() < 1 || t->data()[0] != 0) return "Dropout in training mode";
      }
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("Identity");
      l.input(o, l.in(0));
      const Value* y = n.output(0);
      l.bind(y, l.output(o, y->dtype(), y->shape(), y->name()));
    });
KILN_OM_LOWERING(
    "BatchNormalization",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 7) return "BatchNormalization of opset 6 or earlier";
      if (nodeInt(n, "spatial", 1) != 1) return "BatchNormalization with spatial 0";
      if (nodeInt(n, "training_mode", 0)) return "BatchNormalization in training mode";
      for (size_t i = 1; i < n.outputs().size(); ++i)
        if (n.output(i) && (n.output(i)->hasUses() || n.output(i)->isGraphOutput()))
          return "BatchNormalization's running statistics outputs";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("BatchNorm");
      for (size_t i = 0; i < 5; ++i)
        l.input(o, l.in(i), i == 0 && rankOf(n.input(0)) == 4 ? "NCHW" : "");
      auto& a = *o->mutable_attr();
      a["epsilon"] = attrF(nodeFloat(n, "epsilon", 1e-5f));
      a["data_format"] = attrS("NCHW");
      a["is_training"] = attrB(false);
      const Value* y = n.output(0);
      l.bind(y, l.output(o, y->dtype(), y->shape(), y->name()));
    });
KILN_OM_RAISING("BatchNorm", [](Raiser& r, const OpDef& op) -> Status {
  std::vector<Value*> inputs;
  for (int i = 0; i < 5; ++i)
    inputs.push_back(r.in(op, i));
  r.emit(op, "BatchNormalization", inputs, 1)
      ->setAttribute("epsilon", Attribute::ofFloat(getF(op, "epsilon", 1e-5f)));
  return Status::ok();
});
KILN_OM_LOWERING(
    "LayerNormalization",
    [](const Node& n, const OpContext&) -> std::string {
      for (size_t i = 1; i < n.outputs().size(); ++i)
        if (n.output(i) && (n.output(i)->hasUses() || n.output(i)->isGraphOutput()))
          return "LayerNormalization's mean / inverse deviation outputs";
      if (nodeInt(n, "axis", -1) < 0 && rankOf(n.input(0)) < 0)
        return "LayerNormalization of unknown rank";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      int64_t axis = nodeInt(n, "axis", -1);
      if (axis < 0) axis += rankOf(n.input(0));
      OpDef* o = l.op("LayerNorm");
      for (size_t i = 0; i < 3; ++i)
        l.input(o, l.in(i));
      auto& a = *o->mutable_attr();
      a["begin_norm_axis"] = attrI(axis);
      a["begin_params_axis"] = attrI(axis);
      a["epsilon"] = attrF(nodeFloat(n, "epsilon", 1e-5f));
      const Value* y = n.output(0);
      l.bind(y, l.output(o, y->dtype(), y->shape(), y->name()));
    });
KILN_OM_RAISING("LayerNorm", [](Raiser& r, const OpDef& op) -> Status {
  std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1)};
  if (Value* b = r.in(op, 2)) inputs.push_back(b);
  Node* node = r.emit(op, "LayerNormalization", inputs, 1);
  node->setAttribute("axis", Attribute::ofInt(getI(op, "begin_norm_axis", -1)));
  node->setAttribute("epsilon", Attribute::ofFloat(getF(op, "epsilon", 1e-5f)));
  return Status::ok();
});
void instanceNormRules() {
  simple("InstanceNormalization", "InstanceNorm", {{"epsilon", "epsilon"}}, 6, noCheck, __FILE__);
}
const bool kInstanceNormRulesRegistered = (instanceNormRules(), true);

} // namespace
} // namespace kiln::om
