// .ms lowering rules of the gather_scatter family (Gather, GatherND).
#include "../ms_context.h"
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
    if (rank < 0) return bad("negative axis over an unknown rank");
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
        if (!d) return bad("negative index over an unknown dim");
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
