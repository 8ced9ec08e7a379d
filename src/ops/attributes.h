// What an ONNX node's attributes mean, decoded once for the executor and both backends:
// kind-checked access against the op's schema, with the schema's defaults.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln::ops {

// Why `node`'s attributes disagree with the ONNX schema of its op at `opset` (an attribute of the
// wrong kind, e.g. a FLOAT where the schema says INT); "" when they agree or no schema is known.
std::string attributeKindReason(const Node& node, int64_t opset);

// True when kiln itself declares `opType` (ai.onnx) at `opset` because the onnx library it builds
// with has no schema that new (Attention, RMSNormalization, RotaryEmbedding, Swish, ...).
bool kilnDeclaresOp(const std::string& opType, int64_t opset);

// The same as a coded error (K2013, naming the node and the attribute), for the importer.
Status checkAttributeKinds(const Node& node, int64_t opset);

// Kind-checked reads. A wrong kind cannot reach them for ops with a schema (the importer refuses
// it); for the rest they report K2013 instead of throwing.
Expected<int64_t> intAttr(const Node& node, const char* name, int64_t def);
Expected<float> floatAttr(const Node& node, const char* name, float def);
Expected<std::string> stringAttr(const Node& node, const char* name, std::string def);
Expected<std::vector<int64_t>> intsAttr(const Node& node, const char* name,
                                        std::vector<int64_t> def);

} // namespace kiln::ops
