// .om rules for BatchNormalization, LayerNormalization, InstanceNormalization, LRN and Dropout.
#include "../om_context.h"

namespace kiln::om {
namespace {

// Dropout in inference is the identity; ONNX Identity is GraphEngine's Identity.
KILN_OM_LOWERING(
    "Dropout",
    [](const Node& n, const OpContext&) -> std::string {
      if (hasInput(n, 2)) {
        const Tensor* t = constInput(n, 2);
        if (!t || t->byteSize() < 1 || t->data()[0] != 0) return "Dropout in training mode";
      }
      if (n.outputs().size() > 1 && n.output(1) &&
          (n.output(1)->hasUses() || n.output(1)->isGraphOutput()) && !staticShape(n.input(0)))
        return "Dropout's mask output of a dynamic shape";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("Identity");
      l.input(o, l.in(0));
      const Value* y = n.output(0);
      l.bind(y, l.output(o, y->dtype(), y->shape(), y->name()));
      // In inference every element is kept: the mask is all true, a constant of x's shape.
      if (n.outputs().size() > 1 && n.output(1) &&
          (n.output(1)->hasUses() || n.output(1)->isGraphOutput())) {
        auto dims = n.input(0)->shape().staticDims();
        int64_t count = 1;
        for (int64_t d : dims)
          count *= d;
        std::vector<uint8_t> ones(static_cast<size_t>(count), 1);
        l.bind(n.output(1),
               l.constant("mask", Tensor(DType::Bool, dims, Buffer::owned(std::move(ones)))));
      }
    });
KILN_OM_LOWERING(
    "BatchNormalization",
    [](const Node& n, const OpContext& context) -> std::string {
      // Before opset 7 is_test says inference (else Y uses the batch's own statistics).
      if (context.opset < 7 && !nodeInt(n, "is_test", 0))
        return "BatchNormalization of opset 6 or earlier in training mode (is_test 0)";
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
      // The IR declares six outputs; inference reads only y, the statistics stay unconnected.
      const Shape channels = n.input(1)->shape();
      for (const char* stat : {"batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2",
                               "reserve_space_3"})
        l.output(o, DType::Float32, channels, y->name() + "_" + stat);
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
      // The IR declares mean and variance too (x's dims, 1 from begin_norm_axis on); inference
      // reads only y, the statistics stay unconnected.
      std::vector<Dim> statDims = n.input(0)->shape().dims();
      for (size_t d = static_cast<size_t>(axis); d < statDims.size(); ++d)
        statDims[d] = Dim::known(1);
      for (const char* stat : {"mean", "variance"})
        l.output(o, y->dtype(), Shape(statDims), y->name() + "_" + stat);
    });
KILN_OM_RAISING("LayerNorm", [](Raiser& r, const OpDef& op) -> Status {
  std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1)};
  if (Value* b = r.in(op, 2)) inputs.push_back(b);
  Node* node = r.emit(op, "LayerNormalization", inputs, 1);
  node->setAttribute("axis", Attribute::ofInt(getI(op, "begin_norm_axis", -1)));
  node->setAttribute("epsilon", Attribute::ofFloat(getF(op, "epsilon", 1e-5f)));
  return Status::ok();
});
// LRN → LRN across channels. GraphEngine's LRN is TensorFlow's: x / (bias + alpha * sqr_sum)^beta
// with sqr_sum over channels [c - depth_radius, c + depth_radius]; ONNX divides its alpha by
// size, and only an odd size is a window centred on c.
KILN_OM_LOWERING(
    "LRN",
    [](const Node& n, const OpContext&) -> std::string {
      const Attribute* size = n.attribute("size");
      if (!size || size->kind() != AttrKind::Int) return "LRN without an integer size";
      if (size->asInt() < 1 || size->asInt() % 2 == 0)
        return fmt::format("LRN with size {} (only an odd size is a centred window)",
                           size->asInt());
      if (int64_t r = rankOf(n.input(0)); r != 4)
        return fmt::format("LRN with a rank-{} input (4-D NCHW lowers)", r);
      return "";
    },
    [](Lowerer& l, const Node& n) {
      const int64_t size = nodeInt(n, "size", 1);
      OpDef* o = l.op("LRN");
      l.input(o, l.in(0), "NCHW");
      auto& a = *o->mutable_attr();
      a["depth_radius"] = attrI((size - 1) / 2);
      a["bias"] = attrF(nodeFloat(n, "bias", 1.0f));
      a["alpha"] = attrF(nodeFloat(n, "alpha", 1e-4f) / static_cast<float>(size));
      a["beta"] = attrF(nodeFloat(n, "beta", 0.75f));
      a["norm_region"] = attrS("ACROSS_CHANNELS");
      l.outputs(o, "NCHW");
    });
KILN_OM_RAISING("LRN", [](Raiser& r, const OpDef& op) -> Status {
  if (std::string region = getS(op, "norm_region", "ACROSS_CHANNELS"); region != "ACROSS_CHANNELS")
    return r.unsupported(op, "norm_region " + region);
  const int64_t size = 2 * getI(op, "depth_radius", 5) + 1;
  Node* node = r.emit(op, "LRN", {r.in(op, 0)}, 1);
  node->setAttribute("size", Attribute::ofInt(size));
  node->setAttribute("alpha", Attribute::ofFloat(getF(op, "alpha", 1.0f) * float(size)));
  node->setAttribute("beta", Attribute::ofFloat(getF(op, "beta", 0.5f)));
  node->setAttribute("bias", Attribute::ofFloat(getF(op, "bias", 1.0f)));
  return Status::ok();
});
KILN_OM_LOWERING(
    "InstanceNormalization",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 6) return "InstanceNormalization of opset 5 or earlier";
      for (const auto& attribute : n.attributes())
        if (attribute.first != "epsilon")
          return fmt::format("attribute '{}' of InstanceNormalization", attribute.first);
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("InstanceNorm");
      for (size_t i = 0; i < 3; ++i)
        l.input(o, l.in(i));
      (*o->mutable_attr())["epsilon"] = attrF(nodeFloat(n, "epsilon", 1e-5f));
      const Value* y = n.output(0);
      l.bind(y, l.output(o, y->dtype(), y->shape(), y->name()));
      // The IR declares mean and variance outputs too (per sample and channel); nothing reads them.
      std::vector<Dim> stat;
      const Shape& x = n.input(0)->shape();
      for (size_t d = 0; x.hasRank() && d < x.rank(); ++d)
        stat.push_back(d < 2 ? x[d] : Dim::known(1));
      for (const char* name : {"mean", "variance"})
        l.output(o, y->dtype(), Shape(stat), y->name() + "_" + name);
    });
KILN_OM_RAISING("InstanceNorm", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "InstanceNormalization", {r.in(op, 0), r.in(op, 1), r.in(op, 2)}, 1)
      ->setAttribute("epsilon", Attribute::ofFloat(getF(op, "epsilon", 1e-5f)));
  return Status::ok();
});

} // namespace
} // namespace kiln::om
