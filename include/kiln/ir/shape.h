// Tensor shapes whose dims are static, symbolic (named) or unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

class Dim {
 public:
  Dim() = default; // unknown
  static Dim known(int64_t value) {
    Dim d;
    d.value_ = value;
    return d;
  }
  static Dim symbol(std::string name) {
    Dim d;
    d.symbol_ = std::move(name);
    return d;
  }

  bool isStatic() const { return value_.has_value(); }
  bool isSymbolic() const { return !value_ && !symbol_.empty(); }
  int64_t value() const { return *value_; }
  const std::string& symbol() const { return symbol_; }
  bool operator==(const Dim& other) const {
    return value_ == other.value_ && symbol_ == other.symbol_;
  }
  std::string toString() const; // "3", "N" or "?"

 private:
  std::optional<int64_t> value_;
  std::string symbol_;
};

class Shape {
 public:
  Shape() = default; // rank unknown
  explicit Shape(std::vector<Dim> dims) : dims_(std::move(dims)), rankKnown_(true) {}
  static Shape fromStatic(const std::vector<int64_t>& dims);
  static Shape scalar() { return Shape(std::vector<Dim>{}); }

  bool hasRank() const { return rankKnown_; }
  size_t rank() const { return dims_.size(); }
  const std::vector<Dim>& dims() const { return dims_; }
  const Dim& operator[](size_t i) const { return dims_[i]; }
  bool isStatic() const;
  // Static dims; only valid when isStatic().
  std::vector<int64_t> staticDims() const;
  // Element count of a static shape; nullopt if not static or on overflow.
  std::optional<uint64_t> elementCount() const;
  bool operator==(const Shape& other) const {
    return rankKnown_ == other.rankKnown_ && dims_ == other.dims_;
  }
  std::string toString() const; // "[1,3,N,?]" or "[*]" for unknown rank

 private:
  std::vector<Dim> dims_;
  bool rankKnown_ = false;
};

// Product of dims with overflow detection; negative dims are rejected (nullopt).
std::optional<uint64_t> checkedElementCount(const std::vector<int64_t>& dims);

} // namespace kiln
