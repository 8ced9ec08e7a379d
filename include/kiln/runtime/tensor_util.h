// Helpers kernels share: output allocation, fp16/bf16 conversion, casts, broadcasting, type
// dispatch.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "kiln/ir/tensor.h"
#include "kiln/runtime/memory.h"

namespace kiln::rt {

// A tensor under construction: kernels fill data<T>() and then finish() it into an immutable
// Tensor. The bytes start uninitialised unless `init` is Init::Zeroed: a kernel that does not
// write every element (accumulation, scatter, partial fills) must ask for zeroed bytes or clear
// them itself. They come from the running executor's buffer pool (memory.h).
class OutTensor {
 public:
  OutTensor(DType dtype, std::vector<int64_t> dims, Init init = Init::Uninitialised);
  template <typename T> T* data() { return reinterpret_cast<T*>(data_); }
  uint8_t* bytes() { return data_; }
  size_t byteSize() const { return size_; }
  uint64_t elementCount() const { return count_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  DType dtype() const { return dtype_; }
  Tensor finish() &&;

 private:
  DType dtype_;
  std::vector<int64_t> dims_;
  uint64_t count_;
  size_t size_;
  std::shared_ptr<const Buffer> buffer_;
  uint8_t* data_ = nullptr;
};

// IEEE binary16 / bfloat16 <-> float, round to nearest even (no library in Debian does this
// portably for C++20 without hardware intrinsics).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBfloat16(float f);

// Element i of packed 4-bit data (ONNX INT4/UINT4: two per byte, low nibble first); int4 is
// sign-extended.
inline int64_t nibbleAt(const uint8_t* data, uint64_t i, bool isSigned) {
  const unsigned nibble = (data[i / 2] >> ((i % 2) * 4)) & 0xfu;
  return isSigned && nibble >= 8 ? static_cast<int64_t>(nibble) - 16 : nibble;
}
// Element i of any numeric/bool tensor as double (for generic, non-hot paths).
double elementAsDouble(const Tensor& t, uint64_t i);
// Values of an integer tensor (int4..int64, uint4..uint64) as int64.
std::vector<int64_t> toInt64Vector(const Tensor& t);
// Values of any numeric tensor as float.
std::vector<float> toFloatVector(const Tensor& t);

// ONNX Cast semantics between numeric/bool types (float→int truncates toward zero; saturating
// for fp8 types is not supported). String casts go through decimal text.
std::optional<Tensor> castTensor(const Tensor& t, DType to);

// Tensor from a vector of values of the C++ type matching dtype.
template <typename T>
Tensor makeTensor(DType dtype, std::vector<int64_t> dims, const std::vector<T>& v) {
  return Tensor::fromValues<T>(dtype, std::move(dims), v);
}
Tensor scalarInt64Tensor(int64_t v);

// Numpy-style multidirectional broadcast of two shapes; nullopt if incompatible.
std::optional<std::vector<int64_t>> broadcastShapes(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b);
// Row-major strides; broadcastStrides gives the strides of `shape` seen through `target`
// (0 on broadcast axes), shape right-aligned to target.
std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape);
std::vector<int64_t> broadcastStrides(const std::vector<int64_t>& shape,
                                      const std::vector<int64_t>& target);

// Walks every index of `outDims` and calls fn(outIndex, offsetA, offsetB) with offsets into two
// broadcast inputs. Iterates the innermost axis in a tight loop.
template <typename Fn>
void forEachBroadcast2(const std::vector<int64_t>& outDims, const std::vector<int64_t>& aDims,
                       const std::vector<int64_t>& bDims, Fn&& fn) {
  const size_t rank = outDims.size();
  uint64_t total = 1;
  for (int64_t d : outDims)
    total *= static_cast<uint64_t>(d);
  if (total == 0) return;
  std::vector<int64_t> sa = broadcastStrides(aDims, outDims), sb = broadcastStrides(bDims, outDims);
  if (rank == 0) {
    fn(uint64_t{0}, int64_t{0}, int64_t{0});
    return;
  }
  std::vector<int64_t> idx(rank, 0);
  const int64_t inner = outDims[rank - 1];
  const int64_t ia = sa[rank - 1], ib = sb[rank - 1];
  int64_t offA = 0, offB = 0;
  for (uint64_t out = 0; out < total; out += static_cast<uint64_t>(inner)) {
    for (int64_t k = 0; k < inner; ++k)
      fn(out + static_cast<uint64_t>(k), offA + k * ia, offB + k * ib);
    for (size_t axis = rank - 1; axis-- > 0;) {
      ++idx[axis];
      offA += sa[axis];
      offB += sb[axis];
      if (idx[axis] < outDims[axis]) break;
      offA -= sa[axis] * outDims[axis];
      offB -= sb[axis] * outDims[axis];
      idx[axis] = 0;
    }
  }
}

// Type dispatch: calls fn(T{}) with the C++ type for dtype; returns false for unsupported dtypes.
// Float16/BFloat16 are not dispatched (kernels convert them through float).

// Every integer dtype.
template <typename Fn> bool dispatchInteger(DType dtype, Fn&& fn) {
  switch (dtype) {
  case DType::Int8:
    fn(int8_t{});
    return true;
  case DType::UInt8:
    fn(uint8_t{});
    return true;
  case DType::Int16:
    fn(int16_t{});
    return true;
  case DType::UInt16:
    fn(uint16_t{});
    return true;
  case DType::Int32:
    fn(int32_t{});
    return true;
  case DType::UInt32:
    fn(uint32_t{});
    return true;
  case DType::Int64:
    fn(int64_t{});
    return true;
  case DType::UInt64:
    fn(uint64_t{});
    return true;
  default:
    return false;
  }
}

// Float32 and Float64.
template <typename Fn> bool dispatchFloat(DType dtype, Fn&& fn) {
  switch (dtype) {
  case DType::Float32:
    fn(float{});
    return true;
  case DType::Float64:
    fn(double{});
    return true;
  default:
    return false;
  }
}

// Float32/Float64, bool and every integer dtype.
template <typename Fn> bool dispatchNumeric(DType dtype, Fn&& fn) {
  if (dtype == DType::Bool) {
    fn(bool{});
    return true;
  }
  return dispatchFloat(dtype, fn) || dispatchInteger(dtype, fn);
}

// Normalizes a possibly negative axis into [0, rank); nullopt if out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

} // namespace kiln::rt
