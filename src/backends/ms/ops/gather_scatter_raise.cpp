// .ms raising rules (reader, .ms → IR): Gather, GatherNd, GatherD and the scatters.
#include <optional>
#include <string>
#include <vector>

#include "backends/ms/ms_raise_context.h"

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
