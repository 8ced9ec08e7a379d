// .ms rules of the gather_scatter family (Gather, GatherND).
// Lowering (ONNX → .ms: a pure check and the lower that emits ops) and raising (the reader's
// rules for the .ms ops this family emits, back to ONNX ops) side by side.
#include <optional>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
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
  if (*batchDims != 0 && n.opType() != "GatherND") return fmt::format("batch_dims {}", *batchDims);
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
    KILN_ASSIGN_OR_RETURN(const int64_t batchDims, ops::intAttr(n, "batch_dims", 0));
    if (batchDims != 0) {
      // batch_dims b: every index row gets its b batch coordinates in front (constant columns
      // concatenated on the last axis), and the gather runs over the whole data.
      auto ishape = ctx.staticShape(n.input(1));
      if (!ishape || int64_t(ishape->size()) <= batchDims)
        return bad("batch_dims {} over indices of unknown shape", batchDims);
      Chain ch(ctx, n);
      uint32_t i32 = ch.cast(*idx, kTypeInt32);
      std::vector<int32_t> colDims(ishape->begin(), ishape->end());
      colDims.back() = 1;
      int64_t rows = 1;
      for (size_t d = 0; d + 1 < ishape->size(); ++d)
        rows *= (*ishape)[d];
      std::vector<uint32_t> columns;
      for (int64_t b = 0; b < batchDims; ++b) {
        int64_t inner = 1;
        for (size_t d = size_t(b) + 1; d + 1 < ishape->size(); ++d)
          inner *= (*ishape)[d];
        std::vector<double> pos(static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r)
          pos[size_t(r)] = double((r / inner) % (*ishape)[size_t(b)]);
        columns.push_back(ch.constant(pos, kTypeInt32, colDims));
      }
      columns.push_back(i32);
      std::vector<int32_t> fullDims(ishape->begin(), ishape->end());
      fullDims.back() = int32_t((*ishape).back() + batchDims);
      const int64_t last = int64_t(ishape->size()) - 1;
      *idx = ch.op(fb::PrimitiveType_Concat, columns, ch.tmp(kTypeInt32, fullDims),
                   [=](FBB& b) { return fb::CreateConcat(b, last).Union(); });
    }
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

std::string checkGatherElements(const Node& n, const lowering::OpContext&) {
  auto axis = ops::intAttr(n, "axis", 0);
  return axis ? std::string() : axis.status().message();
}

// GatherElements → GatherD(x, dim, index). Indices are made non-negative first (constants here,
// run-time ones by a FloorMod with the axis size).
Status lowerGatherElements(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", 0));
  if (axis < 0) {
    if (rank < 0) return bad("negative axis over an unknown rank");
    axis += rank;
  }
  auto d = ctx.dimOf(n.input(0), static_cast<size_t>(axis));
  Chain ch(ctx, n);
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  uint32_t idx;
  if (auto c = ctx.constOf(n.input(1))) {
    std::vector<int64_t> v = intValues(c->tensor);
    for (auto& i : v)
      if (i < 0) {
        if (!d) return bad("negative index over an unknown axis size");
        i += *d;
      }
    std::vector<int32_t> dims;
    for (int64_t e : c->tensor.dims())
      dims.push_back(static_cast<int32_t>(e));
    idx = ctx.intConst(v, c->name, dims);
  } else {
    if (!d) return bad("run-time indices over an unknown axis size");
    auto id = ctx.int32Input(n.input(1));
    if (!id) return id.status();
    idx = ch.binary(fb::PrimitiveType_FloorMod, *id, ch.scalar(double(*d), kTypeInt32));
  }
  uint32_t dim = ctx.intConst({axis}, n.output(0)->name() + "_dim", std::vector<int32_t>{});
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_GatherD, emptyTable<fb::GatherD>(), {*x, dim, idx}, {*y});
  return Status::ok();
}

// ScatterND → ScatterNdUpdate(data, i32 indices, updates); reduction "add" → TensorScatterAdd.
std::string checkScatterND(const Node& n, const lowering::OpContext&) {
  auto reduction = ops::stringAttr(n, "reduction", "none");
  if (!reduction) return reduction.status().message();
  if (*reduction != "none" && *reduction != "add")
    return fmt::format("reduction '{}' (.ms scatters by update or add)", *reduction);
  for (const Value* v : n.inputs())
    if (!v) return "an omitted input";
  return {};
}

Status lowerScatterND(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const std::string reduction, ops::stringAttr(n, "reduction", "none"));
  auto data = ctx.input(n.input(0), Layout::Onnx);
  if (!data) return data.status();
  auto idx = ctx.int32Input(n.input(1));
  if (!idx) return idx.status();
  auto upd = ctx.input(n.input(2), Layout::Onnx);
  if (!upd) return upd.status();
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (reduction == "add")
    ctx.emit(fb::PrimitiveType_TensorScatterAdd, emptyTable<fb::TensorScatterAdd>(),
             {*data, *idx, *upd}, {*y});
  else
    ctx.emit(fb::PrimitiveType_ScatterNdUpdate, emptyTable<fb::ScatterNdUpdate>(),
             {*data, *idx, *upd}, {*y});
  return Status::ok();
}

// ScatterElements (and the older Scatter) → ScatterNdUpdate / TensorScatterAdd over full
// coordinates: for every index element its position, with the axis coordinate replaced by the
// index (made non-negative), concatenated along a new last axis.
std::string checkScatterElements(const Node& n, const lowering::OpContext&) {
  if (auto axis = ops::intAttr(n, "axis", 0); !axis) return axis.status().message();
  auto reduction = ops::stringAttr(n, "reduction", "none");
  if (!reduction) return reduction.status().message();
  if (*reduction != "none" && *reduction != "add")
    return fmt::format("reduction '{}' (.ms scatters by update or add)", *reduction);
  for (const Value* v : n.inputs())
    if (!v) return "an omitted input";
  return {};
}

Status lowerScatterElements(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const std::string reduction, ops::stringAttr(n, "reduction", "none"));
  KILN_ASSIGN_OR_RETURN(int64_t axis, ops::intAttr(n, "axis", 0));
  const int rank = ctx.rankOf(n.input(0));
  if (rank < 1) return bad("data of unknown rank");
  if (axis < 0) axis += rank;
  auto ishape = ctx.staticShape(n.input(1));
  auto size = ctx.dimOf(n.input(0), static_cast<size_t>(axis));
  if (!ishape || !size) return bad("indices or data of unknown shape");
  if (static_cast<int>(ishape->size()) != rank) return bad("indices rank differs from data rank");
  Chain ch(ctx, n);
  auto data = ctx.input(n.input(0), Layout::Onnx);
  if (!data) return data.status();
  std::vector<int32_t> colDims(ishape->begin(), ishape->end());
  colDims.push_back(1);
  int64_t count = 1;
  for (int64_t d : *ishape)
    count *= d;
  uint32_t idx;
  if (auto c = ctx.constOf(n.input(1))) {
    std::vector<double> v;
    for (int64_t i : intValues(c->tensor))
      v.push_back(double(i < 0 ? i + *size : i));
    idx = ch.constant(v, kTypeInt32, colDims);
  } else {
    auto id = ctx.int32Input(n.input(1));
    if (!id) return id.status();
    uint32_t nonNeg = ch.binary(fb::PrimitiveType_FloorMod, *id, ch.scalar(double(*size), kTypeInt32));
    std::vector<int64_t> col(colDims.begin(), colDims.end());
    idx = ctx.reshapeTensor(nonNeg, col, n.output(0)->name() + "_axis_coord");
  }
  std::vector<uint32_t> columns;
  for (int d = 0; d < rank; ++d) {
    if (d == axis) {
      columns.push_back(idx);
      continue;
    }
    // Position along dim d of every index element (row-major walk of the indices shape).
    std::vector<double> pos(static_cast<size_t>(count));
    int64_t inner = 1;
    for (int e = d + 1; e < rank; ++e)
      inner *= (*ishape)[size_t(e)];
    for (int64_t k = 0; k < count; ++k)
      pos[size_t(k)] = double((k / inner) % (*ishape)[size_t(d)]);
    columns.push_back(ch.constant(pos, kTypeInt32, colDims));
  }
  std::vector<int32_t> coordDims(ishape->begin(), ishape->end());
  coordDims.push_back(rank);
  const int64_t last = rank;
  uint32_t coords = ch.op(fb::PrimitiveType_Concat, columns, ch.tmp(kTypeInt32, coordDims),
                          [=](FBB& b) { return fb::CreateConcat(b, last).Union(); });
  auto upd = ctx.input(n.input(2), Layout::Onnx);
  if (!upd) return upd.status();
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ch.op(reduction == "add" ? fb::PrimitiveType_TensorScatterAdd : fb::PrimitiveType_ScatterNdUpdate,
        {*data, coords, *upd}, *y);
  return Status::ok();
}

KILN_MS_LOWERING("Gather", checkGather, lowerGather);
KILN_MS_LOWERING("ScatterElements", checkScatterElements, lowerScatterElements);
KILN_MS_LOWERING("Scatter", checkScatterElements, lowerScatterElements);
KILN_MS_LOWERING("ScatterND", checkScatterND, lowerScatterND);
KILN_MS_LOWERING("GatherElements", checkGatherElements, lowerGatherElements);
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
