// Shape helpers.
#include "kiln/ir/shape.h"

#include <fmt/format.h>

#include "kiln/support/checked_math.h"

namespace kiln {

std::string Dim::toString() const {
  if (value_) return std::to_string(*value_);
  if (!symbol_.empty()) return symbol_;
  return "?";
}

Shape Shape::fromStatic(const std::vector<int64_t>& dims) {
  std::vector<Dim> out;
  out.reserve(dims.size());
  for (int64_t d : dims)
    out.push_back(Dim::known(d));
  return Shape(std::move(out));
}

bool Shape::isStatic() const {
  if (!rankKnown_) return false;
  for (const Dim& d : dims_)
    if (!d.isStatic()) return false;
  return true;
}

std::vector<int64_t> Shape::staticDims() const {
  std::vector<int64_t> out;
  out.reserve(dims_.size());
  for (const Dim& d : dims_)
    out.push_back(d.isStatic() ? d.value() : -1);
  return out;
}

std::optional<uint64_t> Shape::elementCount() const {
  if (!isStatic()) return std::nullopt;
  return checkedElementCount(staticDims());
}

std::string Shape::toString() const {
  if (!rankKnown_) return "[*]";
  std::string out = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) out += ",";
    out += dims_[i].toString();
  }
  return out + "]";
}

std::optional<uint64_t> checkedElementCount(const std::vector<int64_t>& dims) {
  return checkedElementCount(std::span<const int64_t>(dims));
}

} // namespace kiln
