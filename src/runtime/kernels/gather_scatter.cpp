// Index-driven data movement: Gather, GatherElements, GatherND and the Scatter family with their
// reductions.
#include <algorithm>

#include "kiln/runtime/kernel.h"
#include "shape_util.h"

namespace kiln::rt {
namespace {

using shape::countOf;
using shape::elements;
using shape::ElemOut;
using shape::withElements;

int64_t rankOf(const Tensor& t) { return static_cast<int64_t>(t.dims().size()); }

// Indices as int64 with negative values wrapped by `dim`; false if any is out of range.
bool wrapIndex(int64_t& index, int64_t dim) {
  if (index < 0) index += dim;
  return index >= 0 && index < dim;
}

Status gather(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indicesTensor = ctx.input(1);
  const int64_t rank = rankOf(data);
  auto axis = normalizeAxis(ctx.attrInt("axis", 0), rank);
  if (!axis) return ctx.fail("axis out of range for rank {}", rank);
  const auto a = static_cast<size_t>(*axis);
  std::vector<int64_t> indices = ctx.inputInts(1);
  const int64_t dim = data.dims()[a];
  for (int64_t& i : indices)
    if (!wrapIndex(i, dim)) return ctx.fail("index {} out of range for axis of size {}", i, dim);
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < data.dims().size(); ++i) {
    if (i < a) outer *= data.dims()[i];
    if (i > a) inner *= data.dims()[i];
  }
  std::vector<int64_t> outDims(data.dims().begin(), data.dims().begin() + *axis);
  outDims.insert(outDims.end(), indicesTensor.dims().begin(), indicesTensor.dims().end());
  outDims.insert(outDims.end(), data.dims().begin() + *axis + 1, data.dims().end());
  return withElements(ctx, data.dtype(), [&](auto tag) {
    using T = decltype(tag);
    ElemOut<T> out(data.dtype(), outDims);
    const T* src = elements<T>(data);
    T* dst = out.data();
    if (inner == 1) {
      // Along the last axis (a nearest Resize's columns in NCHW): one element per index, where a
      // copy call per element costs more than the copy.
      for (int64_t o = 0; o < outer; ++o) {
        const T* row = src + o * dim;
        for (int64_t index : indices)
          *dst++ = row[index];
      }
    } else {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t index : indices) {
          const T* from = src + (o * dim + index) * inner;
          dst = std::copy(from, from + inner, dst);
        }
    }
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  });
}

// Offset into `data` for every element of an indices tensor shaped like the output, where the
// index replaces the coordinate on `axis` (GatherElements / ScatterElements addressing).
Status elementOffsets(KernelContext& ctx, const std::vector<int64_t>& dataDims,
                      const std::vector<int64_t>& indexDims, std::vector<int64_t> indices,
                      int64_t axis, std::vector<int64_t>& offsets) {
  if (indexDims.size() != dataDims.size()) return ctx.fail("indices rank differs from data rank");
  for (size_t d = 0; d < dataDims.size(); ++d)
    if (static_cast<int64_t>(d) != axis && indexDims[d] > dataDims[d])
      return ctx.fail("indices dim {} ({}) exceeds data dim ({})", d, indexDims[d], dataDims[d]);
  const std::vector<int64_t> strides = stridesOf(dataDims);
  const auto a = static_cast<size_t>(axis);
  const size_t rank = dataDims.size();
  offsets.resize(indices.size());
  std::vector<int64_t> idx(rank, 0);
  for (size_t i = 0; i < indices.size(); ++i) {
    int64_t index = indices[i];
    if (!wrapIndex(index, dataDims[a]))
      return ctx.fail("index {} out of range for axis of size {}", indices[i], dataDims[a]);
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d)
      off += (d == a ? index : idx[d]) * strides[d];
    offsets[i] = off;
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < indexDims[d]) break;
      idx[d] = 0;
    }
  }
  return Status::ok();
}

Status gatherElements(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  auto axis = normalizeAxis(ctx.attrInt("axis", 0), rankOf(data));
  if (!axis) return ctx.fail("axis out of range");
  std::vector<int64_t> offsets;
  KILN_TRY(elementOffsets(ctx, data.dims(), ctx.inputDims(1), ctx.inputInts(1), *axis, offsets));
  return withElements(ctx, data.dtype(), [&](auto tag) {
    using T = decltype(tag);
    ElemOut<T> out(data.dtype(), ctx.inputDims(1));
    const T* src = elements<T>(data);
    T* dst = out.data();
    for (size_t i = 0; i < offsets.size(); ++i)
      dst[i] = src[offsets[i]];
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  });
}

// Start offsets of the data slices that GatherND / ScatterND address: one per index tuple, with
// the leading batch_dims shared between data and indices. sliceSize is the slice's element count.
Status ndOffsets(KernelContext& ctx, const std::vector<int64_t>& dataDims,
                 const std::vector<int64_t>& indexDims, const std::vector<int64_t>& indices,
                 int64_t batchDims, std::vector<int64_t>& offsets, int64_t& sliceSize) {
  const auto q = static_cast<int64_t>(indexDims.size()), r = static_cast<int64_t>(dataDims.size());
  if (q < 1) return ctx.fail("indices must have rank >= 1");
  const int64_t k = indexDims.back();
  if (batchDims < 0 || batchDims >= q || k < 1 || batchDims + k > r)
    return ctx.fail("bad index tuple length {} / batch_dims {} for data rank {}", k, batchDims, r);
  int64_t batch = 1;
  for (int64_t i = 0; i < batchDims; ++i) {
    if (indexDims[static_cast<size_t>(i)] != dataDims[static_cast<size_t>(i)])
      return ctx.fail("batch dim {} differs between data and indices", i);
    batch *= dataDims[static_cast<size_t>(i)];
  }
  const std::vector<int64_t> strides = stridesOf(dataDims);
  sliceSize = 1;
  for (int64_t i = batchDims + k; i < r; ++i)
    sliceSize *= dataDims[static_cast<size_t>(i)];
  const int64_t batchStride = batchDims > 0 ? strides[static_cast<size_t>(batchDims - 1)] : 0;
  const auto tuples = static_cast<int64_t>(indices.size()) / k;
  const int64_t tuplesPerBatch = batch == 0 ? 0 : tuples / batch;
  offsets.resize(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = tuplesPerBatch == 0 ? 0 : (t / tuplesPerBatch) * batchStride;
    for (int64_t j = 0; j < k; ++j) {
      const auto axis = static_cast<size_t>(batchDims + j);
      int64_t index = indices[static_cast<size_t>(t * k + j)];
      if (!wrapIndex(index, dataDims[axis]))
        return ctx.fail("index {} out of range for axis of size {}", index, dataDims[axis]);
      off += index * strides[axis];
    }
    offsets[static_cast<size_t>(t)] = off;
  }
  return Status::ok();
}

Status gatherND(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const auto& indexDims = ctx.inputDims(1);
  const int64_t batchDims = ctx.attrInt("batch_dims", 0);
  std::vector<int64_t> offsets;
  int64_t sliceSize = 0;
  KILN_TRY(ndOffsets(ctx, data.dims(), indexDims, ctx.inputInts(1), batchDims, offsets, sliceSize));
  std::vector<int64_t> outDims(indexDims.begin(), indexDims.end() - 1);
  outDims.insert(outDims.end(), data.dims().begin() + batchDims + indexDims.back(),
                 data.dims().end());
  return withElements(ctx, data.dtype(), [&](auto tag) {
    using T = decltype(tag);
    ElemOut<T> out(data.dtype(), outDims);
    const T* src = elements<T>(data);
    T* dst = out.data();
    for (int64_t off : offsets)
      dst = std::copy(src + off, src + off + sliceSize, dst);
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  });
}

enum class Reduction { None, Add, Mul, Max, Min };

template <typename T> void combine(T& dst, T src, Reduction r) {
  switch (r) {
  case Reduction::None:
    dst = src;
    break;
  case Reduction::Add:
    if constexpr (std::is_same_v<T, bool>)
      dst = dst || src;
    else
      dst = static_cast<T>(dst + src);
    break;
  case Reduction::Mul:
    if constexpr (std::is_same_v<T, bool>)
      dst = dst && src;
    else
      dst = static_cast<T>(dst * src);
    break;
  case Reduction::Max:
    dst = std::max(dst, src);
    break;
  case Reduction::Min:
    dst = std::min(dst, src);
    break;
  }
}

// Copies data and applies updates[u .. u + sliceSize) at offsets[u / sliceSize]; reductions
// combine duplicates in index order.
Status applyScatter(KernelContext& ctx, const Tensor& data, const Tensor& updates,
                    const std::vector<int64_t>& offsets, int64_t sliceSize, Reduction reduction) {
  if (updates.dtype() != data.dtype()) return ctx.fail("updates dtype differs from data");
  if (static_cast<int64_t>(updates.elementCount()) !=
      static_cast<int64_t>(offsets.size()) * sliceSize)
    return ctx.fail("updates hold {} elements, expected {}", updates.elementCount(),
                    static_cast<int64_t>(offsets.size()) * sliceSize);
  if (reduction == Reduction::None) {
    return withElements(ctx, data.dtype(), [&](auto tag) {
      using T = decltype(tag);
      ElemOut<T> out(data.dtype(), data.dims());
      T* dst = out.data();
      std::copy(elements<T>(data), elements<T>(data) + out.size(), dst);
      const T* src = elements<T>(updates);
      for (size_t u = 0; u < offsets.size(); ++u)
        std::copy(src + u * sliceSize, src + (u + 1) * sliceSize, dst + offsets[u]);
      ctx.setOutput(0, std::move(out).finish());
      return Status::ok();
    });
  }
  const DType dtype = data.dtype();
  if (dtype == DType::Float16 || dtype == DType::BFloat16) {
    const bool half = dtype == DType::Float16;
    std::vector<float> acc = toFloatVector(data), src = toFloatVector(updates);
    for (size_t u = 0; u < offsets.size(); ++u)
      for (int64_t i = 0; i < sliceSize; ++i)
        combine(acc[static_cast<size_t>(offsets[u] + i)], src[u * sliceSize + i], reduction);
    OutTensor out(dtype, data.dims());
    for (size_t i = 0; i < acc.size(); ++i)
      out.data<uint16_t>()[i] = half ? floatToHalf(acc[i]) : floatToBfloat16(acc[i]);
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  }
  bool ok = dispatchNumeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    OutTensor out(dtype, data.dims());
    T* dst = out.data<T>();
    std::copy(reinterpret_cast<const T*>(data.data()),
              reinterpret_cast<const T*>(data.data()) + out.elementCount(), dst);
    const T* src = reinterpret_cast<const T*>(updates.data());
    for (size_t u = 0; u < offsets.size(); ++u)
      for (int64_t i = 0; i < sliceSize; ++i)
        combine(dst[offsets[u] + i], src[static_cast<int64_t>(u) * sliceSize + i], reduction);
    ctx.setOutput(0, std::move(out).finish());
  });
  if (!ok) return ctx.unsupported("reduction on dtype {}", dtypeName(dtype));
  return Status::ok();
}

std::optional<Reduction> reductionOf(const std::string& name) {
  if (name == "none") return Reduction::None;
  if (name == "add") return Reduction::Add;
  if (name == "mul") return Reduction::Mul;
  if (name == "max") return Reduction::Max;
  if (name == "min") return Reduction::Min;
  return std::nullopt;
}

Status scatterElements(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  auto axis = normalizeAxis(ctx.attrInt("axis", 0), rankOf(data));
  if (!axis) return ctx.fail("axis out of range");
  auto reduction = reductionOf(ctx.attrString("reduction", "none"));
  if (!reduction) return ctx.unsupported("reduction '{}'", ctx.attrString("reduction"));
  if (ctx.inputDims(1) != ctx.inputDims(2)) return ctx.fail("indices and updates shapes differ");
  std::vector<int64_t> offsets;
  KILN_TRY(elementOffsets(ctx, data.dims(), ctx.inputDims(1), ctx.inputInts(1), *axis, offsets));
  return applyScatter(ctx, data, ctx.input(2), offsets, 1, *reduction);
}

Status scatterND(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  auto reduction = reductionOf(ctx.attrString("reduction", "none"));
  if (!reduction) return ctx.unsupported("reduction '{}'", ctx.attrString("reduction"));
  std::vector<int64_t> offsets;
  int64_t sliceSize = 0;
  KILN_TRY(ndOffsets(ctx, data.dims(), ctx.inputDims(1), ctx.inputInts(1), 0, offsets, sliceSize));
  return applyScatter(ctx, data, ctx.input(2), offsets, sliceSize, *reduction);
}

KILN_REGISTER_KERNEL("Gather", gather);
KILN_REGISTER_KERNEL("GatherElements", gatherElements);
KILN_REGISTER_KERNEL("GatherND", gatherND);
KILN_REGISTER_KERNEL("ScatterElements", scatterElements);
KILN_REGISTER_KERNEL("Scatter", scatterElements);
KILN_REGISTER_KERNEL("ScatterND", scatterND);

} // namespace
} // namespace kiln::rt
