// The `.ms` FlatBuffers schema as every kiln file must see it: include this, never the generated
// header.
#pragma once

#include <cstdint>

#include <flatbuffers/flatbuffers.h>

namespace flatbuffers {

// FlatBuffers' verifier checks only that a vector's length word is 4-byte aligned, so a hostile
// `.ms` can place a [long] vector's elements at an offset that is 4 but not 8 aligned; every later
// read of them is then a misaligned int64 load (undefined behaviour). Builders align such elements
// to 8, so requiring it refuses no file a real writer makes. Explicit specialization: the generated
// verifiers pick it up by overload, which is why it must be declared before the generated header in
// every translation unit.
template <> inline bool Verifier::VerifyVector<int64_t>(const Vector<int64_t>* const vec) const {
  if (!vec) return true;
  const auto* at = reinterpret_cast<const uint8_t*>(vec);
  // An empty vector has nothing to load: writers may leave it wherever (kiln's own did).
  return VerifyVectorOrString(at, sizeof(int64_t)) &&
         (vec->size() == 0 || VerifyFieldStruct(at, sizeof(uoffset_t), 0, alignof(int64_t)));
}

} // namespace flatbuffers

#include "kiln_proto/ms_model_generated.h"

namespace kiln::ms {
// FlatBuffers verifier limits of every kiln reader and of the writer's own check: a 4-bit LLM holds
// tens of millions of QuantParam tables (one per weight block), past the library's default of one
// million (MindSpore Lite itself verifies with INT32_MAX for both).
inline constexpr flatbuffers::uoffset_t kVerifierMaxDepth = 2048;
inline constexpr flatbuffers::uoffset_t kVerifierMaxTables = 100000000;
} // namespace kiln::ms
