// Shared kernel helpers: allocation, half-precision conversion, casts, broadcasting.
#include "kiln/runtime/tensor_util.h"

#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "kiln/ir/shape.h"
#include "kiln/runtime/allocation_limit.h"
#include "kiln/runtime/half_block.h"
#include "kiln/support/checked_math.h"

namespace kiln::rt {

namespace {

// Size of an output tensor; an overflowing shape throws AllocationRefused (K5004) rather than
// giving a short buffer that the kernel would then write past.
TensorExtent outputExtent(DType dtype, const std::vector<int64_t>& dims) {
  auto extent = checkTensorExtent(dims, dtypeBits(dtype), dtypeName(dtype),
                                  ErrorCode::RuntimeOutOfMemory, "its output");
  if (!extent) throw AllocationRefused(extent.status().message());
  return *extent;
}

} // namespace

uint64_t outputElementCount(const std::vector<int64_t>& dims) {
  return outputExtent(DType::Undefined, dims).elements;
}

void checkOutputFits(DType dtype, const std::vector<int64_t>& dims) {
  checkAllocationLimit(outputExtent(dtype, dims).bytes);
}

OutTensor::OutTensor(DType dtype, std::vector<int64_t> dims, Init init)
    : dtype_(dtype), dims_(std::move(dims)) {
  const TensorExtent extent = outputExtent(dtype_, dims_);
  count_ = extent.elements;
  size_ = extent.bytes;
  // Packed 4-bit data ends in a padding nibble when the count is odd; it must not be garbage.
  if (dtype == DType::Int4 || dtype == DType::UInt4) init = Init::Zeroed;
  Allocation a = allocateBuffer(size_, init);
  buffer_ = std::move(a.buffer);
  data_ = a.data;
}

Tensor OutTensor::finish() && { return Tensor(dtype_, std::move(dims_), std::move(buffer_)); }

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else { // subnormal: renormalize
      int shift = 0;
      while (!(mantissa & 0x400)) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ff;
      bits = sign | static_cast<uint32_t>(127 - 15 - shift + 1) << 23 | mantissa << 13;
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | mantissa << 13;
  } else {
    bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
  }
  return std::bit_cast<float>(bits);
}

uint16_t floatToHalf(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t absBits = bits & 0x7fffffff;
  if (absBits >= 0x7f800000u) // inf or nan
    return sign | (absBits > 0x7f800000u ? 0x7e00 : 0x7c00);
  if (absBits >= 0x477ff000u) return sign | 0x7c00; // rounds to >= 65520: overflow to inf
  if (absBits < 0x38800000u) {              // below the smallest normal half: subnormal or zero
    if (absBits < 0x33000000u) return sign; // < 2^-25 rounds to zero
    uint32_t exponent = absBits >> 23;
    uint32_t mantissa = (absBits & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - exponent; // 14 - (exponent - 127) + 13 - 1 ... aligns to half subnormal
    uint32_t halfMantissa = mantissa >> (shift);
    uint32_t remainder = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (halfMantissa & 1))) ++halfMantissa;
    return sign | static_cast<uint16_t>(halfMantissa);
  }
  uint32_t rounded = absBits + 0xfff + ((absBits >> 13) & 1); // round to nearest even on bit 13
  return sign | static_cast<uint16_t>((rounded - 0x38000000u) >> 13);
}

float bfloat16ToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t floatToBfloat16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffff) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40); // quiet nan
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

double elementAsDouble(const Tensor& t, uint64_t i) {
  const uint8_t* p = t.data();
  if (t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16) {
    uint16_t h;
    std::memcpy(&h, p + i * 2, 2);
    return t.dtype() == DType::Float16 ? halfToFloat(h) : bfloat16ToFloat(h);
  }
  // Packed types have no C++ element type to dispatch on (reading them as one gave NaN → 0).
  if (t.dtype() == DType::Int4 || t.dtype() == DType::UInt4)
    return static_cast<double>(nibbleAt(p, i, t.dtype() == DType::Int4));
  double out = std::numeric_limits<double>::quiet_NaN();
  dispatchNumeric(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    out = static_cast<double>(v);
  });
  return out;
}

std::vector<int64_t> toInt64Vector(const Tensor& t) {
  std::vector<int64_t> out(t.elementCount());
  if (t.dtype() == DType::Int64) {
    if (!out.empty()) std::memcpy(out.data(), t.data(), out.size() * 8);
    return out;
  }
  for (uint64_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<int64_t>(elementAsDouble(t, i));
  return out;
}

std::vector<float> toFloatVector(const Tensor& t) {
  std::vector<float> out(t.elementCount());
  if (t.dtype() == DType::Float32) {
    if (!out.empty()) std::memcpy(out.data(), t.data(), out.size() * 4);
    return out;
  }
  for (uint64_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<float>(elementAsDouble(t, i));
  return out;
}

namespace {

template <typename To> To convertScalar(double v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != 0.0;
  } else if constexpr (std::is_integral_v<To>) {
    if (std::isnan(v)) return 0;
    // Out-of-range float → int is undefined in ONNX; clamp so the result is at least deterministic.
    double lo = static_cast<double>(std::numeric_limits<To>::lowest());
    double hi = static_cast<double>(std::numeric_limits<To>::max());
    if (v <= lo) return std::numeric_limits<To>::lowest();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

std::string numberToString(const Tensor& t, uint64_t i) {
  double v = elementAsDouble(t, i);
  if (isFloatingPoint(t.dtype())) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
    return fmt::format(
        "{}", t.dtype() == DType::Float64 ? v : static_cast<double>(static_cast<float>(v)));
  }
  if (t.dtype() == DType::UInt64) {
    uint64_t u;
    std::memcpy(&u, t.data() + i * 8, 8);
    return std::to_string(u);
  }
  if (t.dtype() == DType::Int64) {
    int64_t s;
    std::memcpy(&s, t.data() + i * 8, 8);
    return std::to_string(s);
  }
  return fmt::format("{}", static_cast<int64_t>(v));
}

// Writes v as element i of `out` in its dtype; false when the dtype has no numeric conversion.
bool storeConverted(OutTensor& out, uint64_t i, double v) {
  if (dispatchNumeric(out.dtype(), [&](auto tag) {
        out.data<decltype(tag)>()[i] = convertScalar<decltype(tag)>(v);
      }))
    return true;
  if (out.dtype() == DType::Float16)
    out.data<uint16_t>()[i] = floatToHalf(static_cast<float>(v));
  else if (out.dtype() == DType::BFloat16)
    out.data<uint16_t>()[i] = floatToBfloat16(static_cast<float>(v));
  else
    return false;
  return true;
}

} // namespace

std::optional<Tensor> castTensor(const Tensor& t, DType to) {
  const uint64_t n = t.elementCount();
  if (t.dtype() == to) return t;
  if (to == DType::String) {
    if (t.dtype() == DType::String) return t;
    std::vector<std::string> values(n);
    for (uint64_t i = 0; i < n; ++i)
      values[i] = numberToString(t, i);
    return Tensor::strings(t.dims(), std::move(values));
  }
  OutTensor out(to, t.dims());
  if (t.dtype() == DType::String) {
    for (uint64_t i = 0; i < n; ++i) {
      const std::string& s = t.stringValues()[i];
      double v;
      std::string lower;
      for (char c : s)
        lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (lower == "nan")
        v = std::numeric_limits<double>::quiet_NaN();
      else if (lower == "inf" || lower == "+inf" || lower == "infinity")
        v = INFINITY;
      else if (lower == "-inf" || lower == "-infinity")
        v = -INFINITY;
      else
        v = std::strtod(s.c_str(), nullptr);
      if (!storeConverted(out, i, v)) return std::nullopt;
    }
    return std::move(out).finish();
  }
  // float16 <-> float32 in blocks (the same values as the element loop below).
  if (t.dtype() == DType::Float16 && to == DType::Float32) {
    halvesToFloats(reinterpret_cast<const uint16_t*>(t.data()), out.data<float>(), n);
    return std::move(out).finish();
  }
  if (t.dtype() == DType::Float32 && to == DType::Float16) {
    floatsToHalves(t.data(), out.data<uint16_t>(), n);
    return std::move(out).finish();
  }
  // Exact int64 paths avoid the double round trip for large values.
  if ((t.dtype() == DType::Int64 || t.dtype() == DType::UInt64) && isInteger(to)) {
    const uint8_t* src = t.data();
    bool ok = dispatchNumeric(to, [&](auto tag) {
      using T = decltype(tag);
      for (uint64_t i = 0; i < n; ++i) {
        uint64_t raw;
        std::memcpy(&raw, src + i * 8, 8);
        out.data<T>()[i] = static_cast<T>(raw);
      }
    });
    if (ok) return std::move(out).finish();
  }
  for (uint64_t i = 0; i < n; ++i) {
    double v = elementAsDouble(t, i);
    if (t.dtype() == DType::Float32 && isInteger(to)) v = std::trunc(v);
    if (!storeConverted(out, i, v)) return std::nullopt;
  }
  if (!dispatchNumeric(t.dtype(), [](auto) {}) && t.dtype() != DType::Float16 &&
      t.dtype() != DType::BFloat16)
    return std::nullopt;
  return std::move(out).finish();
}

Tensor scalarInt64Tensor(int64_t v) { return Tensor::fromValues<int64_t>(DType::Int64, {}, {v}); }

std::optional<std::vector<int64_t>> broadcastShapes(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da < 0 || db < 0) return std::nullopt;
    if (da == db || db == 1)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else
      return std::nullopt;
  }
  return out;
}

std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

std::vector<int64_t> broadcastStrides(const std::vector<int64_t>& shape,
                                      const std::vector<int64_t>& target) {
  std::vector<int64_t> own = stridesOf(shape);
  std::vector<int64_t> out(target.size(), 0);
  size_t offset = target.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    out[i + offset] = shape[i] == 1 ? 0 : own[i];
  return out;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

} // namespace kiln::rt
