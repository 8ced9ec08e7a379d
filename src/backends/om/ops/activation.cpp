// .om rules for the activations: Softmax / LogSoftmax, Clip, Relu and the other pointwise ones.
#include <limits>

#include "../om_context.h"

namespace kiln::om {
namespace {

// Softmax / LogSoftmax → SoftmaxV2 / LogSoftmaxV2 over one axis.
void softmaxRules() {
  for (const std::string onnx : {"Softmax", "LogSoftmax"}) {
    std::string geType = onnx == "Softmax" ? "SoftmaxV2" : "LogSoftmaxV2";
    addLowering(
        onnx,
        [](const Node& n, const OpContext& context) -> std::string {
          int64_t r = rankOf(n.input(0));
          if (r < 0) return n.opType() + " with an input of unknown rank";
          int64_t axis = nodeInt(n, "axis", context.opset >= 13 ? -1 : 1);
          if (axis < 0) axis += r;
          // Before opset 13 the input is coerced to 2-D at `axis`: one axis only when
          // it is the last.
          if (context.opset < 13 && axis != r - 1 && r > 0) {
            if (!staticShape(n.input(0)))
              return n.opType() + " (opset < 13) over several axes of a dynamic shape";
          }
          return "";
        },
        [geType](Lowerer& l, const Node& n) {
          int64_t r = rankOf(n.input(0));
          int64_t axis = nodeInt(n, "axis", l.opset >= 13 ? -1 : 1);
          if (axis < 0) axis += r;
          const Value* y = n.output(0);
          if (l.opset >= 13 || axis == r - 1 || r == 0) {
            OpDef* o = l.op(geType);
            l.input(o, l.in(0));
            (*o->mutable_attr())["axes"] = attrInts({axis});
            l.outputs(o);
            return;
          }
          auto dims = n.input(0)->shape().staticDims();
          int64_t outer = 1, inner = 1;
          for (int64_t i = 0; i < r; ++i)
            (i < axis ? outer : inner) *= dims[static_cast<size_t>(i)];
          Shape flat = Shape::fromStatic({outer, inner});
          OpDef* r1 = l.op("Reshape", "flatten");
          l.input(r1, l.in(0));
          l.input(r1, l.constInts("flat_shape", {outer, inner}));
          Port p = l.output(r1, y->dtype(), flat, "");
          OpDef* o = l.op(geType, "2d");
          l.input(o, p);
          (*o->mutable_attr())["axes"] = attrInts({1});
          p = l.output(o, y->dtype(), flat, "");
          OpDef* r2 = l.op("Reshape");
          l.input(r2, p);
          l.input(r2, l.constInts("shape", dims));
          l.bind(y, l.output(r2, y->dtype(), y->shape(), y->name()));
        },
        __FILE__);
    addRaising(
        geType,
        [onnx](Raiser& r, const OpDef& op) -> Status {
          auto axes = getInts(op, "axes");
          if (axes.size() > 1) return r.unsupported(op, "softmax over several axes");
          Node* node = r.emit(op, onnx, {r.in(op, 0)}, 1);
          node->setAttribute("axis", Attribute::ofInt(axes.empty() ? -1 : axes[0]));
          return Status::ok();
        },
        __FILE__);
  }
}
const bool kSoftmaxRulesRegistered = (softmaxRules(), true);

KILN_OM_LOWERING(
    "Clip",
    [](const Node& n, const OpContext&) -> std::string {
      DType t = n.input(0)->dtype();
      if (t == DType::BFloat16 || t == DType::Bool || (!isFloatingPoint(t) && !isInteger(t)))
        return std::string("Clip on ") + dtypeName(t);
      return "";
    },
    [](Lowerer& l, const Node& n) {
      DType t = n.input(0)->dtype();
      auto limit = [&](bool low) -> double {
        switch (t) {
        case DType::Int32:
          return low ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max();
        case DType::Int8:
          return low ? -128 : 127;
        case DType::UInt8:
          return low ? 0 : 255;
        case DType::Int16:
          return low ? -32768 : 32767;
        case DType::UInt16:
          return low ? 0 : 65535;
        case DType::UInt32:
          return low ? 0 : 4294967295.0;
        case DType::UInt64:
          return 0; // the maximum is set exactly below
        default:
          return low ? -std::numeric_limits<double>::infinity()
                     : std::numeric_limits<double>::infinity();
        }
      };
      auto bound = [&](size_t input, const char* attr, bool low, const char* name) -> Port {
        // Bounds are inputs from opset 11 on; kiln's passes may also leave them as the
        // older attributes (convert-fp16 keeps fp32 bounds that way), so take either.
        if (l.opset >= 11 && hasInput(n, input)) return l.in(input);
        if (n.attribute(attr)) return l.constScalar(name, t, nodeFloat(n, attr, 0));
        if (t == DType::Float16) {
          uint16_t bits = low ? 0xFC00 : 0x7C00; // ∓inf
          return l.constant(name, Tensor::fromValues<uint16_t>(DType::Float16, {}, {bits}));
        }
        if (t == DType::Int64) {
          int64_t v =
              low ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
          return l.constant(name, Tensor::fromValues<int64_t>(t, {}, {v}));
        }
        if (t == DType::UInt64 && !low)
          return l.constant(
              name, Tensor::fromValues<uint64_t>(t, {}, {std::numeric_limits<uint64_t>::max()}));
        return l.constScalar(name, t, limit(low));
      };
      OpDef* o = l.op("ClipByValue");
      l.input(o, l.in(0));
      l.input(o, bound(1, "min", true, "clip_value_min"));
      l.input(o, bound(2, "max", false, "clip_value_max"));
      l.outputs(o);
    });
KILN_OM_RAISING("ClipByValue", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "Clip", {r.in(op, 0), r.in(op, 1), r.in(op, 2)}, 1);
  return Status::ok();
});
// PRelu: from opset 7 the slope broadcasts as numpy does; opset 6 applies a slope of C values
// per channel (axis 1), so that slope gets unit axes after it ([C] → [C, 1, ...]).
KILN_OM_LOWERING(
    "PRelu",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 6) return "PRelu of opset 5 or earlier";
      if (!n.attributes().empty())
        return fmt::format("attribute '{}' of PRelu", n.attributes().begin()->first);
      if (context.opset < 7 && rankOf(n.input(1)) != 1)
        return "PRelu of opset 6 with a slope that is not 1-D";
      if (context.opset < 7 && rankOf(n.input(0)) < 0) return "PRelu of opset 6 of unknown rank";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      Port slope = l.in(1);
      const int64_t rank = rankOf(n.input(0));
      const Value* s = n.input(1);
      if (l.opset < 7 && rank > 2 && !(staticShape(s) && s->shape()[0].value() == 1)) {
        std::vector<int64_t> axes;
        std::vector<Dim> dims{s->shape()[0]};
        for (int64_t i = 1; i < rank - 1; ++i) {
          axes.push_back(i);
          dims.push_back(Dim::known(1));
        }
        OpDef* u = l.op("Unsqueeze", "slope");
        l.input(u, slope);
        (*u->mutable_attr())["axes"] = attrInts(axes);
        slope = l.output(u, s->dtype(), Shape(dims), "");
      }
      OpDef* o = l.op("PRelu");
      l.input(o, l.in(0));
      l.input(o, slope);
      l.outputs(o);
    });
KILN_OM_RAISING("PRelu", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "PRelu", {r.in(op, 0), r.in(op, 1)}, 1);
  return Status::ok();
});
// Hardmax: 1 at the first maximum along the axis, else 0 — ArgMaxV2 (which picks the first), then
// OneHot of the axis size. Before opset 13 the input is a 2-D [before axis, from axis] view.
KILN_OM_LOWERING(
    "Hardmax",
    [](const Node& n, const OpContext& context) -> std::string {
      const Value* x = n.input(0);
      if (!staticShape(x)) return "Hardmax of a dynamic shape";
      if (!isFloatType(x->dtype())) return "Hardmax on non-float data";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      const Value* x = n.input(0);
      auto dims = x->shape().staticDims();
      const int64_t rank = static_cast<int64_t>(dims.size());
      int64_t axis = nodeInt(n, "axis", l.opset < 13 ? 1 : -1);
      if (axis < 0) axis += rank;
      Port in = l.in(0);
      std::vector<int64_t> work = dims;
      if (l.opset < 13 && axis != rank - 1) {
        int64_t before = 1, after = 1;
        for (int64_t i = 0; i < rank; ++i)
          (i < axis ? before : after) *= dims[i];
        work = {before, after};
        OpDef* r = l.op("Reshape", "2d");
        l.input(r, in);
        l.input(r, l.constInts("2d_shape", work));
        in = l.output(r, x->dtype(), Shape::fromStatic(work), "");
        axis = 1;
      }
      std::vector<int64_t> reduced;
      for (size_t i = 0; i < work.size(); ++i)
        if (static_cast<int64_t>(i) != axis) reduced.push_back(work[i]);
      OpDef* am = l.op("ArgMaxV2", "argmax");
      l.input(am, in);
      l.input(am, l.constInts("dimension", {axis}));
      (*am->mutable_attr())["dtype"] = attrDt(geProtoToCxxDType(ge::proto::DT_INT64));
      Port index = l.output(am, DType::Int64, Shape::fromStatic(reduced), "");
      const bool reshaped = work != dims;
      OpDef* o = l.op("OneHot", reshaped ? "onehot" : "");
      l.input(o, index);
      l.input(o, l.constant("depth", Tensor::fromValues<int64_t>(DType::Int64, {}, {work[axis]})));
      l.input(o, l.constScalar("on", x->dtype(), 1.0));
      l.input(o, l.constScalar("off", x->dtype(), 0.0));
      (*o->mutable_attr())["axis"] = attrI(axis);
      if (!reshaped) {
        l.outputs(o);
        return;
      }
      Port y = l.output(o, x->dtype(), Shape::fromStatic(work), "");
      OpDef* back = l.op("Reshape");
      l.input(back, y);
      l.input(back, l.constInts("shape", dims));
      l.outputs(back);
    });
void activationRules() {
  for (const char* unary : {"Relu", "Sigmoid", "Tanh", "Softplus", "Softsign"})
    simple(unary, unary, {}, 1, noCheck,
           __FILE__); // older attributes (consumed_inputs) fail the attribute check
  simple("LeakyRelu", "LeakyRelu", {{"alpha", "negative_slope"}}, 6, noCheck, __FILE__);
  simple("Elu", "Elu", {{"alpha", "alpha"}}, 6, noCheck, __FILE__);
  // GraphEngine's Selu has no attributes (the standard constants) and its Celu takes alpha1..3,
  // not ONNX's alpha: only the attribute-free forms lower.
  simple("Selu", "Selu", {}, 6, noCheck, __FILE__);
  simple("Celu", "Celu", {}, 12, noCheck, __FILE__);
  simple("HardSigmoid", "HardSigmoid", {{"alpha", "alpha"}, {"beta", "beta"}}, 6, noCheck,
         __FILE__);
  simple("Mish", "Mish", {}, 18, noCheck, __FILE__);
}
const bool kActivationRulesRegistered = (activationRules(), true);

// ThresholdedRelu → SelectV2(Greater(x, alpha), x, 0) and HardSwish → x · HardSigmoid(x; 1/6,
// 1/2): the public IR registers neither op, and both are exact in these registered ones.
KILN_OM_LOWERING(
    "ThresholdedRelu",
    [](const Node&, const OpContext& context) -> std::string {
      return context.opset >= 10 ? "" : "ThresholdedRelu of opset 9 or earlier";
    },
    [](Lowerer& l, const Node& n) {
      const Value* x = n.input(0);
      OpDef* above = l.op("Greater", "above");
      l.input(above, l.in(0));
      l.input(above, l.constScalar("alpha", x->dtype(), nodeFloat(n, "alpha", 1.0f)));
      Port mask = l.output(above, DType::Bool, x->shape(), "");
      OpDef* o = l.op("SelectV2");
      l.input(o, mask);
      l.input(o, l.in(0));
      l.input(o, l.constScalar("zero", x->dtype(), 0.0));
      l.outputs(o);
    });
KILN_OM_LOWERING(
    "HardSwish",
    [](const Node&, const OpContext& context) -> std::string {
      return context.opset >= 14 ? "" : "HardSwish of opset 13 or earlier";
    },
    [](Lowerer& l, const Node& n) {
      const Value* x = n.input(0);
      OpDef* gate = l.op("HardSigmoid", "gate");
      l.input(gate, l.in(0));
      (*gate->mutable_attr())["alpha"] = attrF(1.0f / 6.0f);
      (*gate->mutable_attr())["beta"] = attrF(0.5f);
      Port g = l.output(gate, x->dtype(), x->shape(), "");
      OpDef* o = l.op("Mul");
      l.input(o, l.in(0));
      l.input(o, g);
      l.outputs(o);
    });
// Files from other writers may hold the unregistered ops.
KILN_OM_RAISING("ThresholdedRelu", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "ThresholdedRelu", {r.in(op, 0)}, 1)
      ->setAttribute("alpha", Attribute::ofFloat(getF(op, "threshold", 1.0f)));
  return Status::ok();
});
KILN_OM_RAISING("HardSwish", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "HardSwish", {r.in(op, 0)}, 1);
  return Status::ok();
});

} // namespace
} // namespace kiln::om
