// Element types: every ONNX tensor type, numbered as onnx.proto's TensorProto.DataType.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace kiln {

enum class DType : int32_t {
  Undefined = 0,
  Float32 = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Float64 = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
  Float8E4M3FN = 17,
  Float8E4M3FNUZ = 18,
  Float8E5M2 = 19,
  Float8E5M2FNUZ = 20,
  UInt4 = 21,
  Int4 = 22,
};

// The DType for an ONNX data_type number, or nullopt when the number is not a known type.
std::optional<DType> dtypeFromOnnx(int32_t onnxType);
inline int32_t dtypeToOnnx(DType type) { return static_cast<int32_t>(type); }

// Storage bits per element (4 for the packed int4 types, 0 for String/Undefined).
int dtypeBits(DType type);
// Short printable name: f32, f16, i64, bool, str ...
const char* dtypeName(DType type);
bool isFloatingPoint(DType type);
bool isInteger(DType type);

// Bytes needed for `count` elements, rounding packed sub-byte types up; nullopt on overflow.
std::optional<uint64_t> dtypeStorageBytes(DType type, uint64_t count);

} // namespace kiln
