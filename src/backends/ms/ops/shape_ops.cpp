// .ms lowering rules of the shape_ops family (Reshape, Flatten, Squeeze, Transpose, Concat, Split,
// Slice, Pad, Tile, Expand, Range, ConstantOfShape, DepthToSpace, SpaceToDepth).
#include "../ms_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

// The attributes this family reads, kind-checked: a wrong kind is a refusal, never a throw.
std::string attributeReason(const Node& n) {
  for (const char* name : {"allowzero", "axis", "blocksize"})
    if (auto v = ops::intAttr(n, name, 0); !v) return v.status().message();
  for (const char* name : {"perm", "split", "pads", "axes", "starts", "ends"})
    if (auto v = ops::intsAttr(n, name, {}); !v) return v.status().message();
  if (auto v = ops::floatAttr(n, "value", 0); !v && n.opType() == "Pad")
    return v.status().message();
  if (auto v = ops::stringAttr(n, "mode", ""); !v) return v.status().message();
  return {};
}

std::string checkShapeOp(const Node& n, const lowering::OpContext&) { return attributeReason(n); }

std::string checkRange(const Node& n, const lowering::OpContext& context) {
  for (const Value* v : n.inputs())
    if (!v) return "an omitted input";
  return checkShapeOp(n, context);
}

std::string checkSplit(const Node& n, const lowering::OpContext& context) {
  for (const Value* o : n.outputs())
    if (!o) return "an omitted Split output";
  return checkShapeOp(n, context);
}

std::string checkSlice(const Node& n, const lowering::OpContext& context) {
  if (context.opset < 10 && (!n.attribute("starts") || !n.attribute("ends")))
    return "missing starts/ends";
  return checkShapeOp(n, context);
}

Status lowerReshape(LoweringContext& ctx, const Node& n) {
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  std::vector<int64_t> shape;
  KILN_ASSIGN_OR_RETURN(const int64_t allowZero, ops::intAttr(n, "allowzero", 0));
  if (allowZero != 0) {
    auto c = n.input(1) ? ctx.constOf(n.input(1)) : std::nullopt;
    if (!c) return bad("allowzero=1 with a run-time shape");
    for (int64_t d : intValues(c->tensor))
      if (d == 0) return bad("allowzero=1 with a 0 in the shape (.ms copies the input dim)");
  }
  if (auto s = ctx.staticShape(n.output(0))) {
    shape = *s; // ONNX's 0 / -1 resolved by shape inference: no special values reach the runtime
  } else if (auto c = n.input(1) ? ctx.constOf(n.input(1)) : std::nullopt) {
    shape = intValues(c->tensor);
    if (allowZero == 0)
      for (size_t i = 0; i < shape.size(); ++i)
        if (shape[i] == 0) {
          auto d = ctx.dimOf(n.input(0), i);
          if (!d) return bad("shape value 0 at axis {} over an unknown input dim", i);
          shape[i] = *d;
        }
  } else {
    return bad("a non-constant target shape with an unknown output shape");
  }
  uint32_t s = ctx.intConst(shape, n.output(0)->name() + "_shape");
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {*x, s}, {*y});
  return Status::ok();
}

Status lowerFlatten(LoweringContext& ctx, const Node& n) {
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto shape = ctx.staticShape(n.output(0));
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (shape) {
    uint32_t s = ctx.intConst(*shape, n.output(0)->name() + "_shape");
    ctx.emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {*x, s}, {*y});
    return Status::ok();
  }
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", 1));
  if (axis < 0) {
    int r = ctx.rankOf(n.input(0));
    if (r < 0) return bad("negative axis over an unknown rank");
    axis += r;
  }
  ctx.emit(fb::PrimitiveType_Flatten, [=](FBB& b) { return fb::CreateFlatten(b, axis).Union(); },
           {*x}, {*y});
  return Status::ok();
}

Status lowerSqueeze(LoweringContext& ctx, const Node& n) {
  const bool squeeze = n.opType() == "Squeeze";
  KILN_ASSIGN_OR_RETURN(const auto axes, ctx.intsOf(n, "axes", 1));
  if (n.input(1) && !axes) return bad("non-constant axes");
  const int inRank = ctx.rankOf(n.input(0));
  const int outRank = ctx.rankOf(n.output(0));
  std::vector<int64_t> list = axes ? *axes : std::vector<int64_t>{};
  const int base = squeeze ? inRank : outRank;
  for (auto& a : list)
    if (a < 0) {
      if (base < 0) return bad("negative axis over an unknown rank");
      a += base;
    }
  if (!axes && squeeze) {
    auto shape = ctx.staticShape(n.input(0));
    if (!shape) return bad("Squeeze without axes over an unknown shape");
    for (size_t i = 0; i < shape->size(); ++i)
      if ((*shape)[i] == 1) list.push_back(static_cast<int64_t>(i));
  }
  std::sort(list.begin(), list.end());
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (squeeze)
    ctx.emit(fb::PrimitiveType_Squeeze,
             [=](FBB& b) { return fb::CreateSqueeze(b, b.CreateVector(list)).Union(); }, {*x},
             {*y});
  else
    ctx.emit(fb::PrimitiveType_Unsqueeze,
             [=](FBB& b) { return fb::CreateUnsqueeze(b, b.CreateVector(list)).Union(); }, {*x},
             {*y});
  return Status::ok();
}

Status lowerTranspose(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  std::vector<int64_t> perm;
  if (n.attribute("perm")) {
    KILN_ASSIGN_OR_RETURN(perm, ops::intsAttr(n, "perm", {}));
  } else {
    if (rank < 0) return bad("default perm over an unknown rank");
    for (int i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  }
  const Value* in = ctx.resolve(n.input(0));
  LoweringContext::Slots* sit = ctx.slotsOf(in);
  const bool onlyNhwc = rank == 4 && sit && sit->nhwc && !sit->onnx;
  uint32_t x;
  if (onlyNhwc) {
    // Read the NHWC tensor directly: onnx axis d lives at NHWC axis kToNchw[d].
    for (auto& p : perm)
      p = kToNchw[static_cast<size_t>(p)];
    x = *sit->nhwc;
    if (perm == std::vector<int64_t>{0, 1, 2, 3} && !n.output(0)->isGraphOutput()) {
      ctx.slots(n.output(0)).onnx = x; // the NCHW→NHWC transpose cancels the layout change
      return Status::ok();
    }
  } else if (rank == 4 && perm == kToNchw && sit && sit->onnx && !n.output(0)->isGraphOutput()) {
    // NHWC data read as NCHW (models exported from NHWC frameworks, .ms files read back): the
    // input tensor already is the output's NHWC layout, so no op is needed.
    const uint32_t id = *sit->onnx;
    ctx.tensor(id).format = kFormatNHWC;
    ctx.slots(n.output(0)).nhwc = id;
    return Status::ok();
  } else {
    auto id = ctx.input(in, Layout::Onnx);
    if (!id) return id.status();
    x = *id;
  }
  uint32_t p = ctx.intConst(perm, n.output(0)->name() + "_perm");
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_Transpose, emptyTable<fb::Transpose>(), {x, p}, {*y});
  return Status::ok();
}

Status lowerConcat(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", 0));
  const int rank = ctx.rankOf(n.output(0));
  if (axis < 0) {
    if (rank < 0) return bad("negative axis over an unknown rank");
    axis += rank;
  }
  bool nhwc = rank == 4, anyNhwc = false;
  for (const Value* v : n.inputs()) {
    if (!v) continue;
    if (ctx.availableNhwc(v)) anyNhwc = true;
    if (ctx.rankOf(v) != 4) nhwc = false;
  }
  nhwc = nhwc && anyNhwc;
  const int64_t msAxis =
      nhwc ? std::find(kToNhwc.begin(), kToNhwc.end(), axis) - kToNhwc.begin() : axis;
  std::vector<uint32_t> ins;
  for (const Value* v : n.inputs()) {
    if (!v) continue;
    auto id = ctx.input(v, nhwc ? Layout::Nhwc : Layout::Onnx);
    if (!id) return id.status();
    ins.push_back(*id);
  }
  auto y = ctx.output(n.output(0), nhwc ? Layout::Nhwc : Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_Concat, [=](FBB& b) { return fb::CreateConcat(b, msAxis).Union(); },
           ins, {*y});
  return Status::ok();
}

Status lowerSplit(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", 0));
  if (axis < 0) {
    if (rank < 0) return bad("negative axis over an unknown rank");
    axis += rank;
  }
  std::vector<int64_t> sizes;
  if (n.attribute("split")) {
    KILN_ASSIGN_OR_RETURN(sizes, ops::intsAttr(n, "split", {}));
  } else if (n.input(1)) {
    auto c = ctx.constOf(n.input(1));
    if (!c) return bad("non-constant split sizes");
    sizes = intValues(c->tensor);
  } else {
    for (const Value* o : n.outputs()) {
      auto d = o ? ctx.dimOf(o, static_cast<size_t>(axis)) : std::nullopt;
      if (!d) {
        sizes.clear();
        break;
      }
      sizes.push_back(*d);
    }
  }
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  std::vector<uint32_t> outs;
  for (const Value* o : n.outputs()) {
    if (!o) return bad("an omitted Split output");
    auto y = ctx.output(o, Layout::Onnx);
    if (!y) return y.status();
    outs.push_back(*y);
  }
  const int64_t count = static_cast<int64_t>(outs.size());
  ctx.emit(
      fb::PrimitiveType_Split,
      [=](FBB& b) {
        auto list = sizes.empty() ? flatbuffers::Offset<flatbuffers::Vector<int64_t>>()
                                  : b.CreateVector(sizes);
        return fb::CreateSplit(b, count, list, axis).Union();
      },
      {*x}, outs);
  return Status::ok();
}

Status lowerSlice(LoweringContext& ctx, const Node& n) {
  auto shape = ctx.staticShape(n.input(0));
  const int rank = ctx.rankOf(n.input(0));
  if (rank < 0) return bad("Slice over an unknown rank");
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
      return bad("non-constant starts/ends/axes/steps");
  }
  if (!starts || !ends) return bad("missing starts/ends");
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0), end(static_cast<size_t>(rank), 0),
      stride(static_cast<size_t>(rank), 1);
  int64_t beginMask = 0, endMask = 0;
  for (int i = 0; i < rank; ++i) {
    beginMask |= int64_t{1} << i;
    endMask |= int64_t{1} << i;
  }
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
      if (s < 0 || e < 0 || step < 0) return bad("negative starts/ends/steps over an unknown dim");
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

// Pad's mode as the .ms PaddingMode; "" reason when it has one.
std::string padMode(const Node& n, int* mode) {
  auto name = ops::stringAttr(n, "mode", "constant");
  if (!name) return name.status().message();
  if (*name == "constant")
    *mode = fb::PaddingMode_CONSTANT;
  else if (*name == "reflect")
    *mode = fb::PaddingMode_REFLECT;
  else
    return fmt::format("mode '{}' (.ms pads take constant or reflect)", *name);
  return {};
}

std::string checkPad(const Node& n, const lowering::OpContext&) {
  if (std::string reason = attributeReason(n); !reason.empty()) return reason;
  int mode = 0;
  return padMode(n, &mode);
}

Status lowerPad(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  if (rank < 0) return bad("Pad over an unknown rank");
  std::vector<int64_t> pads;
  float value = 0;
  if (ctx.opset() < 11) {
    KILN_ASSIGN_OR_RETURN(pads, ops::intsAttr(n, "pads", {}));
    KILN_ASSIGN_OR_RETURN(value, ops::floatAttr(n, "value", 0));
  } else {
    auto p = n.input(1) ? ctx.constOf(n.input(1)) : std::nullopt;
    if (!p) return bad("non-constant pads");
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
      if (!c) return bad("non-constant axes");
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
    if (!shape) return bad("unknown output shape");
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
  std::vector<uint32_t> ins;
  for (const Value* v : n.inputs()) {
    if (!v) return bad("an omitted input");
    auto id = ctx.input(v, Layout::Onnx);
    if (!id) return id.status();
    ins.push_back(*id);
  }
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

std::string checkSpaceDepth(const Node& n, const lowering::OpContext&) {
  if (std::string reason = attributeReason(n); !reason.empty()) return reason;
  if (const int rank = declaredRank(n.input(0)); rank >= 0 && rank != 4)
    return fmt::format("{}-D input", rank);
  return {};
}

Status lowerSpaceDepth(LoweringContext& ctx, const Node& n) {
  if (ctx.rankOf(n.input(0)) != 4) return bad("{}-D input", ctx.rankOf(n.input(0)));
  KILN_ASSIGN_OR_RETURN(const int64_t block, ops::intAttr(n, "blocksize", 0));
  auto x = ctx.input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  auto y = ctx.output(n.output(0), Layout::Nhwc);
  if (!y) return y.status();
  if (n.opType() == "SpaceToDepth") {
    ctx.emit(fb::PrimitiveType_SpaceToDepth,
             [=](FBB& b) { return fb::CreateSpaceToDepth(b, block, fb::Format_NHWC).Union(); },
             {*x}, {*y});
  } else {
    KILN_ASSIGN_OR_RETURN(const std::string mode, ops::stringAttr(n, "mode", "DCR"));
    ctx.emit(
        fb::PrimitiveType_DepthToSpace,
        [=](FBB& b) {
          return fb::CreateDepthToSpace(b, block, fb::Format_NHWC, b.CreateString(mode)).Union();
        },
        {*x}, {*y});
  }
  return Status::ok();
}

KILN_MS_LOWERING("Concat", checkShapeOp, lowerConcat);
KILN_MS_LOWERING("ConstantOfShape", checkConstantOfShape, lowerConstantOfShape);
KILN_MS_LOWERING("DepthToSpace", checkSpaceDepth, lowerSpaceDepth);
KILN_MS_LOWERING("Expand", checkShapeOp, lowerTileExpand);
KILN_MS_LOWERING("Flatten", checkShapeOp, lowerFlatten);
KILN_MS_LOWERING("Pad", checkPad, lowerPad);
KILN_MS_LOWERING("Range", checkRange, lowerRange);
KILN_MS_LOWERING("Reshape", checkShapeOp, lowerReshape);
KILN_MS_LOWERING("Slice", checkSlice, lowerSlice);
KILN_MS_LOWERING("SpaceToDepth", checkSpaceDepth, lowerSpaceDepth);
KILN_MS_LOWERING("Split", checkSplit, lowerSplit);
KILN_MS_LOWERING("Squeeze", checkShapeOp, lowerSqueeze);
KILN_MS_LOWERING("Tile", checkShapeOp, lowerTileExpand);
KILN_MS_LOWERING("Transpose", checkShapeOp, lowerTranspose);
KILN_MS_LOWERING("Unsqueeze", checkShapeOp, lowerSqueeze);
// ---- end of lowering

} // namespace
} // namespace kiln::ms
