// Element-width data movement shared by shape, sequence and control-flow kernels.
#include "shape_util.h"

#include <algorithm>

namespace kiln::rt::shape {

Tensor reshaped(const Tensor& src, std::vector<int64_t> dims) {
  KILN_CHECK(checkedElementCount(dims) == checkedElementCount(src.dims()),
             "reshape of [{}] to [{}] changes the element count", fmt::join(src.dims(), ","),
             fmt::join(dims, ","));
  if (src.dtype() == DType::String) return Tensor::strings(std::move(dims), src.stringValues());
  return Tensor(src.dtype(), std::move(dims), src.buffer());
}

std::optional<Tensor> stridedView(const Tensor& src, std::vector<int64_t> dims,
                                  const std::vector<int64_t>& strides, int64_t offset) {
  std::optional<Tensor> result;
  dispatchElement(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    ElemOut<T> out(src.dtype(), dims);
    stridedCopy(out.data(), elements<T>(src), dims, strides, offset);
    result = std::move(out).finish();
  });
  return result;
}

std::optional<Tensor> transposed(const Tensor& src, const std::vector<int64_t>& perm) {
  const auto& dims = src.dims();
  std::vector<int64_t> inStrides = stridesOf(dims);
  std::vector<int64_t> outDims(perm.size()), strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    outDims[i] = dims[static_cast<size_t>(perm[i])];
    strides[i] = inStrides[static_cast<size_t>(perm[i])];
  }
  return stridedView(src, std::move(outDims), strides, 0);
}

std::optional<Tensor> concatenated(const std::vector<const Tensor*>& parts, int64_t axis) {
  if (parts.empty()) return std::nullopt;
  const Tensor& first = *parts[0];
  std::vector<int64_t> outDims = first.dims();
  const auto ax = static_cast<size_t>(axis);
  outDims[ax] = 0;
  for (const Tensor* p : parts)
    outDims[ax] += p->dims()[ax];
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < ax; ++i)
    outer *= outDims[i];
  for (size_t i = ax + 1; i < outDims.size(); ++i)
    inner *= outDims[i];
  std::optional<Tensor> result;
  dispatchElement(first.dtype(), [&](auto tag) {
    using T = decltype(tag);
    ElemOut<T> out(first.dtype(), outDims);
    T* dst = out.data();
    const int64_t outRow = outDims[ax] * inner;
    int64_t column = 0;
    for (const Tensor* p : parts) {
      const int64_t row = p->dims()[ax] * inner;
      const T* src = elements<T>(*p);
      for (int64_t o = 0; o < outer; ++o)
        std::copy(src + o * row, src + (o + 1) * row, dst + o * outRow + column);
      column += row;
    }
    result = std::move(out).finish();
  });
  return result;
}

std::optional<Tensor> sliceAxis(const Tensor& src, int64_t axis, int64_t start, int64_t length) {
  std::vector<int64_t> dims = src.dims();
  std::vector<int64_t> strides = stridesOf(dims);
  const auto ax = static_cast<size_t>(axis);
  dims[ax] = length;
  return stridedView(src, std::move(dims), strides, start * strides[ax]);
}

} // namespace kiln::rt::shape
