// DType tables.
#include "kiln/ir/dtype.h"

#include "kiln/support/checked_math.h"

namespace kiln {

std::optional<DType> dtypeFromOnnx(int32_t onnxType) {
  if (onnxType < 0 || onnxType > static_cast<int32_t>(DType::Int4)) return std::nullopt;
  return static_cast<DType>(onnxType);
}

int dtypeBits(DType type) {
  switch (type) {
  case DType::Undefined:
  case DType::String:
    return 0;
  case DType::Bool:
  case DType::UInt8:
  case DType::Int8:
  case DType::Float8E4M3FN:
  case DType::Float8E4M3FNUZ:
  case DType::Float8E5M2:
  case DType::Float8E5M2FNUZ:
    return 8;
  case DType::UInt4:
  case DType::Int4:
    return 4;
  case DType::UInt16:
  case DType::Int16:
  case DType::Float16:
  case DType::BFloat16:
    return 16;
  case DType::Float32:
  case DType::Int32:
  case DType::UInt32:
    return 32;
  case DType::Float64:
  case DType::Int64:
  case DType::UInt64:
  case DType::Complex64:
    return 64;
  case DType::Complex128:
    return 128;
  }
  return 0;
}

const char* dtypeName(DType type) {
  switch (type) {
  case DType::Undefined:
    return "undef";
  case DType::Float32:
    return "f32";
  case DType::UInt8:
    return "u8";
  case DType::Int8:
    return "i8";
  case DType::UInt16:
    return "u16";
  case DType::Int16:
    return "i16";
  case DType::Int32:
    return "i32";
  case DType::Int64:
    return "i64";
  case DType::String:
    return "str";
  case DType::Bool:
    return "bool";
  case DType::Float16:
    return "f16";
  case DType::Float64:
    return "f64";
  case DType::UInt32:
    return "u32";
  case DType::UInt64:
    return "u64";
  case DType::Complex64:
    return "c64";
  case DType::Complex128:
    return "c128";
  case DType::BFloat16:
    return "bf16";
  case DType::Float8E4M3FN:
    return "f8e4m3fn";
  case DType::Float8E4M3FNUZ:
    return "f8e4m3fnuz";
  case DType::Float8E5M2:
    return "f8e5m2";
  case DType::Float8E5M2FNUZ:
    return "f8e5m2fnuz";
  case DType::UInt4:
    return "u4";
  case DType::Int4:
    return "i4";
  }
  return "?";
}

bool isFloatingPoint(DType type) {
  switch (type) {
  case DType::Float32:
  case DType::Float16:
  case DType::Float64:
  case DType::BFloat16:
  case DType::Float8E4M3FN:
  case DType::Float8E4M3FNUZ:
  case DType::Float8E5M2:
  case DType::Float8E5M2FNUZ:
    return true;
  default:
    return false;
  }
}

bool isInteger(DType type) {
  switch (type) {
  case DType::UInt8:
  case DType::Int8:
  case DType::UInt16:
  case DType::Int16:
  case DType::Int32:
  case DType::Int64:
  case DType::UInt32:
  case DType::UInt64:
  case DType::UInt4:
  case DType::Int4:
    return true;
  default:
    return false;
  }
}

std::optional<uint64_t> dtypeStorageBytes(DType type, uint64_t count) {
  return checkedStorageBytes(count, static_cast<unsigned>(dtypeBits(type)));
}

} // namespace kiln
