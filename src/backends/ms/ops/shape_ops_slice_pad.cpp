// .ms rules of the shape_ops family, slicing / padding / generating half (Slice, Pad, Tile, Expand,
// Range, ConstantOfShape; read back: StridedSlice, SliceFusion, TileFusion, BroadcastTo, PadFusion,
// Fill, OneHot, ...). Lowering and raising side by side; the layout ops are in shape_ops.cpp.
#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <numeric>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/attributes.h"
#include "shape_ops.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

std::string checkRange(const Node& n, const lowering::OpContext& context) {
  for (const Value* v : n.inputs())
    if (!v) return "an omitted input";
  return checkShapeOp(n, context);
}

std::string checkSlice(const Node& n, const lowering::OpContext& context) {
  if (context.opset < 10 && (!n.attribute("starts") || !n.attribute("ends")))
    return "missing starts/ends";
  return checkShapeOp(n, context);
}

Status lowerSlice(LoweringContext& ctx, const Node& n) {
  auto shape = ctx.staticShape(n.input(0));
  const int rank = ctx.rankOf(n.input(0));
  if (rank < 0) return dynamicShape("Slice over an unknown rank");
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    KILN_ASSIGN_OR_RETURN(starts, ctx.intsOf(n, "starts", 99));
    KILN_ASSIGN_OR_RETURN(ends, ctx.intsOf(n, "ends", 99));
    KILN_ASSIGN_OR_RETURN(axes, ctx.intsOf(n, "axes", 99));
  } else {
    KILN_ASSIGN_OR_RETURN(starts, ctx.intsOf(n, "starts", 1));
    KILN_ASSIGN_OR_RETURN(ends, ctx.intsOf(n, "ends", 2));
    if (n.input(3)) {
      KILN_ASSIGN_OR_RETURN(axes, ctx.intsOf(n, "axes", 3));
    }
    if (n.input(4)) {
      KILN_ASSIGN_OR_RETURN(steps, ctx.intsOf(n, "steps", 4));
    }
    if (!starts || !ends || (n.input(3) && !axes) || (n.input(4) && !steps))
      return lowerRuntimeSlice(ctx, n, rank);
  }
  if (!starts || !ends) return bad("missing starts/ends");
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0), end(static_cast<size_t>(rank), 0),
      stride(static_cast<size_t>(rank), 1);
  int64_t beginMask = 0, endMask = 0;
  for (int i = 0; i < rank; ++i) {
    beginMask |= int64_t{1} << i;
    endMask |= int64_t{1} << i;
  }
  // Whether each negative-step start is counted from the end (within any dim) or below its
  // axis' known dim.
  auto negativeStepStartsInside = [&] {
    for (size_t k = 0; k < starts->size(); ++k) {
      if (!steps || (*steps)[k] >= 0 || (*starts)[k] < 0) continue;
      int64_t ax = axes ? (*axes)[k] : static_cast<int64_t>(k);
      if (ax < 0) ax += rank;
      if (ax < 0 || ax >= rank) return false;
      auto dim = ctx.dimOf(n.input(0), static_cast<size_t>(ax));
      if (!dim || (*starts)[k] >= *dim) return false;
    }
    return true;
  };
  for (size_t k = 0; k < starts->size(); ++k) {
    int64_t ax = axes ? (*axes)[k] : static_cast<int64_t>(k);
    if (ax < 0) ax += rank;
    if (ax < 0 || ax >= rank) return bad("axis {} out of range", ax);
    const size_t a = static_cast<size_t>(ax);
    const int64_t step = steps ? (*steps)[k] : 1;
    if (step == 0) return bad("step 0");
    int64_t s = (*starts)[k], e = (*ends)[k];
    auto dim = shape ? std::optional<int64_t>((*shape)[a]) : ctx.dimOf(n.input(0), a);
    if (dim) {
      // Clamp as ONNX does, so no INT64 sentinels reach the int32 begin/end tensors.
      const int64_t d = *dim;
      if (s < 0) s += d;
      if (e < 0) e += d;
      if (step > 0) {
        s = std::clamp<int64_t>(s, 0, d);
        e = std::clamp<int64_t>(e, 0, d);
      } else {
        s = std::clamp<int64_t>(s, 0, d - 1);
        e = std::clamp<int64_t>(e, -1, d - 1);
      }
      begin[a] = s;
      beginMask &= ~(int64_t{1} << a);
      if (step < 0 && e < 0) {
        end[a] = 0; // runs past index 0: the end mask says "to the start"
      } else {
        end[a] = e;
        endMask &= ~(int64_t{1} << a);
      }
    } else {
      // Counted from an unknown end: the five-input StridedSlice resolves negative starts and
      // ends against the run-time dim and clamps them, as ONNX does, except that it keeps a
      // negative step's start past the axis' end (lowerRuntimeSlice caps it on static shapes
      // only): every negative-step start must lie inside its axis.
      if ((s < 0 || e < 0 || step < 0) && ctx.opset() >= 10 && negativeStepStartsInside())
        return lowerRuntimeSlice(ctx, n, rank);
      if (s < 0 || e < 0 || step < 0)
        return dynamicShape("negative starts/ends/steps over an unknown dim");
      begin[a] = s;
      beginMask &= ~(int64_t{1} << a);
      if (e < std::numeric_limits<int32_t>::max()) {
        end[a] = e;
        endMask &= ~(int64_t{1} << a);
      }
    }
    stride[a] = step;
  }
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  const std::string base = n.output(0)->name();
  uint32_t tb = ctx.intConst(begin, base + "_begin");
  uint32_t te = ctx.intConst(end, base + "_end");
  uint32_t ts = ctx.intConst(stride, base + "_strides");
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_StridedSlice,
           [=](FBB& b) { return fb::CreateStridedSlice(b, beginMask, endMask, 0, 0, 0).Union(); },
           {*x, tb, te, ts}, {*y});
  return Status::ok();
}

// Pad mode 'edge', which no .ms PaddingMode is: lowered as Gathers (lowerEdgePad).
constexpr int kEdgeMode = -1;

// Pad's mode as the .ms PaddingMode (or kEdgeMode); "" reason when it has one.
std::string padMode(const Node& n, int* mode) {
  auto name = ops::stringAttr(n, "mode", "constant");
  if (!name) return name.status().message();
  if (*name == "constant")
    *mode = fb::PaddingMode_CONSTANT;
  else if (*name == "reflect")
    *mode = fb::PaddingMode_REFLECT;
  else if (*name == "edge")
    *mode = kEdgeMode;
  else
    return fmt::format("mode '{}' (.ms pads take constant, reflect or edge)", *name);
  return {};
}

// Pad mode 'edge' → one Gather per padded axis, indices = each output position's source clamped
// into the axis: [0]·b ++ 0..n−1 ++ [n−1]·e (exact: every output element copies one input element).
// Known `pads` ([begin…, end…]): constant indices, only padded axes gathered. Fed at run time
// (`pads` empty): every axis gathers Range(−b, n + e) clamped into [0, n − 1] (Maximum, Minimum),
// b and e from the int32 pads (also crops for negative pads). Every dim of x must be static.
Status lowerEdgePad(LoweringContext& ctx, const Node& n, const std::vector<int64_t>& pads) {
  auto shape = ctx.staticShape(n.input(0));
  if (!shape) return dynamicShape("edge padding needs the input's static shape");
  const int rank = static_cast<int>(shape->size());
  const bool runtime = pads.empty();
  std::vector<int> axes;
  for (int i = 0; i < rank; ++i)
    if (runtime || pads[size_t(i)] != 0 || pads[size_t(i + rank)] != 0) axes.push_back(i);
  for (int i : axes)
    if ((*shape)[size_t(i)] == 0) return bad("edge padding of the empty axis {}", i);
  Chain ch(ctx, n);
  auto xin = ctx.input(n.input(0), Layout::Onnx);
  if (!xin) return xin.status();
  uint32_t cur = *xin;
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (axes.empty()) { // nothing padded: a copy through Reshape, so the output is produced
    ch.op(fb::PrimitiveType_Reshape, {cur, ctx.intConst(*shape, n.output(0)->name() + "_shape")},
          *y);
    return Status::ok();
  }
  std::optional<uint32_t> p32;
  if (runtime) {
    auto p = ctx.int32Input(n.input(1));
    if (!p) return p.status();
    p32 = *p;
  }
  std::vector<int32_t> dims(shape->begin(), shape->end());
  const std::string& base = n.output(0)->name();
  for (size_t k = 0; k < axes.size(); ++k) {
    const int axis = axes[k];
    const int64_t size = (*shape)[size_t(axis)];
    uint32_t idx;
    if (!runtime) {
      const int64_t b = pads[size_t(axis)], e = pads[size_t(axis + rank)];
      std::vector<int64_t> source;
      for (int64_t j = -b; j < size + e; ++j)
        source.push_back(std::clamp<int64_t>(j, 0, size - 1));
      idx = ctx.intConst(source, fmt::format("{}_edge{}", base, axis));
      dims[size_t(axis)] = static_cast<int32_t>(source.size());
    } else {
      auto pick = [&](int64_t at) {
        uint32_t i = ctx.intConst({at}, fmt::format("{}_pad{}", base, at), std::vector<int32_t>{});
        return ch.op(fb::PrimitiveType_Gather,
                     {*p32, i, ctx.intConst({0}, fmt::format("{}_pad{}_axis", base, at))},
                     ch.tmp(kTypeInt32, {}));
      };
      uint32_t start = ch.binary(fb::PrimitiveType_SubFusion, ch.scalar(0, kTypeInt32), pick(axis));
      uint32_t limit = ch.binary(fb::PrimitiveType_AddFusion, pick(axis + rank),
                                 ch.scalar(double(size), kTypeInt32));
      uint32_t range = ch.op(fb::PrimitiveType_Range, {start, limit, ch.scalar(1, kTypeInt32)},
                             ch.tmp(kTypeInt32, {-1}), [](FBB& b) {
                               return fb::CreateRange(b, kTypeInt32, 0, 0, 1).Union();
                             });
      uint32_t low = ch.binary(fb::PrimitiveType_Maximum, range, ch.scalar(0, kTypeInt32));
      idx = ch.binary(fb::PrimitiveType_Minimum, low, ch.scalar(double(size - 1), kTypeInt32));
      dims[size_t(axis)] = -1;
    }
    const bool last = k + 1 == axes.size();
    uint32_t out = last ? *y : ch.tmp(ch.typeOf(cur), dims);
    ch.op(fb::PrimitiveType_Gather,
          {cur, idx, ctx.intConst({axis}, fmt::format("{}_edge{}_axis", base, axis))}, out);
    cur = out;
  }
  return Status::ok();
}

std::string checkPad(const Node& n, const lowering::OpContext&) {
  if (std::string reason = shapeOpsAttributeReason(n); !reason.empty()) return reason;
  int mode = 0;
  return padMode(n, &mode);
}

// Pads fed at run time ([begin…, end…], int64): cast to int32 and laid out as .ms's [rank, 2]
// (Reshape to [2, rank], Transpose); a run-time constant_value is the third PadFusion input.
// Negative (cropping) pads cannot be seen here; .ms pads only grow.
Status lowerRuntimePad(LoweringContext& ctx, const Node& n, int rank) {
  if (n.input(3)) return bad("run-time pads with axes");
  int mode = 0;
  if (std::string reason = padMode(n, &mode); !reason.empty()) return bad("{}", reason);
  if (mode == kEdgeMode) return lowerEdgePad(ctx, n, {});
  const int paddingMode = mode;
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto p32 = ctx.int32Input(n.input(1));
  if (!p32) return p32.status();
  const std::string& base = n.output(0)->name();
  uint32_t rows = ctx.reshapeTensor(*p32, {2, rank}, base + "_pads_2xr");
  uint32_t perm = ctx.intConst({1, 0}, base + "_pads_perm");
  MsTensor t = ctx.tensor(rows);
  t.name = base + "_paddings";
  t.dims = {rank, 2};
  uint32_t pairs = ctx.addTensor(std::move(t));
  ctx.emit(fb::PrimitiveType_Transpose, emptyTable<fb::Transpose>(), {rows, perm}, {pairs});
  std::vector<uint32_t> ins{*x, pairs};
  float value = 0;
  if (const Value* cv = n.input(2)) {
    if (auto c = ctx.constOf(cv)) {
      auto s = scalarValue(c->tensor);
      if (!s) return bad("constant_value is not a scalar");
      value = static_cast<float>(*s);
    } else {
      auto id = ctx.input(cv, Layout::Onnx);
      if (!id) return id.status();
      ins.push_back(*id);
    }
  }
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(
      fb::PrimitiveType_PadFusion,
      [=](FBB& b) {
        return fb::CreatePadFusion(b, 0, static_cast<fb::PaddingMode>(paddingMode), value).Union();
      },
      ins, {*y});
  return Status::ok();
}

Status lowerPad(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  if (rank < 0) return dynamicShape("Pad over an unknown rank");
  std::vector<int64_t> pads;
  float value = 0;
  if (ctx.opset() < 11) {
    KILN_ASSIGN_OR_RETURN(pads, ops::intsAttr(n, "pads", {}));
    KILN_ASSIGN_OR_RETURN(value, ops::floatAttr(n, "value", 0));
  } else {
    auto p = n.input(1) ? ctx.constOf(n.input(1)) : std::nullopt;
    if (!p) return lowerRuntimePad(ctx, n, rank);
    pads = intValues(p->tensor);
    if (const Value* cv = n.input(2)) {
      auto c = ctx.constOf(cv);
      if (!c) return bad("non-constant constant_value");
      auto s = scalarValue(c->tensor);
      if (!s) return bad("constant_value is not a scalar");
      value = static_cast<float>(*s);
    }
    if (const Value* ax = n.input(3)) {
      auto c = ctx.constOf(ax);
      if (!c) return dynamicShape("non-constant axes");
      std::vector<int64_t> axes = intValues(c->tensor);
      std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
      for (size_t k = 0; k < axes.size(); ++k) {
        int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
        full[static_cast<size_t>(a)] = pads[k];
        full[static_cast<size_t>(a + rank)] = pads[k + axes.size()];
      }
      pads = full;
    }
  }
  if (pads.size() != static_cast<size_t>(2 * rank))
    return bad("{} pads for rank {}", pads.size(), rank);
  int mode = 0;
  if (std::string reason = padMode(n, &mode); !reason.empty()) return bad("{}", reason);
  const int paddingMode = mode;
  for (int64_t p : pads)
    if (p < 0) return bad("negative pad {} (cropping)", p);
  if (mode == kEdgeMode) return lowerEdgePad(ctx, n, pads);
  const bool nhwc = rank == 4 && ctx.availableNhwc(n.input(0));
  std::vector<int64_t> pairs; // [rank, 2]
  for (int i = 0; i < rank; ++i) {
    size_t src =
        nhwc ? static_cast<size_t>(kToNhwc[static_cast<size_t>(i)]) : static_cast<size_t>(i);
    pairs.push_back(pads[src]);
    pairs.push_back(pads[src + static_cast<size_t>(rank)]);
  }
  auto x = ctx.input(n.input(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!x) return x.status();
  uint32_t tp =
      ctx.intConst(pairs, n.output(0)->name() + "_paddings", std::vector<int32_t>{rank, 2});
  auto y = ctx.output(n.output(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(
      fb::PrimitiveType_PadFusion,
      [=](FBB& b) {
        return fb::CreatePadFusion(b, 0, static_cast<fb::PaddingMode>(paddingMode), value).Union();
      },
      {*x, tp}, {*y});
  return Status::ok();
}

Status lowerTileExpand(LoweringContext& ctx, const Node& n) {
  const std::string& op = n.opType();
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  std::vector<int64_t> values;
  if (op == "Expand") {
    auto shape = ctx.staticShape(n.output(0));
    if (!shape) {
      // Dynamic dims: BroadcastTo with the shape as its second input broadcasts both ways, as
      // Expand does (ms.md §5.2), whether the shape is a constant or computed at run time.
      auto c = ctx.constOf(n.input(1));
      std::vector<int64_t> target = c ? intValues(c->tensor) : std::vector<int64_t>{};
      if (c && std::any_of(target.begin(), target.end(), [](int64_t d) { return d < 0; }))
        return bad("negative value in the Expand shape");
      uint32_t s;
      if (c) {
        s = ctx.intConst(target, n.output(0)->name() + "_shape");
      } else {
        auto dyn = ctx.int32Input(n.input(1));
        if (!dyn) return dyn.status();
        s = *dyn;
      }
      auto y = ctx.output(n.output(0), Layout::Onnx);
      if (!y) return y.status();
      ctx.emit(fb::PrimitiveType_BroadcastTo,
               [=](FBB& b) { return fb::CreateBroadcastTo(b, b.CreateVector(target)).Union(); },
               {*x, s}, {*y});
      return Status::ok();
    }
    values = *shape;
  } else {
    auto c = ctx.constOf(n.input(1));
    if (!c) {
      auto dyn = ctx.int32Input(n.input(1));
      if (!dyn) return dyn.status();
      auto y = ctx.output(n.output(0), Layout::Onnx);
      if (!y) return y.status();
      ctx.emit(fb::PrimitiveType_TileFusion, [](FBB& b) { return fb::CreateTileFusion(b).Union(); },
               {*x, *dyn}, {*y});
      return Status::ok();
    }
    values = intValues(c->tensor);
  }
  uint32_t t = ctx.intConst(values, n.output(0)->name() + (op == "Tile" ? "_multiples" : "_shape"));
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (op == "Tile")
    ctx.emit(fb::PrimitiveType_TileFusion, [](FBB& b) { return fb::CreateTileFusion(b).Union(); },
             {*x, t}, {*y});
  else
    ctx.emit(fb::PrimitiveType_BroadcastTo,
             [=](FBB& b) { return fb::CreateBroadcastTo(b, b.CreateVector(values)).Union(); },
             {*x, t}, {*y});
  return Status::ok();
}

Status lowerRange(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(std::vector<uint32_t> ins, ctx.inputs(n, Layout::Onnx));
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  const int64_t dtype = ctx.tensor(*y).dataType;
  ctx.emit(fb::PrimitiveType_Range,
           [=](FBB& b) { return fb::CreateRange(b, dtype, 0, 0, 1).Union(); }, ins, {*y});
  return Status::ok();
}

// ConstantOfShape's value: a scalar of a dtype .ms ConstantOfShape makes.
Expected<Tensor> constantOfShapeValue(const Node& n) {
  Tensor value = Tensor::fromValues<float>(DType::Float32, {1}, std::vector<float>{0});
  if (const Attribute* a = n.attribute("value")) {
    if (a->kind() != AttrKind::Tensor) return bad("value is not a tensor");
    value = a->asTensor();
  }
  auto s = scalarValue(value);
  auto type = typeIdOf(value.dtype());
  if (!s || !type ||
      (*type != kTypeFloat32 && *type != kTypeInt32 && *type != kTypeFloat16 &&
       *type != kTypeBool && *type != kTypeInt64))
    return bad("value of dtype {}", dtypeName(value.dtype()));
  return value;
}

std::string checkConstantOfShape(const Node& n, const lowering::OpContext&) {
  auto value = constantOfShapeValue(n);
  return value ? std::string() : value.status().message();
}

Status lowerConstantOfShape(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const Tensor value, constantOfShapeValue(n));
  auto s = scalarValue(value);
  auto type = typeIdOf(value.dtype());
  const int64_t dataType = *type == kTypeInt64 ? kTypeInt32 : *type;
  auto shapeIn = ctx.input(n.input(0), Layout::Onnx);
  if (!shapeIn) return shapeIn.status();
  uint32_t shapeId = *shapeIn;
  if (auto c = ctx.constOf(n.input(0)))
    shapeId = ctx.intConst(intValues(c->tensor), c->name + "_i32");
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  const float v = static_cast<float>(*s);
  ctx.emit(fb::PrimitiveType_ConstantOfShape,
           [=](FBB& b) {
             return fb::CreateConstantOfShape(b, dataType, b.CreateVector(std::vector<float>{v}))
                 .Union();
           },
           {shapeId}, {*y});
  return Status::ok();
}

KILN_MS_LOWERING("ConstantOfShape", checkConstantOfShape, lowerConstantOfShape);
KILN_MS_LOWERING("Expand", checkShapeOp, lowerTileExpand);
KILN_MS_LOWERING("Pad", checkPad, lowerPad);
KILN_MS_LOWERING("Range", checkRange, lowerRange);
KILN_MS_LOWERING("Slice", checkSlice, lowerSlice);
KILN_MS_LOWERING("Tile", checkShapeOp, lowerTileExpand);
// ---- end of lowering

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

Status raiseStridedSlice(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::StridedSlice* s = p.value_as_StridedSlice();
  if (s->ellipsis_mask() || s->new_axis_mask())
    return ctx.nodeUnsupported("ellipsis_mask/new_axis_mask are not read");
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  bool runtime = false;
  for (size_t i = 1; i < ctx.inputCount() && i < 5; ++i)
    runtime = runtime || !ctx.isConstant(ctx.inIndex(i));
  if (runtime) {
    // Run-time begin/end/strides/axes (ONNX Slice lowered as is): no masks to apply.
    if (s->begin_mask() || s->end_mask() || s->shrink_axis_mask())
      return ctx.nodeUnsupported("masks with run-time begin/end");
    std::vector<Value*> ins{x};
    for (size_t i : {size_t(1), size_t(2), size_t(3), size_t(4)}) {
      if (i >= ctx.inputCount()) break;
      KILN_ASSIGN_OR_RETURN(Value * v, ctx.int64Input(i));
      ins.push_back(v);
    }
    // Five inputs: ONNX's order (axes, then strides); four: strides without axes.
    if (ctx.inputCount() == 4) return ctx.nodeUnsupported("strides without axes");
    return ctx.bind(0, ctx.emit("Slice", ins));
  }
  KILN_ASSIGN_OR_RETURN(auto begin, ctx.constInts(1));
  KILN_ASSIGN_OR_RETURN(auto end, ctx.constInts(2));
  std::vector<int64_t> strides(begin.size(), 1), axes(begin.size());
  if (ctx.inputCount() > 3) {
    KILN_ASSIGN_OR_RETURN(strides, ctx.constInts(3));
  }
  std::iota(axes.begin(), axes.end(), 0);
  if (ctx.inputCount() > 4) {
    // Five inputs take the run-time form's order (axes, then strides) whether or not they are
    // constants: lowerRuntimeSlice writes constant ones too (a Slice counted from an unknown end).
    KILN_ASSIGN_OR_RETURN(axes, ctx.constInts(3));
    KILN_ASSIGN_OR_RETURN(strides, ctx.constInts(4));
  }
  if (strides.size() != begin.size() || end.size() != begin.size() || axes.size() != begin.size())
    return ctx.nodeUnsupported("begin/end/strides/axes differ in length");
  std::vector<int64_t> squeeze;
  for (size_t k = 0; k < begin.size(); ++k) {
    bool negative = strides[k] < 0;
    if (s->begin_mask() & (int64_t(1) << k)) begin[k] = negative ? INT64_MAX : 0;
    if (s->end_mask() & (int64_t(1) << k)) end[k] = negative ? INT64_MIN : INT64_MAX;
    if (s->shrink_axis_mask() & (int64_t(1) << k)) {
      end[k] = begin[k] == -1 ? INT64_MAX : begin[k] + 1;
      strides[k] = 1;
      squeeze.push_back(axes[k]);
    }
  }
  Value* y =
      ctx.emit("Slice", {x, ctx.ints(begin), ctx.ints(end), ctx.ints(axes), ctx.ints(strides)});
  if (!squeeze.empty()) y = ctx.emit("Squeeze", {y, ctx.ints(squeeze)});
  return ctx.bind(0, y);
}

Status raiseSliceFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(auto begin, ctx.constInts(1));
  KILN_ASSIGN_OR_RETURN(auto size, ctx.constInts(2));
  auto axes = ctx.longs(p.value_as_SliceFusion()->axes());
  if (axes.empty()) {
    axes.resize(begin.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (size.size() != begin.size() || axes.size() != begin.size())
    return ctx.nodeUnsupported("begin/size/axes differ in length");
  std::vector<int64_t> end(begin.size());
  for (size_t k = 0; k < begin.size(); ++k)
    end[k] = size[k] < 0 ? INT64_MAX : begin[k] + size[k];
  return ctx.bind(0, ctx.emit("Slice", {x, ctx.ints(begin), ctx.ints(end), ctx.ints(axes)}));
}

Status raiseTileFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  if (!ctx.longs(p.value_as_TileFusion()->dims()).empty())
    return ctx.nodeUnsupported("TileFusion dims are not read");
  KILN_ASSIGN_OR_RETURN(Value * m, ctx.int64Input(1));
  return ctx.bind(0, ctx.emit("Tile", {x, m}));
}

Status raiseBroadcastTo(RaisingContext& ctx, const msfb::Primitive& p) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Value* shape;
  if (ctx.inputCount() > 1) {
    KILN_ASSIGN_OR_RETURN(shape, ctx.int64Input(1));
  } else {
    shape = ctx.ints(ctx.longs(p.value_as_BroadcastTo()->shape()));
  }
  return ctx.bind(0, ctx.emit("Expand", {x, shape}));
}

Status raisePadFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* pf = p.value_as_PadFusion();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Value* onnxPadsValue = nullptr;
  if (!ctx.isConstant(ctx.inIndex(1))) {
    // Run-time [rank, 2] paddings → ONNX [begin…, end…]: transpose and flatten.
    KILN_ASSIGN_OR_RETURN(Value * pv, ctx.int64Input(1));
    onnxPadsValue = ctx.emit("Reshape", {ctx.transpose(pv, {1, 0}), ctx.ints({-1})});
  } else {
    KILN_ASSIGN_OR_RETURN(auto pads, ctx.constInts(1));
    if (pads.size() % 2) return ctx.nodeUnsupported("paddings must be [rank, 2]");
    size_t rank = pads.size() / 2;
    std::vector<int64_t> onnxPads(pads.size());
    for (size_t k = 0; k < rank; ++k) {
      onnxPads[k] = pads[2 * k];
      onnxPads[rank + k] = pads[2 * k + 1];
    }
    onnxPadsValue = ctx.ints(onnxPads);
  }
  std::string mode;
  switch (pf->padding_mode()) {
  case msfb::PaddingMode_CONSTANT:
    mode = "constant";
    break;
  case msfb::PaddingMode_REFLECT:
    mode = "reflect";
    break;
  default:
    return ctx.nodeUnsupported(
        fmt::format("padding mode {}", msfb::EnumNamePaddingMode(pf->padding_mode())));
  }
  std::vector<Value*> ins{x, onnxPadsValue};
  if (mode == "constant") {
    if (ctx.inputCount() > 2) {
      KILN_ASSIGN_OR_RETURN(Value * cv, ctx.in(2));
      ins.push_back(cv);
    } else if (pf->constant_value() != 0.0f) {
      ins.push_back(ctx.scalar(pf->constant_value(), ctx.floatType()));
    }
  }
  return ctx.bind(0, ctx.emit("Pad", ins, {{"mode", Attribute::ofString(mode)}}));
}

Status raiseConstantOfShape(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* c = p.value_as_ConstantOfShape();
  KILN_ASSIGN_OR_RETURN(Value * shape, ctx.int64Input(0));
  auto values = c->value();
  if (!values || values->size() != 1) return ctx.nodeUnsupported("value must hold one element");
  auto dt = ms::dtypeOfTypeId(int(c->data_type()));
  if (!dt) return ctx.nodeUnsupported(fmt::format("data_type {}", c->data_type()));
  float v = values->Get(0);
  Tensor t;
  switch (*dt) {
  case DType::Float32:
    t = Tensor::fromValues(*dt, {1}, std::vector<float>{v});
    break;
  case DType::Float16:
    t = Tensor::fromValues(*dt, {1}, std::vector<uint16_t>{rt::floatToHalf(v)});
    break;
  case DType::Int32:
    t = Tensor::fromValues(*dt, {1}, std::vector<int32_t>{int32_t(v)});
    break;
  case DType::Int64:
    t = Tensor::fromValues(*dt, {1}, std::vector<int64_t>{int64_t(v)});
    break;
  case DType::Bool:
    t = Tensor::fromValues(*dt, {1}, std::vector<uint8_t>{v != 0});
    break;
  default:
    return ctx.nodeUnsupported(fmt::format("data_type {}", dtypeName(*dt)));
  }
  return ctx.bind(0, ctx.emit("ConstantOfShape", {shape}, {{"value", Attribute::ofTensor(t)}}));
}

Status raiseFill(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * value, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * shape, ctx.int64Input(1));
  return ctx.bind(0, ctx.emit("Expand", {value, shape}));
}

Status raiseRange(RaisingContext& ctx, const msfb::Primitive&) {
  if (ctx.inputCount() < 3) return ctx.nodeUnsupported("Range needs start, limit and delta inputs");
  KILN_ASSIGN_OR_RETURN(Value * a, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(1));
  KILN_ASSIGN_OR_RETURN(Value * c, ctx.in(2));
  return ctx.bind(0, ctx.emit("Range", {a, b, c}));
}

Status raiseOneHot(RaisingContext& ctx, const msfb::Primitive& p) {
  KILN_ASSIGN_OR_RETURN(Value * idx, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * depth, ctx.in(1));
  KILN_ASSIGN_OR_RETURN(Value * on, ctx.in(2));
  KILN_ASSIGN_OR_RETURN(Value * off, ctx.in(3));
  Value* values = ctx.emit(
      "Concat",
      {ctx.emit("Reshape", {off, ctx.ints({1})}), ctx.emit("Reshape", {on, ctx.ints({1})})},
      ctx.axisAttr(0));
  return ctx.bind(
      0, ctx.emit("OneHot", {idx, depth, values}, ctx.axisAttr(p.value_as_OneHot()->axis())));
}

KILN_MS_RAISING(StridedSlice, raiseStridedSlice);
KILN_MS_RAISING(SliceFusion, raiseSliceFusion);
KILN_MS_RAISING(TileFusion, raiseTileFusion);
KILN_MS_RAISING(BroadcastTo, raiseBroadcastTo);
KILN_MS_RAISING(PadFusion, raisePadFusion);
KILN_MS_RAISING(ConstantOfShape, raiseConstantOfShape);
KILN_MS_RAISING(Fill, raiseFill);
KILN_MS_RAISING(Range, raiseRange);
KILN_MS_RAISING(OneHot, raiseOneHot);

} // namespace
} // namespace kiln::ms
