// Element-width helpers for data-movement kernels (shape, gather/scatter, sequence, control flow):
// they copy whole elements of any dtype, strings included, without interpreting values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/ranges.h>

#include "kiln/ir/tensor.h"
#include "kiln/runtime/allocation_limit.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/support/checked_math.h"

namespace kiln::rt::shape {

// Stand-in for 16-byte elements (complex128): moved, never computed on.
struct Bytes16 {
  uint64_t lo, hi;
};

// Calls fn(T{}) with a trivially copyable type as wide as one element, or std::string for string
// tensors. Returns false for packed sub-byte and undefined types, which cannot be moved
// element-wise.
template <typename Fn> bool dispatchElement(DType dtype, Fn&& fn) {
  if (dtype == DType::String) {
    fn(std::string{});
    return true;
  }
  switch (dtypeBits(dtype)) {
  case 8:
    fn(uint8_t{});
    return true;
  case 16:
    fn(uint16_t{});
    return true;
  case 32:
    fn(uint32_t{});
    return true;
  case 64:
    fn(uint64_t{});
    return true;
  case 128:
    fn(Bytes16{});
    return true;
  default:
    return false;
  }
}

template <typename T> const T* elements(const Tensor& t) {
  if constexpr (std::is_same_v<T, std::string>)
    return t.stringValues().data();
  else
    return reinterpret_cast<const T*>(t.data());
}

// An output tensor whose elements are of width type T (see dispatchElement).
template <typename T> class ElemOut {
 public:
  ElemOut(DType dtype, std::vector<int64_t> dims, Init init = Init::Uninitialised)
      : out_(dtype, std::move(dims), init) {}
  T* data() { return out_.template data<T>(); }
  uint64_t size() const { return out_.elementCount(); }
  Tensor finish() && { return std::move(out_).finish(); }

 private:
  OutTensor out_;
};

template <> class ElemOut<std::string> {
 public:
  ElemOut(DType, std::vector<int64_t> dims, Init = Init::Uninitialised)
      : dims_(std::move(dims)), values_(stringCountOf(dims_)) {}
  std::string* data() { return values_.data(); }
  uint64_t size() const { return values_.size(); }
  Tensor finish() && { return Tensor::strings(std::move(dims_), std::move(values_)); }

 private:
  // Checked as OutTensor checks numeric outputs (AllocationRefused, K5004), and against the
  // memory limit at the size of the empty strings alone.
  static size_t stringCountOf(const std::vector<int64_t>& dims) {
    auto extent = checkTensorExtent(dims, 8 * sizeof(std::string), "string",
                                    ErrorCode::RuntimeOutOfMemory, "its output");
    if (!extent) throw AllocationRefused(extent.status().message());
    checkAllocationLimit(extent->bytes);
    return extent->elements;
  }
  std::vector<int64_t> dims_;
  std::vector<std::string> values_;
};

// Element count of dims (outputElementCount: an overflow is K5004 for the node).
inline uint64_t countOf(const std::vector<int64_t>& dims) { return outputElementCount(dims); }

// Copies the elements of a strided view of src (offset + sum idx[k] * strides[k]) into dst in
// row-major order of dims. Strides may be 0 (broadcast) or negative (reversed).
template <typename T>
void stridedCopy(T* dst, const T* src, const std::vector<int64_t>& dims,
                 const std::vector<int64_t>& strides, int64_t offset) {
  const size_t rank = dims.size();
  const uint64_t total = countOf(dims);
  if (total == 0) return;
  if (rank == 0) {
    dst[0] = src[offset];
    return;
  }
  const int64_t inner = dims[rank - 1], innerStride = strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t off = offset;
  for (uint64_t out = 0; out < total; out += static_cast<uint64_t>(inner)) {
    T* d = dst + out;
    if (innerStride == 1) {
      std::copy(src + off, src + off + inner, d);
    } else {
      for (int64_t k = 0; k < inner; ++k)
        d[k] = src[off + k * innerStride];
    }
    for (size_t axis = rank - 1; axis-- > 0;) {
      off += strides[axis];
      if (++idx[axis] < dims[axis]) break;
      off -= strides[axis] * dims[axis];
      idx[axis] = 0;
    }
  }
}

// A tensor sharing src's elements under new dims (same element count).
Tensor reshaped(const Tensor& src, std::vector<int64_t> dims);
// Materializes a strided view of src; nullopt for dtypes that cannot be moved element-wise.
std::optional<Tensor> stridedView(const Tensor& src, std::vector<int64_t> dims,
                                  const std::vector<int64_t>& strides, int64_t offset);
// src with axes permuted: output axis i is input axis perm[i].
std::optional<Tensor> transposed(const Tensor& src, const std::vector<int64_t>& perm);
// Concatenation along axis; all parts share dtype and every other dim (checked by the caller).
std::optional<Tensor> concatenated(const std::vector<const Tensor*>& parts, int64_t axis);
// Elements [start, start + length) of axis.
std::optional<Tensor> sliceAxis(const Tensor& src, int64_t axis, int64_t start, int64_t length);

// Sets output i from a data-movement result; no result means the dtype cannot be moved
// element-wise (packed 4-bit types), which is reported as unsupported rather than computed wrong.
inline Status setMoved(KernelContext& ctx, size_t i, std::optional<Tensor> t, DType dtype) {
  if (!t) return ctx.unsupported("dtype {} cannot be moved element-wise", dtypeName(dtype));
  ctx.setOutput(i, std::move(*t));
  return Status::ok();
}

// Runs fn(T{}) → Status for the element width of dtype (see dispatchElement).
template <typename Fn> Status withElements(KernelContext& ctx, DType dtype, Fn&& fn) {
  Status status = Status::ok();
  if (!dispatchElement(dtype, [&](auto tag) { status = fn(tag); }))
    return ctx.unsupported("dtype {} cannot be moved element-wise", dtypeName(dtype));
  return status;
}

} // namespace kiln::rt::shape
