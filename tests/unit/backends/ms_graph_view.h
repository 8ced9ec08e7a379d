// Reading a written .ms in unit tests: the verified root table and the nodes of one primitive type.
#pragma once

#include <cstdint>
#include <vector>

#include <flatbuffers/flatbuffers.h>
#include <gtest/gtest.h>

#include "backends/ms/ms_model_schema.h"

namespace kiln::testing {

inline const msfb::MetaGraph* msRoot(const std::vector<uint8_t>& bytes) {
  flatbuffers::Verifier verifier(bytes.data(), bytes.size());
  EXPECT_TRUE(msfb::VerifyMetaGraphBuffer(verifier));
  return msfb::GetMetaGraph(bytes.data());
}

inline std::vector<const msfb::CNode*> msNodesOfType(const msfb::MetaGraph* g,
                                                     msfb::PrimitiveType type) {
  std::vector<const msfb::CNode*> out;
  for (const auto* n : *g->nodes())
    if (n->primitive()->value_type() == type) out.push_back(n);
  return out;
}

} // namespace kiln::testing
