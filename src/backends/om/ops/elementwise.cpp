// .om rules for the element-wise ops: Cast / CastLike, Div, Mod, Max / Min / Sum, Mean, 1:1 ops.
#include <limits>

#include "../om_context.h"

namespace kiln::om {
namespace {

KILN_OM_LOWERING(
    "Cast",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 6) return "Cast of opset 5 or earlier";
      auto to = dtypeFromOnnx(static_cast<int32_t>(nodeInt(n, "to", 0)));
      if (!to || !toGeDType(*to)) return "Cast to this type";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      if (castAbsorbedByQuant(n)) return;
      OpDef* o = l.op("Cast");
      l.input(o, l.in(0));
      auto to = l.onChip(*dtypeFromOnnx(static_cast<int32_t>(nodeInt(n, "to", 0))));
      (*o->mutable_attr())["dst_type"] = attrI(geProtoToCxxDType(*toGeDType(to)));
      l.outputs(o);
    });
KILN_OM_RAISING("Cast", [](Raiser& r, const OpDef& op) -> Status {
  int proto = geCxxToProtoDType(static_cast<int>(getI(op, "dst_type", -1)));
  auto to = fromGeDType(proto);
  if (!to) return r.unsupported(op, "dst_type");
  r.emit(op, "Cast", {r.in(op, 0)}, 1)->setAttribute("to", Attribute::ofInt(dtypeToOnnx(*to)));
  return Status::ok();
});
KILN_OM_LOWERING(
    "CastLike",
    [](const Node& n, const OpContext&) -> std::string {
      if (!n.input(1) || !toGeDType(n.input(1)->dtype())) return "CastLike to this type";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("Cast");
      l.input(o, l.in(0));
      (*o->mutable_attr())["dst_type"] =
          attrI(geProtoToCxxDType(*toGeDType(l.onChip(n.input(1)->dtype()))));
      l.outputs(o);
    });
// Division: RealDiv for floating point, TruncateDiv (C semantics, as ONNX) for integers.
KILN_OM_LOWERING(
    "Div",
    [](const Node& n, const OpContext& context) -> std::string {
      return context.opset < 7 && n.attribute("broadcast")
                 ? "Div with the opset 6 broadcast attribute"
                 : "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op(isFloatType(n.input(0)->dtype()) ? "RealDiv" : "TruncateDiv");
      l.input(o, l.in(0));
      l.input(o, l.in(1));
      l.outputs(o);
    });
void divRaisingRules() {
  for (const char* type : {"RealDiv", "TruncateDiv"})
    addRaising(
        type,
        [](Raiser& r, const OpDef& op) -> Status {
          r.emit(op, "Div", {r.in(op, 0), r.in(op, 1)}, 1);
          return Status::ok();
        },
        __FILE__);
}
const bool kDivRaisingRulesRegistered = (divRaisingRules(), true);

KILN_OM_LOWERING(
    "Mod",
    [](const Node& n, const OpContext& context) -> std::string {
      return context.opset < 10 ? "Mod of opset 9 or earlier" : "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op(nodeInt(n, "fmod", 0) ? "Mod" : "FloorMod");
      l.input(o, l.in(0));
      l.input(o, l.in(1));
      l.outputs(o);
    });
KILN_OM_RAISING("FloorMod", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "Mod", {r.in(op, 0), r.in(op, 1)}, 1);
  return Status::ok();
});
KILN_OM_RAISING("Mod", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "Mod", {r.in(op, 0), r.in(op, 1)}, 1)->setAttribute("fmod", Attribute::ofInt(1));
  return Status::ok();
});
void variadicRules() {
  // Variadic Max/Min/Sum: Maximum/Minimum chains, AddN.
  for (const std::string onnx : {"Max", "Min", "Sum"}) {
    std::string geType = onnx == "Max" ? "Maximum" : onnx == "Min" ? "Minimum" : "AddN";
    addLowering(
        onnx,
        [](const Node& n, const OpContext& context) -> std::string {
          return context.opset < 6 ? n.opType() + " of opset 5 or earlier" : "";
        },
        [geType](Lowerer& l, const Node& n) {
          const Value* y = n.output(0);
          size_t count = n.inputs().size();
          if (count == 1) {
            OpDef* o = l.op("Identity");
            l.input(o, l.in(0));
            l.outputs(o);
            return;
          }
          if (geType == "AddN") {
            OpDef* o = l.op("AddN");
            for (size_t i = 0; i < count; ++i)
              l.input(o, l.in(i));
            (*o->mutable_attr())["N"] = attrI(static_cast<int64_t>(count));
            l.outputs(o);
            return;
          }
          Port acc = l.in(0);
          for (size_t i = 1; i < count; ++i) {
            bool last = i + 1 == count;
            OpDef* o = l.op(geType, last ? "" : std::to_string(i));
            l.input(o, acc);
            l.input(o, l.in(i));
            acc = l.output(o, y->dtype(), last ? y->shape() : Shape(), last ? y->name() : "");
          }
          l.bind(y, acc);
        },
        __FILE__);
    addRaising(
        geType,
        [onnx](Raiser& r, const OpDef& op) -> Status {
          std::vector<Value*> inputs;
          for (int i = 0; i < op.input_size(); ++i)
            inputs.push_back(r.in(op, i));
          r.emit(op, onnx, inputs, 1);
          return Status::ok();
        },
        __FILE__);
  }
}
const bool kVariadicRulesRegistered = (variadicRules(), true);

KILN_OM_LOWERING(
    "Mean",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 6) return "Mean of opset 5 or earlier";
      if (n.output(0)->dtype() != DType::Float32) return "Mean on non-fp32 data";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      const Value* y = n.output(0);
      size_t count = n.inputs().size();
      if (count == 1) {
        OpDef* o = l.op("Identity");
        l.input(o, l.in(0));
        l.outputs(o);
        return;
      }
      OpDef* sum = l.op("AddN", "sum");
      for (size_t i = 0; i < count; ++i)
        l.input(sum, l.in(i));
      (*sum->mutable_attr())["N"] = attrI(static_cast<int64_t>(count));
      Port p = l.output(sum, y->dtype(), y->shape(), "");
      OpDef* mul = l.op("Muls");
      l.input(mul, p);
      (*mul->mutable_attr())["value"] = attrF(1.0f / static_cast<float>(count));
      l.outputs(mul);
    });
void elementwiseRules() {
  for (const char* unary :
       {"Abs",   "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil",
        "Cos",   "Cosh", "Erf",   "Exp",  "Floor", "Log",  "Neg",   "Reciprocal",
        "Round", "Sign", "Sin",   "Sinh", "Sqrt",  "Tan"})
    simple(unary, unary, {}, 1, noCheck,
           __FILE__); // older attributes (consumed_inputs) fail the attribute check
  simple("IsNaN", "IsNan", {}, 9, noCheck, __FILE__);
  simple("Not", "LogicalNot", {}, 1, noCheck, __FILE__);
  for (const std::string binary : {"Add", "Sub", "Mul", "Pow", "Equal", "Less", "Greater"}) {
    // Before opset 7, `broadcast` = 1 lets B broadcast from `axis` of A (default: B's trailing
    // alignment, as numpy): B then gets unit axes after it.
    addLowering(
        binary,
        [](const Node& n, const OpContext& context) -> std::string {
          for (const auto& [name, value] : n.attributes())
            if (context.opset >= 7 || (name != "broadcast" && name != "axis"))
              return fmt::format("attribute '{}' of {}", name, n.opType());
          if (n.attribute("axis") && (rankOf(n.input(0)) < 0 || rankOf(n.input(1)) < 0))
            return n.opType() + " with the opset 6 broadcast axis over unknown ranks";
          // The old exporters that wrote `broadcast` also wrote float64 tensors beyond float32's
          // range, which a chip without double (float64 computed in float32) turns into inf.
          if (n.attribute("broadcast") && n.input(0) && n.input(0)->dtype() == DType::Float64)
            return n.opType() + " with the opset 6 broadcast attribute on float64 data (the chip "
                                "computes float64 in float32)";
          return "";
        },
        [binary](Lowerer& l, const Node& n) {
          Port b = l.in(1);
          if (l.opset < 7 && nodeInt(n, "broadcast", 0) && n.attribute("axis")) {
            const int64_t ra = rankOf(n.input(0)), rb = rankOf(n.input(1));
            int64_t axis = nodeInt(n, "axis", ra - rb);
            if (axis < 0) axis += ra;
            std::vector<int64_t> axes;
            std::vector<Dim> dims = n.input(1)->shape().dims();
            for (int64_t i = rb; i < ra - axis; ++i) {
              axes.push_back(i);
              dims.push_back(Dim::known(1));
            }
            if (!axes.empty()) {
              OpDef* u = l.op("Unsqueeze", "broadcast");
              l.input(u, b);
              (*u->mutable_attr())["axes"] = attrInts(axes);
              b = l.output(u, b.dtype, Shape(dims), "");
            }
          }
          OpDef* o = l.op(binary);
          l.input(o, l.in(0));
          l.input(o, b);
          l.outputs(o);
        },
        __FILE__);
    addRaising(
        binary,
        [binary](Raiser& r, const OpDef& op) -> Status {
          r.emit(op, binary, {r.in(op, 0), r.in(op, 1)}, 1);
          return Status::ok();
        },
        __FILE__);
  }
  // Xor of booleans is NotEqual; BitShift is LeftShift / RightShift.
  addLowering(
      "Xor",
      [](const Node& n, const OpContext& context) -> std::string {
        return context.opset < 7 ? "Xor of opset 6 or earlier" : "";
      },
      [](Lowerer& l, const Node& n) {
        OpDef* o = l.op("NotEqual");
        l.input(o, l.in(0));
        l.input(o, l.in(1));
        l.outputs(o);
      },
      __FILE__);
  addRaising(
      "NotEqual",
      [](Raiser& r, const OpDef& op) -> Status {
        Value* a = r.in(op, 0);
        if (a && a->dtype() == DType::Bool) {
          r.emit(op, "Xor", {a, r.in(op, 1)}, 1);
          return Status::ok();
        }
        Value* equal = r.helper(op.name() + "_equal", "Equal", {a, r.in(op, 1)});
        r.emit(op, "Not", {equal}, 1);
        return Status::ok();
      },
      __FILE__);
  addLowering(
      "BitShift",
      [](const Node& n, const OpContext&) -> std::string {
        std::string direction = nodeString(n, "direction", "");
        return direction == "LEFT" || direction == "RIGHT" ? "" : "BitShift direction";
      },
      [](Lowerer& l, const Node& n) {
        OpDef* o = l.op(nodeString(n, "direction", "") == "LEFT" ? "LeftShift" : "RightShift");
        l.input(o, l.in(0));
        l.input(o, l.in(1));
        l.outputs(o);
      },
      __FILE__);
  for (const std::string type : {"LeftShift", "RightShift"})
    addRaising(
        type,
        [type](Raiser& r, const OpDef& op) -> Status {
          r.emit(op, "BitShift", {r.in(op, 0), r.in(op, 1)}, 1)
              ->setAttribute("direction",
                             Attribute::ofString(type == "LeftShift" ? "LEFT" : "RIGHT"));
          return Status::ok();
        },
        __FILE__);
  simple("LessOrEqual", "LessEqual", {}, 12, noCheck, __FILE__);
  simple("GreaterOrEqual", "GreaterEqual", {}, 12, noCheck, __FILE__);
  simple("And", "LogicalAnd", {}, 7, noCheck, __FILE__);
  simple("Or", "LogicalOr", {}, 7, noCheck, __FILE__);
  simple("Where", "Select", {}, 9, noCheck, __FILE__);
}
const bool kElementwiseRulesRegistered = (elementwiseRules(), true);

// IsInf → IsInf / IsPosInf / IsNegInf: GraphEngine's ops take no detect flags, one op per choice.
KILN_OM_LOWERING(
    "IsInf",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 10) return "IsInf of opset 9 or earlier";
      if (!nodeInt(n, "detect_positive", 1) && !nodeInt(n, "detect_negative", 1))
        return "IsInf detecting neither sign";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      const bool positive = nodeInt(n, "detect_positive", 1),
                 negative = nodeInt(n, "detect_negative", 1);
      OpDef* o = l.op(positive && negative ? "IsInf" : positive ? "IsPosInf" : "IsNegInf");
      l.input(o, l.in(0));
      l.outputs(o);
    });
KILN_OM_RAISING("IsInf", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "IsInf", {r.in(op, 0)}, 1);
  return Status::ok();
});
KILN_OM_RAISING("IsPosInf", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "IsInf", {r.in(op, 0)}, 1)->setAttribute("detect_negative", Attribute::ofInt(0));
  return Status::ok();
});
KILN_OM_RAISING("IsNegInf", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "IsInf", {r.in(op, 0)}, 1)->setAttribute("detect_positive", Attribute::ofInt(0));
  return Status::ok();
});

} // namespace
} // namespace kiln::om
