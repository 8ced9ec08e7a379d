// Runtime values: a tensor, a sequence of tensors, or an empty optional.
#pragma once

#include <vector>

#include "kiln/ir/tensor.h"

namespace kiln::rt {

struct RtValue {
  enum class Kind { Missing, Tensor, Sequence, OptionalNone };
  Kind kind = Kind::Missing;
  Tensor tensor;
  std::vector<Tensor> sequence;
  DType sequenceDType = DType::Undefined; // element type of an empty sequence

  static RtValue ofTensor(Tensor t) {
    RtValue v;
    v.kind = Kind::Tensor;
    v.tensor = std::move(t);
    return v;
  }
  static RtValue ofSequence(std::vector<Tensor> items, DType dtype = DType::Undefined) {
    RtValue v;
    v.kind = Kind::Sequence;
    v.sequence = std::move(items);
    v.sequenceDType = dtype;
    return v;
  }
  static RtValue none() {
    RtValue v;
    v.kind = Kind::OptionalNone;
    return v;
  }
  bool isTensor() const { return kind == Kind::Tensor; }
  bool isSequence() const { return kind == Kind::Sequence; }
};

} // namespace kiln::rt
