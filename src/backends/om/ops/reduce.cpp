// .om rules for the reductions (ReduceX, an element-wise op around some), ArgMax / ArgMin, CumSum.
#include <limits>

#include "../om_context.h"

namespace kiln::om {
namespace {

// An axes input computed at run time whose shape says it holds no axis.
bool emptyAxesInput(const Node& n) {
  const Value* axes = n.input(1);
  return axes && !axes->isInitializer() && staticShape(axes) && axes->shape().rank() == 1 &&
         axes->shape()[0].value() == 0;
}
// An axes input computed at run time that holds a known, non-zero count of axes.
bool runtimeAxes(const Node& n) {
  const Value* axes = n.input(1);
  return axes && !axes->isInitializer() && staticShape(axes) && axes->shape().rank() == 1 &&
         axes->shape()[0].value() > 0;
}

// ReduceSum/Mean/Max/Min/Prod → the GE op with an axes input and keep_dims.
void reduceRules() {
  // Reductions without a GraphEngine op of their own: an element-wise op before and/or after.
  struct Composite {
    const char* onnx;
    const char* reduce;
    const char* pre;
    const char* post;
  };
  static const Composite kComposite[] = {
      {"ReduceSum", "ReduceSum", "", ""},       {"ReduceMean", "ReduceMean", "", ""},
      {"ReduceMax", "ReduceMax", "", ""},       {"ReduceMin", "ReduceMin", "", ""},
      {"ReduceProd", "ReduceProd", "", ""},     {"ReduceSumSquare", "ReduceSum", "Square", ""},
      {"ReduceL1", "ReduceSum", "Abs", ""},     {"ReduceL2", "ReduceSum", "Square", "Sqrt"},
      {"ReduceLogSum", "ReduceSum", "", "Log"}, {"ReduceLogSumExp", "ReduceSum", "Exp", "Log"},
  };
  for (const Composite& c : kComposite) {
    const std::string onnx = c.onnx, reduce = c.reduce, pre = c.pre, post = c.post;
    addLowering(
        onnx,
        [](const Node& n, const OpContext&) -> std::string {
          // Axes computed at run time go to the GE op's axes input as they are, when their count
          // is known (GraphEngine reads no axes as "none", ONNX as "all" unless
          // noop_with_empty_axes).
          if (runtimeAxes(n)) return "";
          if (hasInput(n, 1) && !constInts(n, 1) && !emptyAxesInput(n))
            return n.opType() + " axes computed at run time, of unknown count";
          bool axesGiven = (hasInput(n, 1) && !emptyAxesInput(n) && !constInts(n, 1)->empty()) ||
                           nodeInts(n, "axes");
          if (!axesGiven && !nodeInt(n, "noop_with_empty_axes", 0) && rankOf(n.input(0)) < 0)
            return n.opType() + " over all axes of unknown rank";
          if (!axesGiven && nodeInt(n, "noop_with_empty_axes", 0) && n.opType() != "ReduceSum" &&
              n.opType() != "ReduceMean" && n.opType() != "ReduceMax" &&
              n.opType() != "ReduceMin" && n.opType() != "ReduceProd")
            return n.opType() + " with noop_with_empty_axes";
          return "";
        },
        [reduce, pre, post](Lowerer& l, const Node& n) {
          std::vector<int64_t> axes;
          if (runtimeAxes(n))
            ; // the input itself, below
          else if (emptyAxesInput(n))
            ; // an empty axes input: as no axes
          else if (hasInput(n, 1))
            axes = *constInts(n, 1);
          else if (auto a = nodeInts(n, "axes"))
            axes = *a;
          if (axes.empty() && !runtimeAxes(n) && nodeInt(n, "noop_with_empty_axes", 0)) {
            OpDef* o = l.op("Identity");
            l.input(o, l.in(0));
            l.outputs(o);
            return;
          }
          if (axes.empty() && !runtimeAxes(n))
            for (int64_t i = 0; i < rankOf(n.input(0)); ++i)
              axes.push_back(i);
          Port x = l.in(0);
          if (!pre.empty()) {
            OpDef* p = l.op(pre, "pre");
            l.input(p, x);
            x = l.output(p, x.dtype, x.shape, "");
          }
          OpDef* o = l.op(reduce, post.empty() ? "" : "reduce");
          l.input(o, x);
          l.input(o, runtimeAxes(n) ? l.in(1) : l.constInts("axes", axes));
          (*o->mutable_attr())["keep_dims"] = attrB(nodeInt(n, "keepdims", 1) != 0);
          if (post.empty()) {
            l.outputs(o);
            return;
          }
          const Value* y = n.output(0);
          Port r = l.output(o, y->dtype(), y->shape(), "");
          OpDef* q = l.op(post);
          l.input(q, r);
          l.outputs(q);
        },
        __FILE__);
    if (onnx != reduce) continue;
    addRaising(
        onnx,
        [onnx](Raiser& r, const OpDef& op) -> Status {
          Value* axes = r.in(op, 1);
          if (!axes) axes = r.constInts(op.name() + "_axes", getInts(op, "axes"));
          Node* node = r.emit(op, onnx, {r.in(op, 0), axes}, 1);
          node->setAttribute("keepdims", Attribute::ofInt(getB(op, "keep_dims", false)));
          return Status::ok();
        },
        __FILE__);
  }
  for (const std::string onnx : {"ArgMax", "ArgMin"}) {
    std::string geType = onnx == "ArgMax" ? "ArgMaxV2" : "ArgMin";
    addLowering(
        onnx,
        [](const Node& n, const OpContext&) -> std::string {
          int64_t axis = nodeInt(n, "axis", 0), rank = rankOf(n.input(0));
          if (axis < 0 && rank < 0) return n.opType() + " of unknown rank";
          if (nodeInt(n, "select_last_index", 0) &&
              (rank < 0 || !n.input(0)->shape()[axis < 0 ? axis + rank : axis].isStatic()))
            return n.opType() + " select_last_index over an axis of unknown size";
          return "";
        },
        [geType](Lowerer& l, const Node& n) {
          int64_t axis = nodeInt(n, "axis", 0);
          const int64_t rank = rankOf(n.input(0));
          if (axis < 0 && rank >= 0) axis += rank;
          bool keep = nodeInt(n, "keepdims", 1) != 0;
          bool last = nodeInt(n, "select_last_index", 0) != 0;
          const Value* y = n.output(0);
          Port x = l.in(0);
          if (last) {
            // The last extreme is the first one of the reversed axis: D - 1 - that index.
            OpDef* r = l.op("ReverseV2", "reverse");
            l.input(r, x);
            l.input(r, l.constInts("reverse_axis", {axis}));
            x = l.output(r, x.dtype, x.shape, "");
          }
          OpDef* o = l.op(geType, keep || last ? "reduce" : "");
          l.input(o, x);
          l.input(o, l.constInts("dimension", {axis}));
          (*o->mutable_attr())["dtype"] = attrDt(geProtoToCxxDType(ge::proto::DT_INT64));
          if (!keep && !last) {
            l.outputs(o);
            return;
          }
          // GraphEngine's ArgMax drops the axis: keepdims is an Unsqueeze after it.
          std::vector<Dim> reduced;
          if (y->shape().hasRank())
            for (size_t i = 0; i < y->shape().rank(); ++i)
              if (keep ? static_cast<int64_t>(i) != axis : true) reduced.push_back(y->shape()[i]);
          const Shape reducedShape = y->shape().hasRank() ? Shape(reduced) : Shape();
          Port p = l.output(o, DType::Int64, reducedShape, "");
          if (last) {
            const int64_t size = n.input(0)->shape()[axis].value();
            OpDef* sub = l.op("Sub", keep ? "last" : "");
            l.input(sub, l.constant("last_index",
                                    Tensor::fromValues<int64_t>(DType::Int64, {}, {size - 1})));
            l.input(sub, p);
            if (!keep) {
              l.outputs(sub);
              return;
            }
            p = l.output(sub, DType::Int64, reducedShape, "");
          }
          OpDef* u = l.op("Unsqueeze");
          l.input(u, p);
          (*u->mutable_attr())["axes"] = attrInts({axis});
          l.bind(y, l.output(u, y->dtype(), y->shape(), y->name()));
        },
        __FILE__);
    addRaising(
        geType,
        [onnx](Raiser& r, const OpDef& op) -> Status {
          auto axis = r.constIntsIn(op, 1);
          if (!axis || axis->size() != 1) return r.unsupported(op, "dimension is not a constant");
          Node* node = r.emit(op, onnx, {r.in(op, 0)}, 1);
          node->setAttribute("axis", Attribute::ofInt((*axis)[0]));
          node->setAttribute("keepdims", Attribute::ofInt(0));
          return Status::ok();
        },
        __FILE__);
  }
}
const bool kReduceRulesRegistered = (reduceRules(), true);

// ReverseV2 (select_last_index of ArgMax / ArgMin): a Slice with step -1 along each axis.
KILN_OM_RAISING("ReverseV2", [](Raiser& r, const OpDef& op) -> Status {
  auto axes = r.constIntsIn(op, 1);
  if (!axes) return r.unsupported(op, "axis is not a constant");
  const size_t count = axes->size();
  r.emit(op, "Slice",
         {r.in(op, 0), r.constInts(op.name() + "_starts", std::vector<int64_t>(count, -1)),
          r.constInts(op.name() + "_ends",
                      std::vector<int64_t>(count, std::numeric_limits<int64_t>::min())),
          r.constInts(op.name() + "_axes", *axes),
          r.constInts(op.name() + "_steps", std::vector<int64_t>(count, -1))},
         1);
  return Status::ok();
});
// Square: the element-wise step of ReduceSumSquare / ReduceL2.
KILN_OM_RAISING("Square", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "Mul", {r.in(op, 0), r.in(op, 0)}, 1);
  return Status::ok();
});
// CumSum → Cumsum: GE declares exclusive / reverse as bools where ONNX has ints.
KILN_OM_LOWERING(
    "CumSum",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 11)
        return fmt::format("CumSum of opset {} (kiln lowers opset 11 and later)", context.opset);
      for (const auto& [name, value] : n.attributes())
        if (name != "exclusive" && name != "reverse")
          return fmt::format("attribute '{}' of CumSum", name);
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("Cumsum");
      l.input(o, l.in(0));
      l.input(o, l.in(1));
      (*o->mutable_attr())["exclusive"] = attrB(nodeInt(n, "exclusive", 0) != 0);
      (*o->mutable_attr())["reverse"] = attrB(nodeInt(n, "reverse", 0) != 0);
      l.outputs(o);
    });
KILN_OM_RAISING("Cumsum", [](Raiser& r, const OpDef& op) -> Status {
  Node* node = r.emit(op, "CumSum", {r.in(op, 0), r.in(op, 1)});
  node->setAttribute("exclusive", Attribute::ofInt(getB(op, "exclusive", false) ? 1 : 0));
  node->setAttribute("reverse", Attribute::ofInt(getB(op, "reverse", false) ? 1 : 0));
  return Status::ok();
});

} // namespace
} // namespace kiln::om
