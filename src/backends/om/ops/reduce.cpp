// .om rules for the reductions (ReduceX, an element-wise op around some), ArgMax / ArgMin, CumSum.
#include "../om_context.h"

namespace kiln::om {
namespace {

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
          if (hasInput(n, 1) && !constInts(n, 1)) return n.opType() + " axes computed at run time";
          bool axesGiven = (hasInput(n, 1) && !constInts(n, 1)->empty()) || nodeInts(n, "axes");
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
          if (hasInput(n, 1))
            axes = *constInts(n, 1);
          else if (auto a = nodeInts(n, "axes"))
            axes = *a;
          if (axes.empty() && nodeInt(n, "noop_with_empty_axes", 0)) {
            OpDef* o = l.op("Identity");
            l.input(o, l.in(0));
            l.outputs(o);
            return;
          }
          if (axes.empty())
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
          l.input(o, l.constInts("axes", axes));
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
          if (nodeInt(n, "select_last_index", 0)) return n.opType() + " select_last_index";
          if (nodeInt(n, "axis", 0) < 0 && rankOf(n.input(0)) < 0)
            return n.opType() + " of unknown rank";
          return "";
        },
        [geType](Lowerer& l, const Node& n) {
          int64_t axis = nodeInt(n, "axis", 0);
          bool keep = nodeInt(n, "keepdims", 1) != 0;
          const Value* y = n.output(0);
          OpDef* o = l.op(geType, keep ? "reduce" : "");
          l.input(o, l.in(0));
          l.input(o, l.constInts("dimension", {axis}));
          (*o->mutable_attr())["dtype"] = attrI(geProtoToCxxDType(ge::proto::DT_INT64));
          if (!keep) {
            l.outputs(o);
            return;
          }
          // GraphEngine's ArgMax drops the axis: keepdims is an Unsqueeze after it.
          std::vector<Dim> reduced;
          if (y->shape().hasRank())
            for (size_t i = 0; i < y->shape().rank(); ++i)
              if (static_cast<int64_t>(i) != (axis < 0 ? axis + int64_t(y->shape().rank()) : axis))
                reduced.push_back(y->shape()[i]);
          Port p = l.output(o, DType::Int64, y->shape().hasRank() ? Shape(reduced) : Shape(), "");
          OpDef* u = l.op("Unsqueeze");
          l.input(u, p);
          int64_t rank = rankOf(n.input(0));
          (*u->mutable_attr())["axes"] = attrInts({axis < 0 ? axis + rank : axis});
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
