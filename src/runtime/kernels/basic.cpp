// Kernels with no arithmetic: Identity, Constant, Shape, Size and friends.
#include "kiln/ir/constant.h"
#include "kiln/runtime/kernel.h"

namespace kiln::rt {
namespace {

Status identity(KernelContext& ctx) {
  ctx.setOutputValue(0, ctx.inputValue(0));
  return Status::ok();
}

Status constant(KernelContext& ctx) {
  auto value = constantNodeValue(ctx.node());
  if (!value)
    return ctx.unsupported("no supported value attribute (sparse_value is not supported)");
  ctx.setOutput(0, *value);
  return Status::ok();
}

Status shape(KernelContext& ctx) {
  const auto& dims = ctx.inputDims(0);
  int64_t rank = static_cast<int64_t>(dims.size());
  int64_t start = ctx.attrInt("start", 0), end = ctx.attrInt("end", rank);
  auto clampAxis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t{0}, rank); };
  start = clampAxis(start);
  end = clampAxis(end);
  std::vector<int64_t> out;
  for (int64_t i = start; i < end; ++i)
    out.push_back(dims[static_cast<size_t>(i)]);
  ctx.setOutput(0, makeTensor<int64_t>(DType::Int64, {static_cast<int64_t>(out.size())}, out));
  return Status::ok();
}

Status size(KernelContext& ctx) {
  ctx.setOutput(0, scalarInt64Tensor(static_cast<int64_t>(ctx.input(0).elementCount())));
  return Status::ok();
}

KILN_REGISTER_KERNEL("Identity", identity);
KILN_REGISTER_KERNEL("Constant", constant);
KILN_REGISTER_KERNEL("Shape", shape);
KILN_REGISTER_KERNEL("Size", size);

} // namespace
} // namespace kiln::rt
