#include "ms_type_ids.h"

#include <iterator>

namespace kiln::ms {
namespace {

struct TypeIdEntry {
  int id;
  DType dtype;
  bool canonical; // the id written for this dtype (aliases are only read)
};

constexpr TypeIdEntry kTypeIds[] = {
    {30, DType::Bool, true},    {31, DType::Int32, false},  {32, DType::Int8, true},
    {33, DType::Int16, true},   {34, DType::Int32, true},   {35, DType::Int64, true},
    {36, DType::UInt32, false}, {37, DType::UInt8, true},   {38, DType::UInt16, true},
    {39, DType::UInt32, true},  {40, DType::UInt64, true},  {41, DType::Float32, false},
    {42, DType::Float16, true}, {43, DType::Float32, true}, {44, DType::Float64, true},
};
constexpr int kObjectTypeString = 12;

} // namespace

std::optional<int> typeIdOf(DType type) {
  if (type == DType::String) return kObjectTypeString;
  for (const auto& e : kTypeIds)
    if (e.canonical && e.dtype == type) return e.id;
  return std::nullopt;
}

std::optional<DType> dtypeOfTypeId(int id) {
  for (const auto& e : kTypeIds)
    if (e.id == id) return e.dtype;
  return std::nullopt;
}

} // namespace kiln::ms
