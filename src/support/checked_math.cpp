// Overflow-checked element counts and byte sizes (kiln/support/checked_math.h).
#include "kiln/support/checked_math.h"

#include <fmt/ranges.h>

namespace kiln {

std::optional<uint64_t> checkedElementCount(std::span<const int64_t> dims) {
  uint64_t count = 1;
  bool empty = false;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d == 0) {
      empty = true;
      continue;
    }
    auto product = checkedMul<uint64_t>(count, static_cast<uint64_t>(d));
    if (!product || *product > kMaxTensorExtent) return std::nullopt;
    count = *product;
  }
  return empty ? 0 : count;
}

std::optional<uint64_t> checkedStorageBytes(uint64_t count, unsigned bitsPerElement) {
  auto bits = checkedMul<uint64_t>(count, bitsPerElement);
  if (!bits) return std::nullopt;
  const uint64_t bytes = *bits / 8 + (*bits % 8 != 0);
  if (bytes > kMaxTensorExtent) return std::nullopt;
  return bytes;
}

Expected<TensorExtent> checkTensorExtent(std::span<const int64_t> dims, unsigned bitsPerElement,
                                         std::string_view typeName, ErrorCode code,
                                         std::string_view subject, std::string hint) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < 0)
      return makeError(code, std::move(hint), "{} has negative dim {} at axis {}", subject, dims[i],
                       i);
  auto count = checkedElementCount(dims);
  if (!count)
    return makeError(code, std::move(hint), "{}: element count of [{}] overflows", subject,
                     fmt::join(dims, ","));
  auto bytes = checkedStorageBytes(*count, bitsPerElement);
  if (!bytes)
    return makeError(code, std::move(hint), "{}: {} elements of {} overflow the byte size", subject,
                     *count, typeName);
  return TensorExtent{*count, *bytes};
}

} // namespace kiln
