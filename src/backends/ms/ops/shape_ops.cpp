// .ms rules of the shape_ops family, layout half (Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
// Concat, Split, DepthToSpace, SpaceToDepth, ReverseSequence); slicing, padding and generated
// tensors are in shape_ops_slice_pad.cpp. Lowering (ONNX → .ms: a pure check and the lower that
// emits ops) and raising (the reader's rules for the .ms ops this family emits) side by side.
#include <algorithm>
#include <cstdint>
#include <fmt/format.h>
#include <numeric>
#include <string>
#include <vector>

#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/attributes.h"
#include "shape_ops.h"

namespace kiln::ms {

// The attributes this family reads, kind-checked: a wrong kind is a refusal, never a throw.
std::string shapeOpsAttributeReason(const Node& n) {
  for (const char* name : {"allowzero", "axis", "blocksize"})
    if (auto v = ops::intAttr(n, name, 0); !v) return v.status().message();
  for (const char* name : {"perm", "split", "pads", "axes", "starts", "ends"})
    if (auto v = ops::intsAttr(n, name, {}); !v) return v.status().message();
  if (auto v = ops::floatAttr(n, "value", 0); !v && n.opType() == "Pad")
    return v.status().message();
  if (auto v = ops::stringAttr(n, "mode", ""); !v) return v.status().message();
  return {};
}

std::string checkShapeOp(const Node& n, const lowering::OpContext&) {
  return shapeOpsAttributeReason(n);
}

namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

std::string checkSplit(const Node& n, const lowering::OpContext& context) {
  for (const Value* o : n.outputs())
    if (!o) return "an omitted Split output";
  return checkShapeOp(n, context);
}

Status lowerReshape(LoweringContext& ctx, const Node& n) {
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  KILN_ASSIGN_OR_RETURN(const int64_t allowZero, ops::intAttr(n, "allowzero", 0));
  auto c = n.input(1) ? ctx.constOf(n.input(1)) : std::nullopt;
  const auto outShape = ctx.staticShape(n.output(0));
  const bool outHasZero =
      outShape && std::find(outShape->begin(), outShape->end(), 0) != outShape->end();
  if (allowZero != 0 && (!outShape || outHasZero)) {
    // A known output shape without zeros means the same to .ms whatever allowzero says.
    if (outHasZero && !c) {
      // A known output of no elements holds nothing of x: ConstantOfShape makes it.
      const int type = ctx.tensor(*x).dataType;
      if (type != kTypeFloat32 && type != kTypeInt32 && type != kTypeFloat16 && type != kTypeBool)
        return bad("allowzero=1 with a run-time shape, to an empty {} output",
                   dtypeName(n.output(0)->dtype()));
      uint32_t s = ctx.intConst(*outShape, n.output(0)->name() + "_shape");
      auto y = ctx.output(n.output(0), Layout::Onnx);
      if (!y) return y.status();
      ctx.emit(fb::PrimitiveType_ConstantOfShape,
               [=](FBB& b) {
                 return fb::CreateConstantOfShape(b, type, b.CreateVector(std::vector<float>{0}))
                     .Union();
               },
               {s}, {*y});
      return Status::ok();
    }
    if (!c) return bad("allowzero=1 with a run-time shape");
    for (int64_t d : intValues(c->tensor))
      if (d == 0) return bad("allowzero=1 with a 0 in the shape (.ms copies the input dim)");
  }
  uint32_t s;
  if (auto st = ctx.staticShape(n.output(0))) {
    // ONNX's 0 / -1 resolved by shape inference: no special values reach the runtime.
    s = ctx.intConst(*st, n.output(0)->name() + "_shape");
  } else if (c) {
    // .ms Reshape reads 0 as "copy the input dim" and -1 as "the rest", as ONNX does without
    // allowzero; a 0 over a known dim is written out anyway.
    std::vector<int64_t> shape = intValues(c->tensor);
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] == 0)
        if (auto d = ctx.dimOf(n.input(0), i)) shape[i] = *d;
    s = ctx.intConst(shape, n.output(0)->name() + "_shape");
  } else {
    // A target computed at run time (Shape → Gather → Concat ...): the runtime reshapes with it.
    auto dyn = ctx.int32Input(n.input(1));
    if (!dyn) return dyn.status();
    s = *dyn;
  }
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
    if (r < 0) return dynamicShape("negative axis over an unknown rank");
    axis += r;
  }
  ctx.emit(fb::PrimitiveType_Flatten, [=](FBB& b) { return fb::CreateFlatten(b, axis).Union(); },
           {*x}, {*y});
  return Status::ok();
}

Status lowerSqueeze(LoweringContext& ctx, const Node& n) {
  const bool squeeze = n.opType() == "Squeeze";
  KILN_ASSIGN_OR_RETURN(const auto axes, ctx.intsOf(n, "axes", 1));
  if (n.input(1) && !axes) {
    // Axes fed at run time: with a known output shape the op is a Reshape to it.
    auto shape = ctx.staticShape(n.output(0));
    if (!shape) return dynamicShape("non-constant axes with an unknown output shape");
    auto x = ctx.input(n.input(0), Layout::Onnx);
    if (!x) return x.status();
    uint32_t s = ctx.intConst(*shape, n.output(0)->name() + "_shape");
    auto y = ctx.output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    ctx.emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {*x, s}, {*y});
    return Status::ok();
  }
  const int inRank = ctx.rankOf(n.input(0));
  const int outRank = ctx.rankOf(n.output(0));
  std::vector<int64_t> list = axes ? *axes : std::vector<int64_t>{};
  const int base = squeeze ? inRank : outRank;
  for (auto& a : list)
    if (a < 0) {
      // One Unsqueeze axis counted from the end needs no rank: the runtime's Unsqueeze counts a
      // negative axis from the output's end, as ONNX does (an If whose branches differ in rank,
      // a batch-1 Squeeze, leaves the rank to run time).
      if (base < 0 && !squeeze && list.size() == 1) break;
      if (base < 0) return dynamicShape("negative axis over an unknown rank");
      a += base;
    }
  if (!axes && squeeze) {
    auto shape = ctx.staticShape(n.input(0));
    if (!shape) return dynamicShape("Squeeze without axes over an unknown shape");
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
    if (rank < 0) return dynamicShape("default perm over an unknown rank");
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
    if (rank < 0) return dynamicShape("negative axis over an unknown rank");
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
    if (rank < 0) return dynamicShape("negative axis over an unknown rank");
    axis += rank;
  }
  std::vector<int64_t> sizes;
  if (n.attribute("split")) {
    KILN_ASSIGN_OR_RETURN(sizes, ops::intsAttr(n, "split", {}));
  } else if (n.input(1)) {
    if (auto c = ctx.constOf(n.input(1))) {
      sizes = intValues(c->tensor);
    } else {
      // Sizes fed at run time: the outputs' known extents along the axis say the same.
      for (const Value* o : n.outputs()) {
        auto d = o ? ctx.dimOf(o, static_cast<size_t>(axis)) : std::nullopt;
        if (!d) return dynamicShape("non-constant split sizes with an unknown output shape");
        sizes.push_back(*d);
      }
    }
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
std::string checkSpaceDepth(const Node& n, const lowering::OpContext&) {
  if (std::string reason = shapeOpsAttributeReason(n); !reason.empty()) return reason;
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

// ReverseSequence → ReverseSequence {seq_dim = time_axis, batch_dim = batch_axis}(x, lengths), the
// lengths as int32 (the runtime's index type).
std::string checkReverseSequence(const Node& n, const lowering::OpContext&) {
  auto time = ops::intAttr(n, "time_axis", 0);
  if (!time) return time.status().message();
  auto batch = ops::intAttr(n, "batch_axis", 1);
  if (!batch) return batch.status().message();
  if (*time == *batch || *time < 0 || *time > 1 || *batch < 0 || *batch > 1)
    return fmt::format("time_axis {} and batch_axis {} (ONNX takes 0 and 1, one each)", *time,
                       *batch);
  return {};
}

Status lowerReverseSequence(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const int64_t time, ops::intAttr(n, "time_axis", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t batch, ops::intAttr(n, "batch_axis", 1));
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  Expected<uint32_t> lengths = 0u;
  if (auto c = ctx.constOf(n.input(1)); c && c->tensor.dims().size() == 1)
    lengths = ctx.intConst(intValues(c->tensor), n.output(0)->name() + "_lengths");
  else
    lengths = ctx.int32Input(n.input(1));
  if (!lengths) return lengths.status();
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_ReverseSequence,
           [=](FBB& b) { return fb::CreateReverseSequence(b, time, batch).Union(); },
           {*x, *lengths}, {*y});
  return Status::ok();
}

KILN_MS_LOWERING("Concat", checkShapeOp, lowerConcat);
KILN_MS_LOWERING("DepthToSpace", checkSpaceDepth, lowerSpaceDepth);
KILN_MS_LOWERING("Flatten", checkShapeOp, lowerFlatten);
KILN_MS_LOWERING("Reshape", checkShapeOp, lowerReshape);
KILN_MS_LOWERING("ReverseSequence", checkReverseSequence, lowerReverseSequence);
KILN_MS_LOWERING("SpaceToDepth", checkSpaceDepth, lowerSpaceDepth);
KILN_MS_LOWERING("Split", checkSplit, lowerSplit);
KILN_MS_LOWERING("Squeeze", checkShapeOp, lowerSqueeze);
KILN_MS_LOWERING("Transpose", checkShapeOp, lowerTranspose);
KILN_MS_LOWERING("Unsqueeze", checkShapeOp, lowerSqueeze);
// ---- end of lowering

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

Status raiseFlatten(RaisingContext& ctx, const msfb::Primitive& p) {
  return ctx.unary("Flatten", ctx.axisAttr(p.value_as_Flatten()->axis()));
}

Status raiseReshape(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Value* shape;
  if (ctx.inputCount() > 1) {
    KILN_ASSIGN_OR_RETURN(shape, ctx.int64Input(1));
  } else {
    auto od = ctx.dims(ctx.outIndex(0));
    if (std::any_of(od.begin(), od.end(), [](int64_t v) { return v < 0; }))
      return ctx.nodeUnsupported("Reshape without a shape input needs static output dims");
    shape = ctx.ints(od);
  }
  return ctx.bind(0, ctx.emit("Reshape", {x, shape}));
}

Status raiseTranspose(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(auto perm, ctx.constInts(1));
  return ctx.bind(0, ctx.transpose(x, perm));
}

Status raiseSqueezeOrUnsqueeze(RaisingContext& ctx, const msfb::Primitive& p) {
  bool sq = p.value_type() == msfb::PrimitiveType_Squeeze;
  auto axes = ctx.longs(sq ? p.value_as_Squeeze()->axis() : p.value_as_Unsqueeze()->axis());
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  if (axes.empty() && ctx.inputCount() > 1) {
    KILN_ASSIGN_OR_RETURN(axes, ctx.constInts(1));
  }
  if (axes.empty() && !sq) return ctx.nodeUnsupported("Unsqueeze needs axes");
  std::vector<Value*> ins{x};
  if (!axes.empty()) ins.push_back(ctx.ints(axes));
  return ctx.bind(0, ctx.emit(sq ? "Squeeze" : "Unsqueeze", ins));
}

Status raiseExpandDims(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(auto axes, ctx.constInts(1));
  return ctx.bind(0, ctx.emit("Unsqueeze", {x, ctx.ints(axes)}));
}

Status raiseConcat(RaisingContext& ctx, const msfb::Primitive& p) {
  std::vector<Value*> ins;
  for (size_t k = 0; k < ctx.inputCount(); ++k) {
    KILN_ASSIGN_OR_RETURN(Value * v, ctx.in(k));
    ins.push_back(v);
  }
  return ctx.bind(0, ctx.emit("Concat", ins, ctx.axisAttr(p.value_as_Concat()->axis())));
}

Status raiseStack(RaisingContext& ctx, const msfb::Primitive& p) {
  int64_t axis = p.value_as_Stack()->axis();
  std::vector<Value*> ins;
  for (size_t k = 0; k < ctx.inputCount(); ++k) {
    KILN_ASSIGN_OR_RETURN(Value * v, ctx.in(k));
    ins.push_back(ctx.emit("Unsqueeze", {v, ctx.ints({axis})}));
  }
  return ctx.bind(0, ctx.emit("Concat", ins, ctx.axisAttr(axis)));
}

Status raiseSplit(RaisingContext& ctx, const msfb::Primitive& p) {
  auto* s = p.value_as_Split();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  size_t n = ctx.outputCount();
  auto sizes = ctx.longs(s->size_splits());
  std::vector<Value*> ins{x};
  Node::AttributeList attrs = ctx.axisAttr(s->axis());
  if (!sizes.empty()) {
    if (sizes.size() != n) return ctx.nodeUnsupported("size_splits differs from the output count");
    ins.push_back(ctx.ints(sizes));
  } else {
    attrs.push_back({"num_outputs", Attribute::ofInt(int64_t(n))});
  }
  Node* node = ctx.emitNode("Split", ins, n, std::move(attrs));
  for (size_t k = 0; k < n; ++k)
    KILN_TRY(ctx.bind(k, node->output(k)));
  return Status::ok();
}

Status raiseUnstack(RaisingContext& ctx, const msfb::Primitive& p) {
  int64_t axis = p.value_as_Unstack()->axis();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  size_t n = ctx.outputCount();
  Node* node = ctx.emitNode(
      "Split", {x}, n,
      {{"axis", Attribute::ofInt(axis)}, {"num_outputs", Attribute::ofInt(int64_t(n))}});
  for (size_t k = 0; k < n; ++k)
    KILN_TRY(ctx.bind(k, ctx.emit("Squeeze", {node->output(k), ctx.ints({axis})})));
  return Status::ok();
}
Status raiseDepthToSpaceOrSpaceToDepth(RaisingContext& ctx, const msfb::Primitive& p) {
  bool d2s = p.value_type() == msfb::PrimitiveType_DepthToSpace;
  int64_t block =
      d2s ? p.value_as_DepthToSpace()->block_size() : p.value_as_SpaceToDepth()->block_size();
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Node::AttributeList attrs{{"blocksize", Attribute::ofInt(block)}};
  if (d2s) {
    auto* m = p.value_as_DepthToSpace()->mode();
    std::string mode = m && m->size() ? m->str() : "DCR";
    if (mode != "DCR" && mode != "CRD") return ctx.nodeUnsupported("DepthToSpace mode " + mode);
    attrs.push_back({"mode", Attribute::ofString(mode)});
  }
  Value* y = ctx.emit(d2s ? "DepthToSpace" : "SpaceToDepth", {ctx.toNchw(x)}, std::move(attrs));
  return ctx.bind(0, ctx.toNhwc(y));
}

Status raiseNonZero(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Value* y = ctx.emit("NonZero", {x});
  auto dt = ms::dtypeOfTypeId(ctx.tensor(ctx.outIndex(0))->dataType());
  if (dt && *dt != DType::Int64)
    y = ctx.emit("Cast", {y}, {{"to", Attribute::ofInt(dtypeToOnnx(*dt))}});
  return ctx.bind(0, y);
}

Status raiseReverseSequence(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::ReverseSequence* r = p.value_as_ReverseSequence();
  if (ctx.inputCount() != 2) return ctx.nodeUnsupported("needs x and the sequence lengths");
  const int64_t time = r ? r->seq_dim() : 0, batch = r ? r->batch_dim() : 0;
  if (time == batch || time < 0 || time > 1 || batch < 0 || batch > 1)
    return ctx.nodeUnsupported(
        fmt::format("seq_dim {} with batch_dim {} (ONNX takes 0 and 1, one each)", time, batch));
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * lengths, ctx.int64Input(1));
  return ctx.bind(0, ctx.emit("ReverseSequence", {x, lengths},
                              {{"time_axis", Attribute::ofInt(time)},
                               {"batch_axis", Attribute::ofInt(batch)}}));
}

Status raiseTriuOrTril(RaisingContext& ctx, const msfb::Primitive& p) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  std::vector<Value*> ins{x};
  if (ctx.inputCount() > 1) {
    KILN_ASSIGN_OR_RETURN(Value * k, ctx.int64Input(1));
    ins.push_back(ctx.emit("Reshape", {k, ctx.ints({})}));
  }
  return ctx.bind(
      0, ctx.emit("Trilu", ins,
                  {{"upper", Attribute::ofInt(p.value_type() == msfb::PrimitiveType_Triu)}}));
}

} // namespace
KILN_MS_RAISING(Flatten, raiseFlatten);
KILN_MS_RAISING(Reshape, raiseReshape);
KILN_MS_RAISING(Transpose, raiseTranspose);
KILN_MS_RAISING(Squeeze, raiseSqueezeOrUnsqueeze);
KILN_MS_RAISING(Unsqueeze, raiseSqueezeOrUnsqueeze);
KILN_MS_RAISING(ExpandDims, raiseExpandDims);
KILN_MS_RAISING(Concat, raiseConcat);
KILN_MS_RAISING(Stack, raiseStack);
KILN_MS_RAISING(Split, raiseSplit);
KILN_MS_RAISING(Unstack, raiseUnstack);
KILN_MS_RAISING(DepthToSpace, raiseDepthToSpaceOrSpaceToDepth);
KILN_MS_RAISING(SpaceToDepth, raiseDepthToSpaceOrSpaceToDepth);
KILN_MS_RAISING(NonZero, raiseNonZero);
KILN_MS_RAISING(ReverseSequence, raiseReverseSequence);
KILN_MS_RAISING(Triu, raiseTriuOrTril);
KILN_MS_RAISING(Tril, raiseTriuOrTril);

} // namespace kiln::ms
