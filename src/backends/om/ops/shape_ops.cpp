// .om rules for the shape-moving ops: Reshape, Transpose, Concat, Split, Squeeze, Slice, Pad, ...
#include <limits>

#include "../om_context.h"
#include "kiln/runtime/tensor_util.h"

namespace kiln::om {
namespace {

KILN_OM_LOWERING(
    "Reshape",
    [](const Node& n, const OpContext&) -> std::string {
      if (staticShape(n.output(0))) return "";
      if (nodeInt(n, "allowzero", 0)) return "Reshape allowzero with a dynamic result";
      auto shape = constInts(n, 1);
      if (!shape) return "Reshape to a computed shape whose result is dynamic";
      for (int64_t d : *shape)
        if (d == 0) return "Reshape copying dims (0) with a dynamic result";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("Reshape");
      l.input(o, l.in(0));
      // ATC settles the target shape: the static result, not the ONNX spec.
      // With allowzero a 0 is a literal zero dim, as GraphEngine reads it.
      auto given = constInts(n, 1);
      bool literalZero =
          nodeInt(n, "allowzero", 0) && given && std::count(given->begin(), given->end(), 0) > 0;
      if (staticShape(n.output(0)) && !literalZero)
        l.input(o, l.constInts("shape", n.output(0)->shape().staticDims()));
      else
        l.input(o, l.in(1));
      (*o->mutable_attr())["axis"] = attrI(0);
      (*o->mutable_attr())["num_axes"] = attrI(-1);
      l.outputs(o);
    });
KILN_OM_RAISING("Reshape", [](Raiser& r, const OpDef& op) -> Status {
  // GraphEngine's Reshape takes 0 as a zero-size dim: ONNX's allowzero.
  r.emit(op, "Reshape", {r.in(op, 0), r.in(op, 1)}, 1)
      ->setAttribute("allowzero", Attribute::ofInt(1));
  return Status::ok();
});
KILN_OM_LOWERING(
    "Transpose",
    [](const Node& n, const OpContext&) -> std::string {
      if (!nodeInts(n, "perm") && rankOf(n.input(0)) < 0) return "Transpose of unknown rank";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      int64_t rank = rankOf(n.input(0));
      std::vector<int64_t> perm;
      if (auto p = nodeInts(n, "perm"))
        perm = *p;
      else
        for (int64_t i = rank - 1; i >= 0; --i)
          perm.push_back(i);
      OpDef* o = l.op("Transpose");
      l.input(o, l.in(0));
      l.input(o, l.constInts("perm", perm));
      l.outputs(o);
    });
KILN_OM_RAISING("Transpose", [](Raiser& r, const OpDef& op) -> Status {
  auto perm = r.constIntsIn(op, 1);
  if (!perm) return r.unsupported(op, "perm is not a constant");
  r.emit(op, "Transpose", {r.in(op, 0)}, 1)->setAttribute("perm", Attribute::ofInts(*perm));
  return Status::ok();
});
KILN_OM_RAISING("TransposeD", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "Transpose", {r.in(op, 0)}, 1)
      ->setAttribute("perm", Attribute::ofInts(getInts(op, "perm")));
  return Status::ok();
});
KILN_OM_LOWERING("Concat", noCheck, [](Lowerer& l, const Node& n) {
  OpDef* o = l.op("ConcatD");
  for (size_t i = 0; i < n.inputs().size(); ++i)
    l.input(o, l.in(i));
  (*o->mutable_attr())["concat_dim"] = attrI(nodeInt(n, "axis", 0));
  (*o->mutable_attr())["N"] = attrI(static_cast<int64_t>(n.inputs().size()));
  l.outputs(o);
});
KILN_OM_RAISING("ConcatD", [](Raiser& r, const OpDef& op) -> Status {
  std::vector<Value*> inputs;
  for (int i = 0; i < op.input_size(); ++i)
    inputs.push_back(r.in(op, i));
  r.emit(op, "Concat", inputs, 1)
      ->setAttribute("axis", Attribute::ofInt(getI(op, "concat_dim", 0)));
  return Status::ok();
});
KILN_OM_LOWERING(
    "Split",
    [](const Node& n, const OpContext&) -> std::string {
      int64_t r = rankOf(n.input(0));
      if (r < 0) return "Split of unknown rank";
      int64_t axis = nodeInt(n, "axis", 0);
      if (axis < 0) axis += r;
      for (const Value* o : n.outputs())
        if (!o || !o->shape().hasRank() || !o->shape()[size_t(axis)].isStatic())
          return "Split whose part sizes are not static";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      int64_t r = rankOf(n.input(0));
      int64_t axis = nodeInt(n, "axis", 0);
      if (axis < 0) axis += r;
      std::vector<int64_t> sizes;
      for (const Value* o : n.outputs())
        sizes.push_back(o->shape()[size_t(axis)].value());
      // SplitV (sizes and axis as constant inputs): the public IR registers no SplitVD.
      OpDef* o = l.op("SplitV");
      l.input(o, l.in(0));
      l.input(o, l.constInts("size_splits", sizes));
      l.input(o, l.constant("split_dim",
                            Tensor::fromValues<int32_t>(DType::Int32, {}, {int32_t(axis)})));
      (*o->mutable_attr())["num_split"] = attrI(static_cast<int64_t>(sizes.size()));
      l.outputs(o);
    });
KILN_OM_RAISING("SplitV", [](Raiser& r, const OpDef& op) -> Status {
  auto axis = r.constIntsIn(op, 2);
  if (!axis || axis->size() != 1) return r.unsupported(op, "SplitV with a computed split_dim");
  Node* node = r.emit(op, "Split", {r.in(op, 0), r.in(op, 1)});
  node->setAttribute("axis", Attribute::ofInt((*axis)[0]));
  return Status::ok();
});
KILN_OM_RAISING("SplitVD", [](Raiser& r, const OpDef& op) -> Status {
  Node* node = r.emit(op, "Split",
                      {r.in(op, 0), r.constInts(op.name() + "_split", getInts(op, "size_splits"))});
  node->setAttribute("axis", Attribute::ofInt(getI(op, "split_dim", 0)));
  return Status::ok();
});
// Squeeze / Unsqueeze: axes (attribute before opset 13, input after) become the attribute.
KILN_OM_LOWERING(
    "Squeeze",
    [](const Node& n, const OpContext&) -> std::string {
      if (hasInput(n, 1) && !constInts(n, 1)) return ""; // SqueezeV3 takes them as an input
      if (!hasInput(n, 1) && !nodeInts(n, "axes") && !staticShape(n.input(0)))
        return "Squeeze without axes of a dynamic shape";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      if (hasInput(n, 1) && !constInts(n, 1)) {
        OpDef* o = l.op("SqueezeV3");
        l.input(o, l.in(0));
        l.input(o, l.in(1));
        l.outputs(o);
        return;
      }
      std::vector<int64_t> axes;
      if (hasInput(n, 1))
        axes = *constInts(n, 1);
      else if (auto a = nodeInts(n, "axes"))
        axes = *a;
      else {
        auto dims = n.input(0)->shape().staticDims();
        for (size_t i = 0; i < dims.size(); ++i)
          if (dims[i] == 1) axes.push_back(static_cast<int64_t>(i));
      }
      OpDef* o = l.op("Squeeze");
      l.input(o, l.in(0));
      (*o->mutable_attr())["axis"] = attrInts(axes);
      l.outputs(o);
    });
KILN_OM_RAISING("Squeeze", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "Squeeze", {r.in(op, 0), r.constInts(op.name() + "_axes", getInts(op, "axis"))}, 1);
  return Status::ok();
});
KILN_OM_LOWERING(
    "Unsqueeze",
    [](const Node& n, const OpContext&) -> std::string {
      if (hasInput(n, 1) && !constInts(n, 1) && rankOf(n.output(0)) < 0)
        return "Unsqueeze axes computed at run time, of an unknown result rank";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      if (hasInput(n, 1) && !constInts(n, 1)) { // UnsqueezeV3 takes them as an input
        OpDef* o = l.op("UnsqueezeV3");
        l.input(o, l.in(0));
        l.input(o, l.in(1));
        l.outputs(o);
        return;
      }
      std::vector<int64_t> axes =
          hasInput(n, 1) ? *constInts(n, 1) : nodeInts(n, "axes").value_or(std::vector<int64_t>{});
      OpDef* o = l.op("Unsqueeze");
      l.input(o, l.in(0));
      (*o->mutable_attr())["axes"] = attrInts(axes);
      l.outputs(o);
    });
// SqueezeV3 / UnsqueezeV3: ONNX's opset 13 forms (axes as an int64 input).
KILN_OM_RAISING("SqueezeV3", [](Raiser& r, const OpDef& op) -> Status {
  std::vector<Value*> inputs{r.in(op, 0)};
  if (Value* axes = r.in(op, 1)) inputs.push_back(axes);
  r.emit(op, "Squeeze", inputs, 1);
  return Status::ok();
});
KILN_OM_RAISING("UnsqueezeV3", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "Unsqueeze", {r.in(op, 0), r.in(op, 1)}, 1);
  return Status::ok();
});
KILN_OM_RAISING("Unsqueeze", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "Unsqueeze", {r.in(op, 0), r.constInts(op.name() + "_axes", getInts(op, "axes"))}, 1);
  return Status::ok();
});
// Slice → StridedSliceV2 (begin, end, axes, strides inputs).
KILN_OM_LOWERING(
    "Slice",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 10 && !nodeInts(n, "starts")) return "Slice without starts";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("StridedSliceV2");
      l.input(o, l.in(0));
      if (l.opset < 10) {
        l.input(o, l.constInts("begin", *nodeInts(n, "starts")));
        l.input(o, l.constInts("end", *nodeInts(n, "ends")));
        if (auto axes = nodeInts(n, "axes"))
          l.input(o, l.constInts("axes", *axes));
        else
          l.input(o, Port{});
        l.input(o, Port{});
      } else {
        for (size_t i = 1; i < 5; ++i)
          l.input(o, l.in(i));
      }
      l.outputs(o);
    });
KILN_OM_RAISING("StridedSliceV2", [](Raiser& r, const OpDef& op) -> Status {
  std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1), r.in(op, 2), r.in(op, 3), r.in(op, 4)};
  while (!inputs.empty() && !inputs.back())
    inputs.pop_back();
  r.emit(op, "Slice", inputs, 1);
  return Status::ok();
});
// Pad → PadV3 (paddings in ONNX's begin-then-end order: paddings_contiguous false).
KILN_OM_LOWERING(
    "Pad",
    [](const Node& n, const OpContext& context) -> std::string {
      if (hasInput(n, 3)) return "Pad with axes";
      std::string mode = nodeString(n, "mode", "constant");
      if (mode != "constant" && mode != "reflect" && mode != "edge") return "Pad mode " + mode;
      if (context.opset < 11 && n.input(0)->dtype() != DType::Float32 &&
          n.input(0)->dtype() != DType::Float64 && n.input(0)->dtype() != DType::Int64 &&
          n.input(0)->dtype() != DType::Int32)
        return "opset < 11 Pad on this data type";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("PadV3");
      l.input(o, l.in(0));
      if (l.opset < 11) {
        l.input(o, l.constInts("paddings", nodeInts(n, "pads").value_or(std::vector<int64_t>{})));
        float value = nodeFloat(n, "value", 0.0f);
        l.input(o, l.constScalar("constant_values", n.input(0)->dtype(), value));
      } else {
        l.input(o, l.in(1));
        l.input(o, l.in(2));
      }
      (*o->mutable_attr())["mode"] = attrS(nodeString(n, "mode", "constant"));
      (*o->mutable_attr())["paddings_contiguous"] = attrB(false);
      l.outputs(o);
    });
KILN_OM_RAISING("PadV3", [](Raiser& r, const OpDef& op) -> Status {
  if (getB(op, "paddings_contiguous", true))
    return r.unsupported(op, "paddings in [begin, end] pairs");
  std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1)};
  if (Value* c = r.in(op, 2)) inputs.push_back(c);
  r.emit(op, "Pad", inputs, 1)
      ->setAttribute("mode", Attribute::ofString(getS(op, "mode", "constant")));
  return Status::ok();
});
KILN_OM_LOWERING(
    "Trilu",
    [](const Node& n, const OpContext&) -> std::string {
      const Value* x = n.input(0);
      if (hasInput(n, 1) && !constInts(n, 1) &&
          (rankOf(x) < 2 || !x->shape()[rankOf(x) - 2].isStatic() ||
           !x->shape()[rankOf(x) - 1].isStatic()))
        return "Trilu k computed at run time over matrices of unknown size";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      const bool upper = nodeInt(n, "upper", 1) != 0;
      if (hasInput(n, 1) && !constInts(n, 1)) {
        // k at run time: keep x where (column - row) >= k (upper) or <= k (lower), else 0; the
        // column - row table is a constant of the matrix size.
        const Value* x = n.input(0);
        const int64_t rank = rankOf(x), rows = x->shape()[rank - 2].value(),
                      cols = x->shape()[rank - 1].value();
        std::vector<int64_t> offsets;
        for (int64_t i = 0; i < rows; ++i)
          for (int64_t j = 0; j < cols; ++j)
            offsets.push_back(j - i);
        OpDef* cmp = l.op(upper ? "GreaterEqual" : "LessEqual", "mask");
        l.input(cmp, l.constant("diagonal_offsets",
                                Tensor::fromValues<int64_t>(DType::Int64, {rows, cols}, offsets)));
        l.input(cmp, l.in(1));
        Port mask = l.output(cmp, DType::Bool, Shape::fromStatic({rows, cols}), "");
        OpDef* o = l.op("SelectV2");
        l.input(o, mask);
        l.input(o, l.in(0));
        l.input(o, l.constScalar("zero", x->dtype(), 0.0));
        l.outputs(o);
        return;
      }
      int64_t k = hasInput(n, 1) ? constInts(n, 1)->at(0) : 0;
      OpDef* o = l.op(upper ? "Triu" : "Tril");
      l.input(o, l.in(0));
      (*o->mutable_attr())["diagonal"] = attrI(k);
      l.outputs(o);
    });
KILN_OM_RAISING("SelectV2", [](Raiser& r, const OpDef& op) -> Status {
  r.emit(op, "Where", {r.in(op, 0), r.in(op, 1), r.in(op, 2)}, 1);
  return Status::ok();
});
void trilRaisingRules() {
  for (const char* type : {"Triu", "Tril"})
    addRaising(
        type,
        [](Raiser& r, const OpDef& op) -> Status {
          Value* k = r.constTensor(
              op.name() + "_k",
              Tensor::fromValues<int64_t>(DType::Int64, {}, {getI(op, "diagonal", 0)}));
          r.emit(op, "Trilu", {r.in(op, 0), k}, 1)
              ->setAttribute("upper", Attribute::ofInt(op.type() == "Triu"));
          return Status::ok();
        },
        __FILE__);
}
const bool kTrilRaisingRulesRegistered = (trilRaisingRules(), true);

// ConstantOfShape → Fill (dims, value): the shape may come at run time; a constant shape was
// already folded by the pipeline.
KILN_OM_LOWERING(
    "ConstantOfShape",
    [](const Node& n, const OpContext&) -> std::string {
      const Attribute* v = n.attribute("value");
      if (v && (v->kind() != AttrKind::Tensor || v->asTensor().elementCount() != 1 ||
                v->asTensor().dtype() == DType::String))
        return "ConstantOfShape whose value is not one number";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      const Attribute* v = n.attribute("value");
      Tensor value = v ? Tensor(v->asTensor().dtype(), {}, v->asTensor().buffer())
                       : Tensor::fromValues<float>(DType::Float32, {}, {0.0f});
      OpDef* o = l.op("Fill");
      l.input(o, l.in(0));
      l.input(o, l.constant("value", value));
      l.outputs(o);
    });
KILN_OM_RAISING("Fill", [](Raiser& r, const OpDef& op) -> Status {
  Value* value = r.in(op, 1);
  if (!value || !value->isInitializer() || value->initializer().elementCount() != 1)
    return r.unsupported(op, "value is not a constant scalar");
  const Tensor& t = value->initializer();
  r.emit(op, "ConstantOfShape", {r.in(op, 0)}, 1)
      ->setAttribute("value", Attribute::ofTensor(Tensor(t.dtype(), {1}, t.buffer())));
  return Status::ok();
});
// EyeLike depends on its input's shape and type alone: with a static shape it is a constant.
KILN_OM_LOWERING(
    "EyeLike",
    [](const Node& n, const OpContext&) -> std::string {
      if (!staticShape(n.input(0)) || rankOf(n.input(0)) != 2)
        return "EyeLike of a shape that is not a static 2-D one";
      if (n.output(0)->dtype() == DType::String || n.output(0)->dtype() == DType::Undefined)
        return "EyeLike of this type";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      auto dims = n.input(0)->shape().staticDims();
      const int64_t k = nodeInt(n, "k", 0);
      std::vector<double> values(static_cast<size_t>(dims[0] * dims[1]), 0.0);
      for (int64_t i = 0; i < dims[0]; ++i)
        if (i + k >= 0 && i + k < dims[1]) values[static_cast<size_t>(i * dims[1] + i + k)] = 1.0;
      auto eye = rt::castTensor(Tensor::fromValues<double>(DType::Float64, dims, values),
                                n.output(0)->dtype());
      l.bind(n.output(0), l.constant("eye", *eye));
    });
// OneHot → GraphEngine's OneHot (indices, depth, on_value, off_value): ONNX's negative indices
// in [-depth, -1] count from depth (GraphEngine leaves them all off), so they get depth added
// (Select(Less(i, 0), Add(i, depth), i)); an index outside [-depth, depth) stays outside
// [0, depth) and its row stays all off, as ONNX says (a FloorMod wrapped it onto a class).
// [off, on] are picked out of `values` with GatherV2.
KILN_OM_LOWERING(
    "OneHot",
    [](const Node& n, const OpContext& context) -> std::string {
      if (context.opset < 9) return "OneHot of opset 8 or earlier";
      for (const auto& [name, value] : n.attributes())
        if (name != "axis") return fmt::format("attribute '{}' of OneHot", name);
      if (rankOf(n.input(1)) > 1) return "OneHot with a depth that is not a scalar";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      auto toInt64 = [&](size_t i, const std::string& suffix) {
        Port p = l.in(i);
        if (p.dtype == DType::Int64) return p;
        OpDef* c = l.op("Cast", suffix);
        l.input(c, p);
        (*c->mutable_attr())["dst_type"] = attrI(geProtoToCxxDType(ge::proto::DT_INT64));
        return l.output(c, DType::Int64, p.shape, "");
      };
      Port indices = toInt64(0, "indices");
      Port depth = toInt64(1, "depth");
      if (rankOf(n.input(1)) != 0) { // [1] → a scalar
        OpDef* r = l.op("Reshape", "depth_scalar");
        l.input(r, depth);
        l.input(r, l.constInts("scalar_shape", {}));
        depth = l.output(r, DType::Int64, Shape::fromStatic({}), "");
      }
      OpDef* negative = l.op("Less", "negative");
      l.input(negative, indices);
      l.input(negative, l.constant("zero", Tensor::fromValues<int64_t>(DType::Int64, {}, {0})));
      Port isNegative = l.output(negative, DType::Bool, indices.shape, "");
      OpDef* shift = l.op("Add", "from_depth");
      l.input(shift, indices);
      l.input(shift, depth);
      Port shifted = l.output(shift, DType::Int64, indices.shape, "");
      OpDef* pickIndex = l.op("Select", "wrap");
      l.input(pickIndex, isNegative);
      l.input(pickIndex, shifted);
      l.input(pickIndex, indices);
      indices = l.output(pickIndex, DType::Int64, indices.shape, "");
      auto pick = [&](int64_t which, const std::string& suffix) {
        OpDef* g = l.op("GatherV2", suffix);
        l.input(g, l.in(2));
        l.input(g, l.constant(suffix + "_index",
                              Tensor::fromValues<int64_t>(DType::Int64, {}, {which})));
        l.input(g, l.constInts(suffix + "_axis", {0}));
        (*g->mutable_attr())["batch_dims"] = attrI(0);
        return l.output(g, n.input(2)->dtype(), Shape::fromStatic({}), "");
      };
      Port off = pick(0, "off"), on = pick(1, "on");
      OpDef* o = l.op("OneHot");
      l.input(o, indices);
      l.input(o, depth);
      l.input(o, on);
      l.input(o, off);
      (*o->mutable_attr())["axis"] = attrI(nodeInt(n, "axis", -1));
      l.outputs(o);
    });
KILN_OM_RAISING("OneHot", [](Raiser& r, const OpDef& op) -> Status {
  // GraphEngine leaves a negative index's row all off where ONNX counts it from depth: a negative
  // index becomes one past any depth, which ONNX also leaves all off.
  Value* indices = r.in(op, 0);
  if (indices && (indices->dtype() == DType::Int64 || indices->dtype() == DType::Int32)) {
    auto scalar = [&](const std::string& base, int64_t v) {
      return r.constTensor(
          op.name() + base,
          *rt::castTensor(Tensor::fromValues<int64_t>(DType::Int64, {}, {v}), indices->dtype()));
    };
    Value* negative = r.helper(op.name() + "_negative", "Less", {indices, scalar("_zero", 0)});
    indices = r.helper(op.name() + "_indices", "Where",
                       {negative, scalar("_beyond", std::numeric_limits<int32_t>::max()), indices});
  }
  Value* axis0 = r.constInts(op.name() + "_axis0", {0});
  Value* off = r.helper(op.name() + "_off", "Unsqueeze", {r.in(op, 3), axis0});
  Value* on = r.helper(op.name() + "_on", "Unsqueeze", {r.in(op, 2), axis0});
  Value* values = r.helper(op.name() + "_values", "Concat", {off, on});
  values->producer()->setAttribute("axis", Attribute::ofInt(0));
  r.emit(op, "OneHot", {indices, r.in(op, 1), values}, 1)
      ->setAttribute("axis", Attribute::ofInt(getI(op, "axis", -1)));
  return Status::ok();
});
// ReverseSequence → ReverseSequence (x, seq_lengths) with seq_dim / batch_dim: ONNX's
// time_axis (default 0) / batch_axis (default 1), always written.
KILN_OM_LOWERING(
    "ReverseSequence",
    [](const Node& n, const OpContext&) -> std::string {
      for (const auto& [name, value] : n.attributes())
        if (name != "time_axis" && name != "batch_axis")
          return fmt::format("attribute '{}' of ReverseSequence", name);
      return "";
    },
    [](Lowerer& l, const Node& n) {
      OpDef* o = l.op("ReverseSequence");
      l.input(o, l.in(0));
      l.input(o, l.in(1));
      (*o->mutable_attr())["seq_dim"] = attrI(nodeInt(n, "time_axis", 0));
      (*o->mutable_attr())["batch_dim"] = attrI(nodeInt(n, "batch_axis", 1));
      l.outputs(o);
    });
KILN_OM_RAISING("ReverseSequence", [](Raiser& r, const OpDef& op) -> Status {
  Node* node = r.emit(op, "ReverseSequence", {r.in(op, 0), r.in(op, 1)}, 1);
  node->setAttribute("time_axis", Attribute::ofInt(getI(op, "seq_dim", 0)));
  node->setAttribute("batch_axis", Attribute::ofInt(getI(op, "batch_dim", 0)));
  return Status::ok();
});
void shapeRules() {
  simple("Flatten", "Flatten", {{"axis", "axis"}}, 1, noCheck, __FILE__);
  simple("Expand", "Expand", {}, 8, noCheck, __FILE__);
  simple("Tile", "Tile", {}, 6, noCheck, __FILE__);
  simple("Range", "Range", {}, 11, noCheck, __FILE__);
  simple("NonZero", "NonZero", {}, 9, noCheck, __FILE__);
  simple("DepthToSpace", "DepthToSpace", {{"blocksize", "block_size"}, {"mode", "mode"}}, 11,
         noCheck, __FILE__);
  simple("SpaceToDepth", "SpaceToDepth", {{"blocksize", "block_size"}}, 1, noCheck, __FILE__);
}
const bool kShapeRulesRegistered = (shapeRules(), true);

} // namespace
} // namespace kiln::om
