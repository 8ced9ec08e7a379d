// Attribute kinds checked against the ONNX operator schemas (onnx's OpSchemaRegistry), so a node
// whose attribute has the wrong kind is one coded error wherever it is read.
#include "ops/attributes.h"
#include "ops/matmul_nbits.h"
#include "ops/validate.h"

#include <fmt/format.h>
#include <onnx/defs/schema.h>

namespace kiln::ops {
namespace {

using ProtoKind = onnx::AttributeProto::AttributeType;

ProtoKind protoKindOf(AttrKind kind) {
  switch (kind) {
  case AttrKind::Float:
    return onnx::AttributeProto::FLOAT;
  case AttrKind::Int:
    return onnx::AttributeProto::INT;
  case AttrKind::String:
    return onnx::AttributeProto::STRING;
  case AttrKind::Tensor:
    return onnx::AttributeProto::TENSOR;
  case AttrKind::Graph:
    return onnx::AttributeProto::GRAPH;
  case AttrKind::SparseTensor:
    return onnx::AttributeProto::SPARSE_TENSOR;
  case AttrKind::TypeProto:
    return onnx::AttributeProto::TYPE_PROTO;
  case AttrKind::Floats:
    return onnx::AttributeProto::FLOATS;
  case AttrKind::Ints:
    return onnx::AttributeProto::INTS;
  case AttrKind::Strings:
    return onnx::AttributeProto::STRINGS;
  case AttrKind::Tensors:
    return onnx::AttributeProto::TENSORS;
  case AttrKind::Graphs:
    return onnx::AttributeProto::GRAPHS;
  case AttrKind::SparseTensors:
    return onnx::AttributeProto::SPARSE_TENSORS;
  case AttrKind::TypeProtos:
    return onnx::AttributeProto::TYPE_PROTOS;
  }
  return onnx::AttributeProto::UNDEFINED;
}

// The schema's spelling of a kind (AttributeProto.AttributeType: "INT", "FLOATS", ...).
std::string protoKindName(ProtoKind kind) { return onnx::AttributeProto::AttributeType_Name(kind); }

Status kindError(const Node& node, const char* name, AttrKind have, ProtoKind want) {
  return makeError(ErrorCode::BadAttribute,
                   fmt::format("set '{}' as {} in the exporter (the ONNX schema's kind)", name,
                               protoKindName(want)),
                   "node '{}' ({}): attribute '{}' has kind {}, but {} declares it {}", node.name(),
                   node.opType(), name, protoKindName(protoKindOf(have)), node.opType(),
                   protoKindName(want));
}

// Ops of ai.onnx opsets newer than the onnx library kiln builds with (its registry stops at
// opset 17): kiln declares their attribute kinds itself, from the operator specs, so they are
// checked at import like every other op. `since` is the opset the declaration holds from.
struct KilnAttr {
  const char* name;
  ProtoKind kind;
};
struct KilnSchema {
  const char* op;
  int since;
  std::vector<KilnAttr> attrs;
  OpArity arity;
};

const std::vector<KilnSchema>& kilnSchemas() {
  using A = onnx::AttributeProto;
  static const std::vector<KilnAttr> attentionAttrs = {
      {"is_causal", A::INT},        {"kv_num_heads", A::INT},
      {"q_num_heads", A::INT},      {"qk_matmul_output_mode", A::INT},
      {"scale", A::FLOAT},          {"softcap", A::FLOAT},
      {"softmax_precision", A::INT}};
  static const std::vector<KilnSchema> table = {
      {"Mish", 18, {}, {1, 1, 1, 1}},
      {"GroupNormalization",
       18,
       {{"epsilon", A::FLOAT}, {"num_groups", A::INT}, {"stash_type", A::INT}},
       {3, 3, 1, 1}},
      {"Gelu", 20, {{"approximate", A::STRING}}, {1, 1, 1, 1}},
      {"RMSNormalization",
       23,
       {{"axis", A::INT}, {"epsilon", A::FLOAT}, {"stash_type", A::INT}},
       {2, 2, 1, 1}},
      {"RotaryEmbedding",
       23,
       {{"interleaved", A::INT}, {"num_heads", A::INT}, {"rotary_embedding_dim", A::INT}},
       {3, 4, 1, 1}},
      {"Attention", 23, attentionAttrs, {3, 6, 1, 4}},
      // Opset 24 adds a seventh input, nonpad_kv_seqlen.
      {"Attention", 24, attentionAttrs, {3, 7, 1, 4}},
      {"Swish", 24, {{"alpha", A::FLOAT}}, {1, 1, 1, 1}},
      // Opset 18 makes the input optional: no input (or an empty name) is an empty optional.
      {"OptionalHasElement", 18, {}, {0, 1, 1, 1}},
  };
  return table;
}

// kiln's declaration of `op` at `opset`, when the library has none that new.
const KilnSchema* kilnSchema(const std::string& op, int64_t opset, int librarySince) {
  const KilnSchema* best = nullptr;
  for (const KilnSchema& s : kilnSchemas())
    if (op == s.op && s.since <= opset && s.since > librarySince &&
        (!best || s.since > best->since))
      best = &s;
  return best;
}

} // namespace

std::optional<OpArity> kilnArity(const std::string& opType, int64_t opset) {
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(opType, static_cast<int>(opset), "");
  const KilnSchema* own = kilnSchema(opType, opset, schema ? schema->SinceVersion() : 0);
  if (!own) return std::nullopt;
  return own->arity;
}

bool kilnDeclaresOp(const std::string& opType, int64_t opset) {
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(opType, static_cast<int>(opset), "");
  return kilnSchema(opType, opset, schema ? schema->SinceVersion() : 0) != nullptr;
}

std::string attributeKindReason(const Node& node, int64_t opset) {
  if (opset <= 0) return {};
  registerMicrosoftSchemas(); // so com.microsoft ops kiln runs are checked like ai.onnx ones
  const std::string domain = node.domain() == "ai.onnx" ? std::string() : node.domain();
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(node.opType(), static_cast<int>(opset), domain);
  if (const KilnSchema* own =
          domain.empty() ? kilnSchema(node.opType(), opset, schema ? schema->SinceVersion() : 0)
                         : nullptr) {
    for (const auto& [name, attr] : node.attributes()) {
      if (!attr.refAttrName().empty()) continue;
      for (const KilnAttr& want : own->attrs) {
        if (name != want.name || protoKindOf(attr.kind()) == want.kind) continue;
        return fmt::format("attribute '{}' has kind {}, but {} (opset {}) declares it {}", name,
                           protoKindName(protoKindOf(attr.kind())), node.opType(), opset,
                           protoKindName(want.kind));
      }
    }
    return {};
  }
  if (!schema) return {};
  for (const auto& [name, attr] : node.attributes()) {
    if (!attr.refAttrName().empty()) continue; // bound by the calling function
    auto it = schema->attributes().find(name);
    if (it == schema->attributes().end()) continue; // unknown attributes are each rule's call
    ProtoKind want = it->second.type;
    if (want == onnx::AttributeProto::UNDEFINED || protoKindOf(attr.kind()) == want) continue;
    return fmt::format("attribute '{}' has kind {}, but {} (opset {}) declares it {}", name,
                       protoKindName(protoKindOf(attr.kind())), node.opType(), opset,
                       protoKindName(want));
  }
  return {};
}

Status checkAttributeKinds(const Node& node, int64_t opset) {
  std::string reason = attributeKindReason(node, opset);
  if (reason.empty()) return Status::ok();
  return Status(ErrorCode::BadAttribute,
                fmt::format("node '{}' ({}): {}", node.name(), node.opType(), reason),
                "give the attribute the kind the ONNX operator schema names, in the exporter");
}

Expected<int64_t> intAttr(const Node& node, const char* name, int64_t def) {
  const Attribute* a = node.attribute(name);
  if (!a) return def;
  if (a->kind() != AttrKind::Int)
    return kindError(node, name, a->kind(), onnx::AttributeProto::INT);
  return a->asInt();
}

Expected<float> floatAttr(const Node& node, const char* name, float def) {
  const Attribute* a = node.attribute(name);
  if (!a) return def;
  if (a->kind() != AttrKind::Float)
    return kindError(node, name, a->kind(), onnx::AttributeProto::FLOAT);
  return a->asFloat();
}

Expected<std::string> stringAttr(const Node& node, const char* name, std::string def) {
  const Attribute* a = node.attribute(name);
  if (!a) return def;
  if (a->kind() != AttrKind::String)
    return kindError(node, name, a->kind(), onnx::AttributeProto::STRING);
  return a->asString();
}

Expected<std::vector<int64_t>> intsAttr(const Node& node, const char* name,
                                        std::vector<int64_t> def) {
  const Attribute* a = node.attribute(name);
  if (!a) return def;
  if (a->kind() != AttrKind::Ints)
    return kindError(node, name, a->kind(), onnx::AttributeProto::INTS);
  return a->asInts();
}

} // namespace kiln::ops
