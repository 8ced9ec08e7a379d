// Runtime values ↔ ONNX data files (TensorProto, SequenceProto, OptionalProto .pb files).
#pragma once

#include <string>

#include "kiln/ir/graph.h"
#include "kiln/runtime/value.h"
#include "kiln/support/status.h"

namespace kiln {

// Reads a .pb file; `expected` selects the message kind (Sequence/Optional types use their protos).
Expected<rt::RtValue> readValueFile(const std::string& path, const ValueType& expected);
// Writes a tensor/sequence/optional value as the matching proto, atomically.
Status writeValueFile(const std::string& path, const std::string& name, const rt::RtValue& value);

} // namespace kiln
