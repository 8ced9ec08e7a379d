// Helpers shared by the elementwise, activation, reduction and misc math kernels: dtype families,
// half-precision widening, n-way broadcasting and typed map loops.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/runtime/allocation_limit.h"
#include "kiln/runtime/half_block.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/tensor_util.h"

namespace kiln::rt::math {

inline bool isHalfLike(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// fp16/bf16 tensors are computed in float: widen them into a float32 copy first (weights: the
// executor's copy, made once).
inline Tensor widenToFloat(const Tensor& t) {
  if (auto cached = cachedWidening(t)) return Tensor(DType::Float32, t.dims(), std::move(cached));
  OutTensor out(DType::Float32, t.dims());
  const uint64_t n = t.elementCount();
  const uint16_t* src = reinterpret_cast<const uint16_t*>(t.data());
  float* dst = out.data<float>();
  if (t.dtype() == DType::Float16) {
    halvesToFloats(src, dst, n);
  } else {
    for (uint64_t i = 0; i < n; ++i)
      dst[i] = bfloat16ToFloat(src[i]);
  }
  return std::move(out).finish();
}

// The float32 result of a widened computation, rounded back to fp16/bf16 (`to`); other dtypes
// pass through.
inline Tensor narrowFromFloat(const Tensor& t, DType to) {
  if (!isHalfLike(to) || t.dtype() != DType::Float32) return t;
  OutTensor out(to, t.dims());
  const uint64_t n = t.elementCount();
  const float* src = reinterpret_cast<const float*>(t.data());
  uint16_t* dst = out.data<uint16_t>();
  if (to == DType::Float16) {
    floatsToHalves(src, dst, n);
  } else {
    for (uint64_t i = 0; i < n; ++i)
      dst[i] = floatToBfloat16(src[i]);
  }
  return std::move(out).finish();
}

// Widens half-like tensors, passes others through.
inline Tensor asComputeTensor(const Tensor& t) {
  return isHalfLike(t.dtype()) ? widenToFloat(t) : t;
}

// Dtype families (dispatchFloat, dispatchInteger, dispatchNumeric: tensor_util.h). Each calls
// fn(T{}) and returns false when dtype is not in the family.

// Float32/Float64 and every integer type (no bool).
template <typename Fn> bool dispatchArith(DType dtype, Fn&& fn) {
  if (dispatchFloat(dtype, fn)) return true;
  return dispatchInteger(dtype, fn);
}

// Arithmetic types plus bool.
template <typename Fn> bool dispatchAll(DType dtype, Fn&& fn) {
  if (dtype == DType::Bool) {
    fn(bool{});
    return true;
  }
  return dispatchArith(dtype, fn);
}

template <typename T> constexpr bool isFloatT = std::is_floating_point_v<T>;

// Total element count of dims (outputElementCount: an overflow is K5004 for the node).
inline uint64_t countOf(const std::vector<int64_t>& dims) { return outputElementCount(dims); }

// out[i] = fn(in[i]) over a whole tensor.
template <typename TI, typename TO, typename Fn>
Tensor mapUnary(const Tensor& x, DType outType, Fn&& fn) {
  OutTensor out(outType, x.dims());
  const uint64_t n = x.elementCount();
  const TI* src = reinterpret_cast<const TI*>(x.data());
  TO* dst = out.data<TO>();
  for (uint64_t i = 0; i < n; ++i)
    dst[i] = static_cast<TO>(fn(src[i]));
  return std::move(out).finish();
}

// True when `small` (right-aligned against `outDims`) matches outDims up to some axis and is 1
// after it, as a per-channel [C, 1, 1] operand is against [N, C, H, W]: element j of `small` then
// covers the j-th contiguous block of `inner` output elements.
inline bool blockBroadcast(const std::vector<int64_t>& outDims, const std::vector<int64_t>& small,
                           uint64_t& inner) {
  if (small.size() > outDims.size()) return false;
  const size_t lead = outDims.size() - small.size();
  size_t axis = outDims.size();
  while (axis > lead && small[axis - 1 - lead] == 1)
    --axis;
  inner = 1;
  for (size_t d = axis; d < outDims.size(); ++d)
    inner *= static_cast<uint64_t>(outDims[d]);
  for (size_t d = 0; d < axis; ++d)
    if ((d < lead ? 1 : small[d - lead]) != outDims[d]) return false;
  return inner > 1;
}

// True when `small` equals the trailing dims of `outDims` (leading 1s allowed), as an [H, W]
// operand is against [N, C, H, W]: it repeats unchanged over every outer index.
inline bool suffixBroadcast(const std::vector<int64_t>& outDims,
                            const std::vector<int64_t>& small) {
  if (small.size() > outDims.size()) return false;
  const size_t lead = outDims.size() - small.size();
  size_t d = 0;
  while (d < small.size() && small[d] == 1 && outDims[lead + d] != 1)
    ++d; // leading 1s of `small` that broadcast are only allowed before the matching suffix
  for (size_t e = d; e < small.size(); ++e)
    if (small[e] != outDims[lead + e]) return false;
  // Every axis before the suffix must broadcast (small has 1 or nothing there).
  return countOf(small) > 1;
}

// out = fn(a, b) with numpy broadcasting; the caller has checked the shapes broadcast.
template <typename TA, typename TB, typename TO, typename Fn>
Tensor mapBinary(const Tensor& a, const Tensor& b, DType outType,
                 const std::vector<int64_t>& outDims, Fn&& fn) {
  OutTensor out(outType, outDims);
  const TA* pa = reinterpret_cast<const TA*>(a.data());
  const TB* pb = reinterpret_cast<const TB*>(b.data());
  TO* po = out.data<TO>();
  const uint64_t n = countOf(outDims);
  const uint64_t na = a.elementCount(), nb = b.elementCount();
  if (n == 0) return std::move(out).finish();
  if (na == n && nb == n && a.dims() == b.dims()) {
    for (uint64_t i = 0; i < n; ++i)
      po[i] = static_cast<TO>(fn(pa[i], pb[i]));
  } else if (nb == 1 && na == n) {
    const TB vb = pb[0];
    for (uint64_t i = 0; i < n; ++i)
      po[i] = static_cast<TO>(fn(pa[i], vb));
  } else if (na == 1 && nb == n) {
    const TA va = pa[0];
    for (uint64_t i = 0; i < n; ++i)
      po[i] = static_cast<TO>(fn(va, pb[i]));
  } else if (uint64_t inner = 0; na == n && blockBroadcast(outDims, b.dims(), inner)) {
    for (uint64_t j = 0, o = 0; o < n; ++j) {
      const TB vb = pb[j];
      for (const uint64_t end = o + inner; o < end; ++o)
        po[o] = static_cast<TO>(fn(pa[o], vb));
    }
  } else if (na == n && suffixBroadcast(outDims, b.dims())) {
    for (uint64_t o = 0; o < n; o += nb)
      for (uint64_t i = 0; i < nb; ++i)
        po[o + i] = static_cast<TO>(fn(pa[o + i], pb[i]));
  } else if (nb == n && blockBroadcast(outDims, a.dims(), inner)) {
    for (uint64_t j = 0, o = 0; o < n; ++j) {
      const TA va = pa[j];
      for (const uint64_t end = o + inner; o < end; ++o)
        po[o] = static_cast<TO>(fn(va, pb[o]));
    }
  } else if (nb == n && suffixBroadcast(outDims, a.dims())) {
    for (uint64_t o = 0; o < n; o += na)
      for (uint64_t i = 0; i < na; ++i)
        po[o + i] = static_cast<TO>(fn(pa[i], pb[o + i]));
  } else {
    forEachBroadcast2(outDims, a.dims(), b.dims(), [&](uint64_t o, int64_t ia, int64_t ib) {
      po[o] = static_cast<TO>(fn(pa[ia], pb[ib]));
    });
  }
  return std::move(out).finish();
}

// fn over an fp16/bf16 tensor, computed in float element by element and rounded straight into
// the half output (the same values as widening, computing and narrowing whole tensors, without
// the two float32 copies).
template <typename Fn> Tensor mapUnaryHalf(const Tensor& x, Fn&& fn) {
  if (x.dtype() == DType::Float16) {
    // Blocks widened into a float buffer in L1, computed and rounded back.
    constexpr uint64_t kBlock = 1024;
    float block[kBlock];
    OutTensor out(x.dtype(), x.dims());
    const uint64_t n = x.elementCount();
    const auto* src = reinterpret_cast<const uint16_t*>(x.data());
    uint16_t* dst = out.data<uint16_t>();
    for (uint64_t b0 = 0; b0 < n; b0 += kBlock) {
      const uint64_t len = std::min(kBlock, n - b0);
      halvesToFloats(src + b0, block, len);
      for (uint64_t i = 0; i < len; ++i)
        block[i] = static_cast<float>(fn(block[i]));
      floatsToHalves(block, dst + b0, len);
    }
    return std::move(out).finish();
  }
  return mapUnary<uint16_t, uint16_t>(x, x.dtype(), [&](uint16_t h) {
    return floatToBfloat16(static_cast<float>(fn(bfloat16ToFloat(h))));
  });
}

// fn(a, b) over two fp16/bf16 tensors of one dtype with broadcasting, as mapUnaryHalf.
template <typename Fn>
Tensor mapBinaryHalf(const Tensor& a, const Tensor& b, const std::vector<int64_t>& outDims,
                     Fn&& fn) {
  if (a.dtype() == DType::Float16)
    return mapBinary<uint16_t, uint16_t, uint16_t>(a, b, a.dtype(), outDims,
                                                   [&](uint16_t x, uint16_t y) {
                                                     return floatToHalf(static_cast<float>(
                                                         fn(halfToFloat(x), halfToFloat(y))));
                                                   });
  return mapBinary<uint16_t, uint16_t, uint16_t>(
      a, b, a.dtype(), outDims, [&](uint16_t x, uint16_t y) {
        return floatToBfloat16(static_cast<float>(fn(bfloat16ToFloat(x), bfloat16ToFloat(y))));
      });
}

// Runs fn over a float tensor (f32/f64, fp16/bf16 through float); fn is generic over the element
// type. Output has the input's dtype and shape.
template <typename Fn> Status unaryFloatKernel(KernelContext& ctx, Fn&& fn) {
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (isHalfLike(dt)) {
    ctx.setOutput(0, mapUnaryHalf(x, fn));
    return Status::ok();
  }
  Tensor r;
  if (!dispatchFloat(dt, [&](auto tag) {
        using T = decltype(tag);
        r = mapUnary<T, T>(x, dt, fn);
      }))
    return ctx.unsupported("dtype {} is not supported", dtypeName(dt));
  ctx.setOutput(0, std::move(r));
  return Status::ok();
}

// Like unaryFloatKernel but also over every integer type (fn must handle integers).
template <typename Fn> Status unaryArithKernel(KernelContext& ctx, Fn&& fn) {
  const Tensor& x = ctx.input(0);
  const DType dt = x.dtype();
  if (isHalfLike(dt)) {
    ctx.setOutput(0, mapUnaryHalf(x, fn));
    return Status::ok();
  }
  Tensor r;
  if (!dispatchArith(dt, [&](auto tag) {
        using T = decltype(tag);
        r = mapUnary<T, T>(x, dt, fn);
      }))
    return ctx.unsupported("dtype {} is not supported", dtypeName(dt));
  ctx.setOutput(0, std::move(r));
  return Status::ok();
}

// "[2,3,4]" for error messages.
inline std::string dimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// Before opset 7 binary ops broadcast only with broadcast=1, aligning B's dims at `axis` (default:
// the trailing dims); B then gets trailing ones so numpy broadcasting gives the same result.
inline Tensor legacyBroadcastOperand(KernelContext& ctx, const Tensor& a, const Tensor& b) {
  if (ctx.opset() >= 7 || ctx.attrInt("broadcast", 0) == 0 || b.dtype() == DType::String) return b;
  const int64_t rankA = static_cast<int64_t>(a.dims().size());
  const int64_t rankB = static_cast<int64_t>(b.dims().size());
  int64_t axis = ctx.attrInt("axis", rankA - rankB);
  if (axis < 0) axis += rankA;
  if (axis < 0 || axis + rankB > rankA) return b;
  std::vector<int64_t> dims = b.dims();
  dims.resize(static_cast<size_t>(rankA - axis), 1);
  return Tensor(b.dtype(), std::move(dims), b.buffer());
}

// Binary op over two tensors of one dtype with broadcasting; fn is generic over the element type.
// Half types run in float. `withIntegers` admits the integer types as well as f32/f64.
template <typename Fn>
Status binarySameType(KernelContext& ctx, const Tensor& a, const Tensor& b, bool withIntegers,
                      Fn&& fn) {
  if (a.dtype() != b.dtype())
    return ctx.fail("inputs have different dtypes {} and {}", dtypeName(a.dtype()),
                    dtypeName(b.dtype()));
  auto dims = broadcastShapes(a.dims(), b.dims());
  if (!dims)
    return ctx.fail("shapes {} and {} do not broadcast", dimsText(a.dims()), dimsText(b.dims()));
  const DType dt = a.dtype();
  if (isHalfLike(dt)) {
    ctx.setOutput(0, mapBinaryHalf(a, b, *dims, fn));
    return Status::ok();
  }
  Tensor r;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    r = mapBinary<T, T, T>(a, b, dt, *dims, fn);
  };
  if (!(withIntegers ? dispatchArith(dt, run) : dispatchFloat(dt, run)))
    return ctx.unsupported("dtype {} is not supported", dtypeName(dt));
  ctx.setOutput(0, std::move(r));
  return Status::ok();
}

// binarySameType over the node's two inputs.
template <typename Fn> Status binarySameTypeKernel(KernelContext& ctx, bool withIntegers, Fn&& fn) {
  const Tensor& a = ctx.input(0);
  return binarySameType(ctx, a, legacyBroadcastOperand(ctx, a, ctx.input(1)), withIntegers, fn);
}

// Walks every index of outDims and calls fn(outIndex, offA, offB, offC) for three broadcast inputs.
template <typename Fn>
void forEachBroadcast3(const std::vector<int64_t>& outDims, const std::vector<int64_t>& aDims,
                       const std::vector<int64_t>& bDims, const std::vector<int64_t>& cDims,
                       Fn&& fn) {
  const size_t rank = outDims.size();
  const uint64_t total = countOf(outDims);
  if (total == 0) return;
  if (rank == 0) {
    fn(uint64_t{0}, int64_t{0}, int64_t{0}, int64_t{0});
    return;
  }
  std::array<std::vector<int64_t>, 3> s = {broadcastStrides(aDims, outDims),
                                           broadcastStrides(bDims, outDims),
                                           broadcastStrides(cDims, outDims)};
  std::vector<int64_t> idx(rank, 0);
  const int64_t inner = outDims[rank - 1];
  const int64_t ia = s[0][rank - 1], ib = s[1][rank - 1], ic = s[2][rank - 1];
  int64_t oa = 0, ob = 0, oc = 0;
  for (uint64_t out = 0; out < total; out += static_cast<uint64_t>(inner)) {
    for (int64_t k = 0; k < inner; ++k)
      fn(out + static_cast<uint64_t>(k), oa + k * ia, ob + k * ib, oc + k * ic);
    for (size_t axis = rank - 1; axis-- > 0;) {
      ++idx[axis];
      oa += s[0][axis];
      ob += s[1][axis];
      oc += s[2][axis];
      if (idx[axis] < outDims[axis]) break;
      oa -= s[0][axis] * outDims[axis];
      ob -= s[1][axis] * outDims[axis];
      oc -= s[2][axis] * outDims[axis];
      idx[axis] = 0;
    }
  }
}

// Splits dims around `axis` into (outer, axis extent, inner) for axis-wise kernels.
struct AxisSplit {
  int64_t outer = 1, extent = 1, inner = 1;
};
inline AxisSplit splitAtAxis(const std::vector<int64_t>& dims, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (i < axis)
      s.outer *= dims[static_cast<size_t>(i)];
    else if (i == axis)
      s.extent = dims[static_cast<size_t>(i)];
    else
      s.inner *= dims[static_cast<size_t>(i)];
  }
  return s;
}

} // namespace kiln::rt::math
