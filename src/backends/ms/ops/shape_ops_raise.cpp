// .ms raising rules (reader, .ms → IR): reshape, slice, concat/split, pad, tile, generators.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends/ms/ms_raise_context.h"
#include "kiln/runtime/tensor_util.h"

namespace kiln::ms {

namespace {

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

Status raiseStridedSlice(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::StridedSlice* s = p.value_as_StridedSlice();
  if (s->ellipsis_mask() || s->new_axis_mask())
    return ctx.nodeUnsupported("ellipsis_mask/new_axis_mask are not read");
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(auto begin, ctx.constInts(1));
  KILN_ASSIGN_OR_RETURN(auto end, ctx.constInts(2));
  std::vector<int64_t> strides(begin.size(), 1), axes(begin.size());
  if (ctx.inputCount() > 3) {
    KILN_ASSIGN_OR_RETURN(strides, ctx.constInts(3));
  }
  std::iota(axes.begin(), axes.end(), 0);
  if (ctx.inputCount() > 4) {
    KILN_ASSIGN_OR_RETURN(axes, ctx.constInts(4));
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
  KILN_ASSIGN_OR_RETURN(auto pads, ctx.constInts(1));
  if (pads.size() % 2) return ctx.nodeUnsupported("paddings must be [rank, 2]");
  size_t rank = pads.size() / 2;
  std::vector<int64_t> onnxPads(pads.size());
  for (size_t k = 0; k < rank; ++k) {
    onnxPads[k] = pads[2 * k];
    onnxPads[rank + k] = pads[2 * k + 1];
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
  std::vector<Value*> ins{x, ctx.ints(onnxPads)};
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
KILN_MS_RAISING(StridedSlice, raiseStridedSlice);
KILN_MS_RAISING(SliceFusion, raiseSliceFusion);
KILN_MS_RAISING(TileFusion, raiseTileFusion);
KILN_MS_RAISING(BroadcastTo, raiseBroadcastTo);
KILN_MS_RAISING(PadFusion, raisePadFusion);
KILN_MS_RAISING(ConstantOfShape, raiseConstantOfShape);
KILN_MS_RAISING(Fill, raiseFill);
KILN_MS_RAISING(Range, raiseRange);
KILN_MS_RAISING(OneHot, raiseOneHot);
KILN_MS_RAISING(DepthToSpace, raiseDepthToSpaceOrSpaceToDepth);
KILN_MS_RAISING(SpaceToDepth, raiseDepthToSpaceOrSpaceToDepth);
KILN_MS_RAISING(NonZero, raiseNonZero);
KILN_MS_RAISING(Triu, raiseTriuOrTril);
KILN_MS_RAISING(Tril, raiseTriuOrTril);

} // namespace kiln::ms
