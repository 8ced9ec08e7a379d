// .ms rules of the gather_scatter family (Gather, GatherND).
// Lowering (ONNX → .ms: a pure check and the lower that emits ops) and raising (the reader's
// rules for the .ms ops this family emits, back to ONNX ops) side by side.
#include <optional>
#include <string>
#include <vector>

#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

std::string checkGather(const Node& n, const lowering::OpContext&) {
  auto axis = ops::intAttr(n, "axis", 0);
  if (!axis) return axis.status().message();
  auto batchDims = ops::intAttr(n, "batch_dims", 0);
  if (!batchDims) return batchDims.status().message();
  if (*batchDims != 0) return fmt::format("batch_dims {}", *batchDims);
  return {};
}

Status lowerGather(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", 0));
  if (axis < 0) {
    if (rank < 0) return dynamicShape("negative axis over an unknown rank");
    axis += rank;
  }
  if (n.opType() == "GatherND") {
    auto x = ctx.input(n.input(0), Layout::Onnx);
    if (!x) return x.status();
    auto idx = ctx.input(n.input(1), Layout::Onnx);
    if (!idx) return idx.status();
    auto y = ctx.output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    ctx.emit(fb::PrimitiveType_GatherNd, emptyTable<fb::GatherNd>(), {*x, *idx}, {*y});
    return Status::ok();
  }
  bool quantized = false;
  uint32_t data;
  if (auto c = ctx.constOf(n.input(0))) {
    auto id = ctx.weightTensor(n.input(0), {}, axis, kFormatNCHW, &quantized);
    if (!id) return id.status();
    data = *id;
  } else {
    auto id = ctx.input(n.input(0), Layout::Onnx);
    if (!id) return id.status();
    data = *id;
  }
  uint32_t indices;
  if (auto c = ctx.constOf(n.input(1))) {
    // int32 indices with negatives resolved (the runtime reads them as non-negative int32).
    std::vector<int64_t> v = intValues(c->tensor);
    auto d = ctx.dimOf(n.input(0), static_cast<size_t>(axis));
    for (auto& i : v)
      if (i < 0) {
        if (!d) return dynamicShape("negative index over an unknown dim");
        i += *d;
      }
    std::vector<int32_t> dims;
    for (int64_t x : c->tensor.dims())
      dims.push_back(static_cast<int32_t>(x));
    indices = ctx.intConst(v, c->name, dims);
  } else {
    auto id = ctx.input(n.input(1), Layout::Onnx);
    if (!id) return id.status();
    indices = *id;
  }
  uint32_t ax = ctx.intConst({axis}, n.output(0)->name() + "_axis");
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_Gather, emptyTable<fb::Gather>(), {data, indices, ax}, {*y},
           quantized);
  return Status::ok();
}

KILN_MS_LOWERING("Gather", checkGather, lowerGather);
KILN_MS_LOWERING("GatherND", checkGather, lowerGather);
// ---- end of lowering

} // namespace
} // namespace kiln::ms

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

namespace kiln::ms {

namespace {

Status raiseGather(RaisingContext& ctx, const msfb::Primitive&) {
  int64_t axis = 0;
  if (ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(auto a, ctx.constInts(2));
    if (a.size() != 1) return ctx.nodeUnsupported("Gather axis must hold one value");
    axis = a[0];
  }
  // A quantized table is per channel along the gathered axis.
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0, {std::nullopt, {}, int(axis)}));
  KILN_ASSIGN_OR_RETURN(Value * idx, ctx.in(1));
  return ctx.bind(0, ctx.emit("Gather", {x, idx}, ctx.axisAttr(axis)));
}

Status raiseGatherNd(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * idx, ctx.int64Input(1));
  return ctx.bind(0, ctx.emit("GatherND", {x, idx}));
}

Status raiseGatherD(RaisingContext& ctx, const msfb::Primitive&) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(auto axis, ctx.constInts(1));
  if (axis.size() != 1) return ctx.nodeUnsupported("GatherD dim must hold one value");
  KILN_ASSIGN_OR_RETURN(Value * idx, ctx.in(2));
  return ctx.bind(0, ctx.emit("GatherElements", {x, idx}, ctx.axisAttr(axis[0])));
}

Status raiseScatterNd(RaisingContext& ctx, const msfb::Primitive&) {
  // indices, updates, shape → scatter into zeros of that shape.
  KILN_ASSIGN_OR_RETURN(Value * idx, ctx.int64Input(0));
  KILN_ASSIGN_OR_RETURN(Value * upd, ctx.in(1));
  KILN_ASSIGN_OR_RETURN(Value * shape, ctx.int64Input(2));
  auto dt = ms::dtypeOfTypeId(ctx.tensor(ctx.inIndex(1))->dataType()).value_or(DType::Float32);
  auto zero = dtypeStorageBytes(dt, 1);
  if (!zero) return ctx.nodeUnsupported("ScatterNd updates type");
  Tensor z(dt, {1}, Buffer::owned(std::vector<uint8_t>(*zero, 0)));
  Value* zeros = ctx.emit("ConstantOfShape", {shape}, {{"value", Attribute::ofTensor(z)}});
  return ctx.bind(0, ctx.emit("ScatterND", {zeros, idx, upd}));
}

Status raiseScatterNdUpdateOrAdd(RaisingContext& ctx, const msfb::Primitive& p) {
  KILN_ASSIGN_OR_RETURN(Value * data, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * idx, ctx.int64Input(1));
  KILN_ASSIGN_OR_RETURN(Value * upd, ctx.in(2));
  Node::AttributeList attrs;
  if (p.value_type() == msfb::PrimitiveType_TensorScatterAdd)
    attrs.push_back({"reduction", Attribute::ofString("add")});
  return ctx.bind(0, ctx.emit("ScatterND", {data, idx, upd}, std::move(attrs)));
}

Status raiseScatterElements(RaisingContext& ctx, const msfb::Primitive& p) {
  KILN_ASSIGN_OR_RETURN(Value * data, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * idx, ctx.in(1));
  KILN_ASSIGN_OR_RETURN(Value * upd, ctx.in(2));
  return ctx.bind(0, ctx.emit("ScatterElements", {data, idx, upd},
                              ctx.axisAttr(p.value_as_ScatterElements()->axis())));
}

} // namespace

KILN_MS_RAISING(Gather, raiseGather);
KILN_MS_RAISING(GatherNd, raiseGatherNd);
KILN_MS_RAISING(GatherD, raiseGatherD);
KILN_MS_RAISING(ScatterNd, raiseScatterNd);
KILN_MS_RAISING(ScatterNdUpdate, raiseScatterNdUpdateOrAdd);
KILN_MS_RAISING(TensorScatterAdd, raiseScatterNdUpdateOrAdd);
KILN_MS_RAISING(ScatterElements, raiseScatterElements);

} // namespace kiln::ms
