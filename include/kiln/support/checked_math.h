// Overflow-checked arithmetic for element counts, byte sizes and offsets: the one place where
// products of dims that come from a model, a flag or a tensor's values are computed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

#include "kiln/support/status.h"

namespace kiln {

// The largest element count and byte size kiln accepts. Keeping both within int64_t means that a
// count, a byte size, a stride or an element offset computed from an accepted shape fits int64_t,
// ptrdiff_t and size_t alike, so kernels and writers can do their index arithmetic unchecked.
inline constexpr uint64_t kMaxTensorExtent = static_cast<uint64_t>(INT64_MAX);

// a * b, a + b and a - b, or nullopt when the exact result does not fit T.
template <typename T> std::optional<T> checkedMul(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T result;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}
template <typename T> std::optional<T> checkedAdd(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T result;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}
template <typename T> std::optional<T> checkedSub(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T result;
  if (__builtin_sub_overflow(a, b, &result)) return std::nullopt;
  return result;
}

// Element count of `dims`: nullopt when a dim is negative or the count exceeds kMaxTensorExtent.
// Zero dims count as 1 for the overflow check, so that the strides of an empty tensor (products of
// its other dims) cannot wrap either.
std::optional<uint64_t> checkedElementCount(std::span<const int64_t> dims);

// Bytes that hold `count` elements of `bitsPerElement` bits (packed sub-byte elements round up);
// nullopt above kMaxTensorExtent.
std::optional<uint64_t> checkedStorageBytes(uint64_t count, unsigned bitsPerElement);

struct TensorExtent {
  uint64_t elements = 0;
  uint64_t bytes = 0;
};

// Element count and byte size of a tensor, or a coded error (`code`, chosen by the caller's
// layer: K2007 at import, K7001/K8001 in the readers, K5002 in the executor ...) naming
// `subject` and the dims: "<subject>: element count of [a,b,c] overflows" or "<subject>: N
// elements of <typeName> overflow the byte size". A negative dim is "<subject> has negative dim
// d at axis i". bitsPerElement 0 (strings) gives bytes 0.
Expected<TensorExtent> checkTensorExtent(std::span<const int64_t> dims, unsigned bitsPerElement,
                                         std::string_view typeName, ErrorCode code,
                                         std::string_view subject,
                                         std::string hint = "check the tensor dims");

} // namespace kiln
